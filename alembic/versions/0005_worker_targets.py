"""Worker targets: the names and kinds in a worker's targets file (never its URLs), as the
machine reports them when it pairs and with every heartbeat, so a job for a target it lacks is
refused when it is queued.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02

Down: the column goes; workers report their targets again at their next heartbeat.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("workers") as batch_op:
        batch_op.add_column(sa.Column("targets", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("workers") as batch_op:
        batch_op.drop_column("targets")
