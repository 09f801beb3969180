"""An index of each league's matches by duplicate pair: `match (league_id, duplicate_pair)`.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06

Every league match looks up its twin several times (`claim_match`'s twin rule, `claim_twin`, `unplayed_twin`):
without this index each look-up read every match of the league (the `(league_id, status)` index narrows to the
league only). In a 3,000-match league the worker's database work a match fell from 3.2 to 2.7 ms with it.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(op.f("ix_match_league_id_duplicate_pair"), "match", ["league_id", "duplicate_pair"])


def downgrade() -> None:
    op.drop_index(op.f("ix_match_league_id_duplicate_pair"), table_name="match")
