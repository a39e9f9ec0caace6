"""A spoken answer's length is stored only as measured, with how it was measured (`timing`).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03

The daily post's "Said it" used to store the prompt's limit (20 s) as the answer's length. Rows
with no recording and a length equal to their prompt's seconds (which a typed answer of exactly
that length without a recording also matches) become "untimed" with no length; every other row
keeps its length, as "self-timed".

Down: an untimed answer gets its prompt's seconds back, as the column needs a number.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TIMINGS = "timing IN ('voice', 'self-timed', 'prompt-to-click', 'untimed')"


def upgrade() -> None:
    with op.batch_alter_table("spoken_answers") as batch_op:
        batch_op.add_column(
            sa.Column("timing", sa.String(length=16), server_default="self-timed", nullable=False)
        )
        batch_op.alter_column("duration_s", existing_type=sa.Float(), nullable=True)
        batch_op.create_check_constraint("timing", TIMINGS)
    op.execute(
        "UPDATE spoken_answers SET timing = 'untimed', duration_s = NULL "
        "WHERE recording_ref IS NULL AND duration_s = "
        "(SELECT seconds FROM speak_prompts WHERE speak_prompts.id = spoken_answers.prompt_id)"
    )


def downgrade() -> None:
    op.execute(
        "UPDATE spoken_answers SET duration_s = "
        "(SELECT seconds FROM speak_prompts WHERE speak_prompts.id = spoken_answers.prompt_id) "
        "WHERE duration_s IS NULL"
    )
    with op.batch_alter_table("spoken_answers") as batch_op:
        batch_op.drop_constraint("timing", type_="check")
        batch_op.alter_column("duration_s", existing_type=sa.Float(), nullable=False)
        batch_op.drop_column("timing")
