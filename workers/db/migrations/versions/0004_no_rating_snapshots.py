"""No rating snapshots: the `rating_snapshot` table is dropped.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

Standings and Elo are recomputed from the results on every read (results are the source of truth), and nothing
ever read a snapshot: it was a copy of one read, written when a league finished, that would go stale whenever
the fit or the table changed (revision 0003 changed what a table's fault columns count). The downgrade creates
the table again, empty, as revision 0001 made it; the upgrade loses only copies that the results still give.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index(op.f("ix_rating_snapshot_league_id_computed_at"), table_name="rating_snapshot")
    op.drop_table("rating_snapshot")


def downgrade() -> None:
    op.create_table(
        "rating_snapshot",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("league_id", sa.Integer(), nullable=False),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_matches", sa.Integer(), nullable=False),
        sa.Column("ratings", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["league_id"], ["league.id"], name=op.f("fk_rating_snapshot_league_id_league"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rating_snapshot")),
    )
    op.create_index(op.f("ix_rating_snapshot_league_id_computed_at"), "rating_snapshot", ["league_id", "computed_at"])
