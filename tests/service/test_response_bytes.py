"""The responses a table puts together as wire bytes (`table.Outbox`) are messages every protobuf library reads
alike: no field outside the schema, and no singular field twice in one message, at any depth. A message field
sent twice is merged by some parsers and replaced by others (protobufjs, which the JavaScript bots use), so a
view split over two `view` fields would reach a JavaScript bot half empty (docs/protocol.md, Conventions).
"""

from __future__ import annotations

import asyncio
import random

from google.protobuf.descriptor import Descriptor

from clients.bots.wire_random import random_wire_action
from mus.v1 import play_pb2
from mus.v1 import types_pb2 as pb
from referee.engine.rules import Rules
from referee.service.table import Outbox, Table, TableStatus


def _varint(data: bytes, position: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7


def fields_twice(data: bytes, descriptor: Descriptor, path: str = "") -> list[str]:
    """Every singular field found more than once in one message of these bytes, and every unknown field, as a
    path (`update.decision_request.view`); walks every nested message."""
    found: list[str] = []
    seen: set[int] = set()
    position = 0
    while position < len(data):
        key, position = _varint(data, position)
        number, wire_type = key >> 3, key & 7
        field = descriptor.fields_by_number.get(number)
        name = f"{path}{field.name if field is not None else f'#{number}'}"
        payload = b""
        if wire_type == 0:
            _, position = _varint(data, position)
        elif wire_type == 2:
            length, position = _varint(data, position)
            payload, position = data[position : position + length], position + length
        else:
            position += 8 if wire_type == 1 else 4
        if field is None:
            found.append(f"{name} (not in {descriptor.full_name})")
            continue
        if not field.is_repeated:
            if number in seen:
                found.append(name)
            seen.add(number)
        if field.message_type is not None and wire_type == 2:
            found += fields_twice(payload, field.message_type, f"{name}.")
    return found


def test_every_response_a_table_sends_has_each_singular_field_once_at_every_depth() -> None:
    async def scenario() -> None:
        checked = 0
        for seed in range(3):
            table = Table("t", Rules(), seed, ["a", "b", "c", "d"])
            outboxes: list[Outbox] = [asyncio.Queue() for _ in range(4)]
            for seat, outbox in enumerate(outboxes):  # batching or not, with the hand's events in views or not
                table.attach(seat, outbox, batch=seat % 2 == 0, omit_hand_events=seat >= 2)
            rng = random.Random(seed)
            requests: dict[int, play_pb2.DecisionRequest] = {}
            while True:
                for seat, outbox in enumerate(outboxes):
                    while not outbox.empty():
                        message = outbox.get_nowait()
                        if not isinstance(message, bytes):
                            continue
                        assert fields_twice(message, play_pb2.PlayResponse.DESCRIPTOR) == [], message
                        checked += 1
                        response = play_pb2.PlayResponse.FromString(message)
                        kind = response.WhichOneof("message")
                        if kind == "decision_request":
                            requests[seat] = response.decision_request
                        elif kind == "update" and response.update.HasField("decision_request"):
                            requests[seat] = response.update.decision_request
                if table.status is not TableStatus.RUNNING:
                    break
                seat = min(table.decisions)
                request = requests.pop(seat)
                table.act(seat, request.decision_id, random_wire_action(rng, request))
        assert checked > 300

    asyncio.run(scenario())


def test_the_walk_finds_a_singular_field_sent_twice() -> None:
    """The check itself: a request whose view is split over two fields, as a careless byte join would send it."""
    request = play_pb2.DecisionRequest(decision_id=3)
    request.view.seat = 1
    split = request.SerializeToString() + play_pb2.DecisionRequest(view=pb.SeatView(mano=2)).SerializeToString()
    assert fields_twice(split, play_pb2.DecisionRequest.DESCRIPTOR) == ["view"]
    response = play_pb2.PlayResponse(decision_request=request).SerializeToString()
    assert fields_twice(response, play_pb2.PlayResponse.DESCRIPTOR) == []
