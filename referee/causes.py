"""The one enum of causes on the wire (types.proto `FaultCause`) and the two kinds of cause it carries.

A fault counts against the team (rules §13) and is the engine's `FaultCause`; an incident is what happened to a
seat's connection or process, the table's `IncidentCause`. Each maps to the wire through one table each way, so
no edge spells a cause by changing the case of its name; the database stores a cause by its enum's `value`.
"""

from __future__ import annotations

from enum import StrEnum

from mus.v1 import types_pb2 as pb
from referee.engine.outcome import FaultCause


class IncidentCause(StrEnum):
    """What happened to a seat's connection or process. An incident counts nothing by itself: the rules'
    faults are the engine's `FaultCause`."""

    PROTOCOL_ERROR = "protocol_error"
    DISCONNECT = "disconnect"
    CRASH = "crash"
    STALL = "stall"
    """Reserved for a seat that stops reading its stream: never recorded by this referee (types.proto)."""
    ABSENT = "absent"


Cause = FaultCause | IncidentCause

CAUSE_TO_PROTO: dict[Cause, pb.FaultCause.ValueType] = {
    FaultCause.ILLEGAL_ACTION: pb.FAULT_CAUSE_ILLEGAL_ACTION,
    FaultCause.TIMEOUT: pb.FAULT_CAUSE_TIMEOUT,
    FaultCause.LIMIT: pb.FAULT_CAUSE_LIMIT,
    IncidentCause.PROTOCOL_ERROR: pb.FAULT_CAUSE_PROTOCOL_ERROR,
    IncidentCause.DISCONNECT: pb.FAULT_CAUSE_DISCONNECT,
    IncidentCause.CRASH: pb.FAULT_CAUSE_CRASH,
    IncidentCause.STALL: pb.FAULT_CAUSE_STALL,
    IncidentCause.ABSENT: pb.FAULT_CAUSE_ABSENT,
}
"""Every cause as the wire carries it."""

CAUSE_FROM_PROTO: dict[pb.FaultCause.ValueType, Cause] = {wire: cause for cause, wire in CAUSE_TO_PROTO.items()}
"""Every wire cause but FAULT_CAUSE_UNSPECIFIED, as the engine (a fault) or the table (an incident) names it."""
