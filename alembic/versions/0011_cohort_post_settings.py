"""Cohort settings instructors change from chat: the daily post on or off, and a role it pings.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("cohorts") as batch_op:
        batch_op.add_column(
            sa.Column("daily_post", sa.Boolean(), server_default=sa.true(), nullable=False)
        )
        batch_op.add_column(sa.Column("post_role_id", sa.String(length=32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("cohorts") as batch_op:
        batch_op.drop_column("post_role_id")
        batch_op.drop_column("daily_post")
