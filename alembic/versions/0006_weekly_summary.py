"""A cohort may ask for a weekly summary post in its channel (off by default).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02

The post itself is claimed like the daily one: a `posts` row of kind "weekly" per cohort and
week (its `day_number` the ordinal of the week's Monday), so no new table.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("cohorts") as batch_op:
        batch_op.add_column(
            sa.Column("weekly_summary", sa.Boolean(), server_default=sa.false(), nullable=False)
        )


def downgrade() -> None:
    op.execute("DELETE FROM posts WHERE kind = 'weekly'")
    with op.batch_alter_table("cohorts") as batch_op:
        batch_op.drop_column("weekly_summary")
