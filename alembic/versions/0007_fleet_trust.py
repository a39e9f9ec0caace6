"""Fleet trust: a broker user per machine, pairing by lookup, heartbeat sequence numbers,
outbox retries and dead letters, capped resends, and a verdict on every measured number.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "broker_users",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=True),
        sa.Column("secret_hash", sa.String(length=64), nullable=False),
        sa.Column("shared_secret", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("role IN ('pairing', 'machine')", name=op.f("ck_broker_users_role")),
        sa.ForeignKeyConstraint(
            ["worker_id"],
            ["workers.id"],
            name=op.f("fk_broker_users_worker_id_workers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_broker_users")),
        sa.UniqueConstraint("worker_id", name=op.f("uq_broker_users_worker_id")),
    )
    with op.batch_alter_table("workers") as batch_op:
        batch_op.add_column(
            sa.Column("heartbeat_seq", sa.BigInteger(), server_default="0", nullable=False)
        )
        batch_op.add_column(sa.Column("running_job_id", sa.Integer(), nullable=True))
    with op.batch_alter_table("bench_jobs") as batch_op:
        batch_op.add_column(sa.Column("resends", sa.Integer(), server_default="0", nullable=False))
    with op.batch_alter_table("pair_codes") as batch_op:
        batch_op.add_column(sa.Column("lookup", sa.String(64), nullable=True))
        batch_op.create_unique_constraint(op.f("uq_pair_codes_lookup"), ["lookup"])
    with op.batch_alter_table("job_outbox") as batch_op:
        batch_op.add_column(sa.Column("attempts", sa.Integer(), server_default="0", nullable=False))
        batch_op.add_column(sa.Column("last_error", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("next_try_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("dead_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("numbers") as batch_op:
        batch_op.add_column(
            sa.Column("verdict", sa.String(16), server_default="ok", nullable=False)
        )
        batch_op.add_column(sa.Column("verdict_note", sa.Text(), nullable=True))
        batch_op.create_check_constraint(
            "verdict", "verdict IN ('ok', 'unverified', 'flagged', 'approved')"
        )


def downgrade() -> None:
    with op.batch_alter_table("numbers") as batch_op:
        batch_op.drop_constraint(op.f("ck_numbers_verdict"), type_="check")
        batch_op.drop_column("verdict_note")
        batch_op.drop_column("verdict")
    with op.batch_alter_table("job_outbox") as batch_op:
        batch_op.drop_column("dead_at")
        batch_op.drop_column("next_try_at")
        batch_op.drop_column("last_error")
        batch_op.drop_column("attempts")
    with op.batch_alter_table("pair_codes") as batch_op:
        batch_op.drop_constraint(op.f("uq_pair_codes_lookup"), type_="unique")
        batch_op.drop_column("lookup")
    with op.batch_alter_table("bench_jobs") as batch_op:
        batch_op.drop_column("resends")
    with op.batch_alter_table("workers") as batch_op:
        batch_op.drop_column("running_job_id")
        batch_op.drop_column("heartbeat_seq")
    op.drop_table("broker_users")
