"""The machines whose workers play matches, and what each lacks to launch some: `machine`, `refusal`.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06

A worker on a machine without a bot's folder (or without a sandbox) refused the match, and after three such
refusals the match failed, though another machine's worker could have played it. Now a refusal is recorded for its
machine, and the match is left to the live machines that have not refused what it needs (`repo.refuse_match`).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "machine",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_machine")),
    )
    op.create_table(
        "refusal",
        sa.Column("machine", sa.String(length=200), nullable=False),
        sa.Column("lacks", sa.String(length=64), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("machine", "lacks", name=op.f("pk_refusal")),
    )


def downgrade() -> None:
    op.drop_table("refusal")
    op.drop_table("machine")
