"""Persistent bots: `bot_version.persistent`, set by `mus bot add --persistent` (docs/pool.md).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

A persistent version's program plays seat after seat given on its standard input, and a worker keeps its
processes alive across matches. Every version stored before this revision was launched per seat: false.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("bot_version") as batch:
        batch.add_column(sa.Column("persistent", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("bot_version") as batch:
        batch.drop_column("persistent")
