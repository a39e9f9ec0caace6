"""Numbers, workers and benchmark jobs; members choose whether their numbers are public.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02

Adds a column to `members`, a table that already holds rows: on SQLite the batch operation copies
the table, and tests/db/test_migrations.py checks that no row is lost on the way up or down.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("members") as batch_op:
        batch_op.add_column(
            sa.Column("public_numbers", sa.Boolean(), server_default=sa.true(), nullable=False)
        )
    op.create_table(
        "workers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("member_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("public_key", sa.Text(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["member_id"],
            ["members.id"],
            name=op.f("fk_workers_member_id_members"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workers")),
        sa.UniqueConstraint("member_id", "name", name=op.f("uq_workers_member_id_name")),
    )
    op.create_table(
        "bench_jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("member_id", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=True),
        sa.Column("server", sa.String(length=32), nullable=False),
        sa.Column("preset", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "status IN ('queued', 'running', 'ready', 'failed', 'expired')",
            name=op.f("ck_bench_jobs_status"),
        ),
        sa.ForeignKeyConstraint(
            ["member_id"],
            ["members.id"],
            name=op.f("fk_bench_jobs_member_id_members"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
            name=op.f("fk_bench_jobs_worker_id_workers"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bench_jobs")),
    )
    op.create_index("ix_bench_jobs_member", "bench_jobs", ["member_id"], unique=False)
    op.create_index("ix_bench_jobs_status", "bench_jobs", ["status"], unique=False)
    op.create_table(
        "bench_results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("server", sa.String(length=32), nullable=False),
        sa.Column("model", sa.String(length=300), nullable=False),
        sa.Column("preset", sa.String(length=64), nullable=False),
        sa.Column("concurrency", sa.Integer(), nullable=False),
        sa.Column("writing_tps_p50", sa.Float(), nullable=True),
        sa.Column("ttft_p50_s", sa.Float(), nullable=True),
        sa.Column("row", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["bench_jobs.id"],
            name=op.f("fk_bench_results_job_id_bench_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bench_results")),
    )
    op.create_index("ix_bench_results_job", "bench_results", ["job_id"], unique=False)
    op.create_table(
        "numbers",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("member_id", sa.Integer(), nullable=False),
        sa.Column("server", sa.String(length=32), nullable=False),
        sa.Column("metric", sa.String(length=32), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("unit", sa.String(length=32), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("model", sa.String(length=300), nullable=True),
        sa.Column("preset", sa.String(length=64), nullable=True),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("field_key", sa.String(length=100), nullable=True),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("source IN ('entered', 'measured')", name=op.f("ck_numbers_source")),
        sa.CheckConstraint("value > 0", name=op.f("ck_numbers_positive")),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["bench_jobs.id"],
            name=op.f("fk_numbers_job_id_bench_jobs"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["member_id"],
            ["members.id"],
            name=op.f("fk_numbers_member_id_members"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_numbers")),
    )
    op.create_index("ix_numbers_board", "numbers", ["server", "metric", "source"], unique=False)
    op.create_index("ix_numbers_member", "numbers", ["member_id", "server", "metric"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_numbers_member", table_name="numbers")
    op.drop_index("ix_numbers_board", table_name="numbers")
    op.drop_table("numbers")
    op.drop_index("ix_bench_results_job", table_name="bench_results")
    op.drop_table("bench_results")
    op.drop_index("ix_bench_jobs_status", table_name="bench_jobs")
    op.drop_index("ix_bench_jobs_member", table_name="bench_jobs")
    op.drop_table("bench_jobs")
    op.drop_table("workers")
    with op.batch_alter_table("members") as batch_op:
        batch_op.drop_column("public_numbers")
