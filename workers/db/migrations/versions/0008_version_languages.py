"""Each bot version's language: `bot_version.language` (`mus bot show` listed every version in the bot's latest).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-05

A version stored before this revision takes its bot's language, the only one recorded.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("bot_version") as batch:
        batch.add_column(sa.Column("language", sa.String(length=32), nullable=False, server_default="unknown"))
    op.execute("UPDATE bot_version SET language = (SELECT bot.language FROM bot WHERE bot.id = bot_version.bot_id)")


def downgrade() -> None:
    with op.batch_alter_table("bot_version") as batch:
        batch.drop_column("language")
