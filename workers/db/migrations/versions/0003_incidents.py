"""Faults and incidents apart: `match_result.incidents` holds what happened to a seat's connection or process, and
`match_result.faults` only the rules' faults (illegal_action, timeout, limit).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

Results stored before this revision listed both in `faults`, the incidents after the faults. The upgrade moves
each incident (protocol_error, disconnect, crash, absent) to `incidents`, in its order. A `stall` entry is
dropped: the referee recorded one with every timeout of a connected seat, so it only repeated a `timeout` fault
that stays in `faults`. The downgrade appends the incidents to `faults` again, as they were stored before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INCIDENT_CAUSES = frozenset({"protocol_error", "disconnect", "crash", "absent"})
REPEATED_TIMEOUT = "stall"

_results = sa.table(
    "match_result",
    sa.column("id", sa.Integer()),
    sa.column("faults", sa.JSON()),
    sa.column("incidents", sa.JSON()),
)


def upgrade() -> None:
    with op.batch_alter_table("match_result") as batch:
        batch.add_column(sa.Column("incidents", sa.JSON(), nullable=False, server_default=sa.text("'[]'")))
    connection = op.get_bind()
    for row_id, stored in connection.execute(sa.select(_results.c.id, _results.c.faults)).all():
        entries: list[dict[str, Any]] = list(stored or [])
        faults = [entry for entry in entries if entry.get("cause") not in INCIDENT_CAUSES | {REPEATED_TIMEOUT}]
        incidents = [entry for entry in entries if entry.get("cause") in INCIDENT_CAUSES]
        if faults != entries:
            connection.execute(
                _results.update().where(_results.c.id == row_id).values(faults=faults, incidents=incidents)
            )


def downgrade() -> None:
    connection = op.get_bind()
    rows = connection.execute(sa.select(_results.c.id, _results.c.faults, _results.c.incidents)).all()
    for row_id, faults, incidents in rows:
        if incidents:
            connection.execute(
                _results.update().where(_results.c.id == row_id).values(faults=[*(faults or []), *incidents])
            )
    with op.batch_alter_table("match_result") as batch:
        batch.drop_column("incidents")
