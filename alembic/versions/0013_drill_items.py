"""Drill kinds share one table: `whiteboards` becomes `drill_items`, with a `kind` column.

A new drill kind (felab_core/drills/kinds/) then needs no table and no migration of its own.
The whiteboards keep their ids (the reveal buttons on posts already made name them).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = "id, key, day_id, step_id, position, question, answer, body, retired"


def _items_table(name: str, *, with_kind: bool) -> None:
    op.create_table(
        name,
        sa.Column("id", sa.Integer(), nullable=False),
        *([sa.Column("kind", sa.String(length=32), nullable=False)] if with_kind else []),
        sa.Column("key", sa.String(length=100), nullable=False),
        sa.Column("day_id", sa.Integer(), nullable=False),
        sa.Column("step_id", sa.Integer(), nullable=True),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("answer", sa.Text(), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("retired", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.ForeignKeyConstraint(
            ["day_id"],
            ["content_days.id"],
            name=op.f(f"fk_{name}_day_id_content_days"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["step_id"],
            ["content_steps.id"],
            name=op.f(f"fk_{name}_step_id_content_steps"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f(f"pk_{name}")),
        sa.UniqueConstraint("key", name=op.f(f"uq_{name}_key")),
    )


def _follow_ids(table: str) -> None:
    """PostgreSQL: the id sequence goes on after the copied ids."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
            f"COALESCE((SELECT MAX(id) FROM {table}), 0) + 1, false)"
        )


def upgrade() -> None:
    _items_table("drill_items", with_kind=True)
    op.execute(
        f"INSERT INTO drill_items (kind, {_COLUMNS}) "
        f"SELECT 'whiteboard', {_COLUMNS} FROM whiteboards"
    )
    _follow_ids("drill_items")
    op.drop_table("whiteboards")
    op.create_index("ix_drill_items_day_kind", "drill_items", ["day_id", "kind", "position"])


def downgrade() -> None:
    _items_table("whiteboards", with_kind=False)
    op.execute(
        f"INSERT INTO whiteboards ({_COLUMNS}) "
        f"SELECT {_COLUMNS} FROM drill_items WHERE kind = 'whiteboard'"
    )
    _follow_ids("whiteboards")
    op.drop_index("ix_drill_items_day_kind", table_name="drill_items")
    op.drop_table("drill_items")
