"""Cancelled leagues: `league.status` may be `cancelled` (`mus league cancel`).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-05

A cancelled league has ended with the matches it had played: no worker claims its others, and its secret is
published as a finished league's. Only the CHECK constraint changes; the downgrade makes a cancelled league paused
(no worker claims its matches there either).
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("league") as batch:
        batch.drop_constraint(op.f("ck_league_status"), type_="check")
        batch.create_check_constraint(
            op.f("ck_league_status"), "status IN ('created', 'running', 'paused', 'finished', 'cancelled')"
        )


def downgrade() -> None:
    op.execute("UPDATE league SET status = 'paused' WHERE status = 'cancelled'")
    with op.batch_alter_table("league") as batch:
        batch.drop_constraint(op.f("ck_league_status"), type_="check")
        batch.create_check_constraint(
            op.f("ck_league_status"), "status IN ('created', 'running', 'paused', 'finished')"
        )
