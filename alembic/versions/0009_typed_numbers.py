"""A typed-in number keeps what was typed: the number (digits kept) and its unit.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03

`value` stays the figure in tokens per second that limits and leaderboards compare; the form
shows the typing back, so sending it again unchanged records nothing and nothing drifts
through a conversion. Numbers stored before have no typing (shown in tokens per second).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("numbers") as batch_op:
        batch_op.add_column(sa.Column("typed_value", sa.String(length=40), nullable=True))
        batch_op.add_column(sa.Column("typed_unit", sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("numbers") as batch_op:
        batch_op.drop_column("typed_unit")
        batch_op.drop_column("typed_value")
