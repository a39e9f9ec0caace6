"""The worker fleet: worker keys and consent, job attempts and progress, pairing codes, outbox.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03

`bench_jobs` and `workers` may already hold rows: on SQLite the batch operations copy the tables,
and tests/db/test_migrations.py checks that no row is lost on the way up or down.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_STATUS = "status IN ('queued', 'running', 'ready', 'failed', 'expired')"
NEW_STATUS = "status IN ('queued', 'running', 'ready', 'done', 'failed', 'cancelled', 'expired')"


def upgrade() -> None:
    with op.batch_alter_table("workers") as batch_op:
        batch_op.add_column(
            sa.Column("allow_instructors", sa.Boolean(), server_default=sa.false(), nullable=False)
        )
    with op.batch_alter_table("bench_jobs") as batch_op:
        batch_op.drop_constraint(op.f("ck_bench_jobs_status"), type_="check")
        batch_op.create_check_constraint("status", NEW_STATUS)
        batch_op.add_column(sa.Column("requested_by_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("target", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("params", sa.JSON(), server_default="{}", nullable=False))
        batch_op.add_column(sa.Column("attempt", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("attempts", sa.Integer(), server_default="0", nullable=False))
        batch_op.add_column(sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(
            sa.Column("progress_done", sa.Integer(), server_default="0", nullable=False)
        )
        batch_op.add_column(sa.Column("progress_total", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("summary", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("record", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("chart_png", sa.LargeBinary(), nullable=True))
        batch_op.create_foreign_key(
            op.f("fk_bench_jobs_requested_by_id_members"),
            "members",
            ["requested_by_id"],
            ["id"],
            ondelete="SET NULL",
        )
    op.create_table(
        "pair_codes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("code_hash", sa.String(length=64), nullable=False),
        sa.Column("member_id", sa.Integer(), nullable=False),
        sa.Column("worker_name", sa.String(length=100), nullable=False),
        sa.Column("allow_instructors", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["member_id"],
            ["members.id"],
            name=op.f("fk_pair_codes_member_id_members"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pair_codes")),
        sa.UniqueConstraint("code_hash", name=op.f("uq_pair_codes_code_hash")),
    )
    op.create_table(
        "job_outbox",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("posted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("message_ref", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["bench_jobs.id"],
            name=op.f("fk_job_outbox_job_id_bench_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_outbox")),
        sa.UniqueConstraint("job_id", name=op.f("uq_job_outbox_job_id")),
    )
    op.create_index("ix_job_outbox_posted", "job_outbox", ["posted_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_job_outbox_posted", table_name="job_outbox")
    op.drop_table("job_outbox")
    op.drop_table("pair_codes")
    # Statuses the old schema does not know fold into the nearest old one.
    op.execute("UPDATE bench_jobs SET status = 'ready' WHERE status = 'done'")
    op.execute("UPDATE bench_jobs SET status = 'failed' WHERE status = 'cancelled'")
    with op.batch_alter_table("bench_jobs") as batch_op:
        batch_op.drop_constraint(op.f("fk_bench_jobs_requested_by_id_members"), type_="foreignkey")
        for col in (
            "chart_png",
            "record",
            "summary",
            "progress_total",
            "progress_done",
            "expires_at",
            "sent_at",
            "attempts",
            "attempt",
            "params",
            "target",
            "requested_by_id",
        ):
            batch_op.drop_column(col)
        batch_op.drop_constraint(op.f("ck_bench_jobs_status"), type_="check")
        batch_op.create_check_constraint("status", OLD_STATUS)
    with op.batch_alter_table("workers") as batch_op:
        batch_op.drop_column("allow_instructors")
