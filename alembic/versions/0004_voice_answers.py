"""Voice-message answers: a spoken answer's self-rating may come later (the speaker presses a
rating under the bot's reply to their voice message), so it may be empty until then.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02

Down: an answer still waiting for its self-rating gets 3 (the middle), as the column needs one.
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
    with op.batch_alter_table("spoken_answers") as batch_op:
        batch_op.alter_column("self_rating", existing_type=sa.Integer(), nullable=True)


def downgrade() -> None:
    op.execute("UPDATE spoken_answers SET self_rating = 3 WHERE self_rating IS NULL")
    with op.batch_alter_table("spoken_answers") as batch_op:
        batch_op.alter_column("self_rating", existing_type=sa.Integer(), nullable=False)
