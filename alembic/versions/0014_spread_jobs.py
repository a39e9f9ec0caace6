"""Spread jobs: one run cut into slices, each a job on its own machine, merged into a parent.

A slice names its parent (`spread_of`) and its place (`shard_index`); the parent holds how many
slices there are (`shards`) and the start they share (`start_at`, on the broker's clock).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("bench_jobs") as batch_op:
        batch_op.add_column(sa.Column("spread_of", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("shard_index", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("shards", sa.Integer(), server_default="1", nullable=False))
        batch_op.add_column(sa.Column("start_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_foreign_key(
            op.f("fk_bench_jobs_spread_of_bench_jobs"),
            "bench_jobs",
            ["spread_of"],
            ["id"],
            ondelete="CASCADE",
        )
        batch_op.create_index("ix_bench_jobs_spread_of", ["spread_of"])


def downgrade() -> None:
    op.execute("DELETE FROM bench_jobs WHERE spread_of IS NOT NULL")
    with op.batch_alter_table("bench_jobs") as batch_op:
        batch_op.drop_index("ix_bench_jobs_spread_of")
        batch_op.drop_constraint(op.f("fk_bench_jobs_spread_of_bench_jobs"), type_="foreignkey")
        for col in ("start_at", "shards", "shard_index", "spread_of"):
            batch_op.drop_column(col)
