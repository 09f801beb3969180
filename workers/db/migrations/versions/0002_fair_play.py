"""Fair play: each league's secret and its public commitment, whether its bots run sandboxed, which deals it
plays, and how many fresh deals a match has been given.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01

A league created before this revision has no secret (its seeds were public) and keeps its seeds; it is marked
sandboxed and duplicate, as every league is by default.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("league") as batch:
        batch.add_column(sa.Column("secret", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("commitment", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("sandbox", sa.Boolean(), nullable=False, server_default=sa.true()))
        batch.add_column(sa.Column("deal_mode", sa.String(length=16), nullable=False, server_default="duplicate"))
        batch.create_check_constraint("ck_league_deal_mode", "deal_mode IN ('duplicate', 'independent')")
    with op.batch_alter_table("match") as batch:
        batch.add_column(sa.Column("deal", sa.Integer(), nullable=False, server_default="0"))
        batch.create_check_constraint("ck_match_deal", "deal >= 0")


def downgrade() -> None:
    with op.batch_alter_table("match") as batch:
        batch.drop_constraint("ck_match_deal", type_="check")
        batch.drop_column("deal")
    with op.batch_alter_table("league") as batch:
        batch.drop_constraint("ck_league_deal_mode", type_="check")
        batch.drop_column("deal_mode")
        batch.drop_column("sandbox")
        batch.drop_column("commitment")
        batch.drop_column("secret")
