"""The bot's messages about a member are remembered, so deleting the member deletes them.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03
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
        "chat_posts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("member_id", sa.Integer(), nullable=True),
        sa.Column("channel_id", sa.String(length=32), nullable=False),
        sa.Column("message_id", sa.String(length=32), nullable=False),
        sa.Column("about", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("delete_requested_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["member_id"],
            ["members.id"],
            name=op.f("fk_chat_posts_member_id_members"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_chat_posts")),
        sa.UniqueConstraint(
            "channel_id", "message_id", name=op.f("uq_chat_posts_channel_id_message_id")
        ),
    )
    op.create_index("ix_chat_posts_member", "chat_posts", ["member_id"])
    op.create_index("ix_chat_posts_delete", "chat_posts", ["delete_requested_at"])


def downgrade() -> None:
    op.drop_index("ix_chat_posts_delete", table_name="chat_posts")
    op.drop_index("ix_chat_posts_member", table_name="chat_posts")
    op.drop_table("chat_posts")
