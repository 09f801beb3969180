"""Paused leagues: `league.status` may be `paused` (`mus league pause`).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-05

No worker claims a match of a paused league; `mus league run` resumes it. Only the CHECK constraint changes; the
downgrade makes a paused league running again (its matches are then claimed as before).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("league") as batch:
        batch.drop_constraint(op.f("ck_league_status"), type_="check")
        batch.create_check_constraint(
            op.f("ck_league_status"), "status IN ('created', 'running', 'paused', 'finished')"
        )


def downgrade() -> None:
    op.execute("UPDATE league SET status = 'running' WHERE status = 'paused'")
    with op.batch_alter_table("league") as batch:
        batch.drop_constraint(op.f("ck_league_status"), type_="check")
        batch.create_check_constraint(op.f("ck_league_status"), "status IN ('created', 'running', 'finished')")
