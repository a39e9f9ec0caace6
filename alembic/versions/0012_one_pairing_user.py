"""One pairing user per fleet: a unique index, so two processes starting at once agree.

The ingest and `felab broker setup` both make the pairing password on first use; without the
index each could insert its own row, and the URL one printed would not open the user the other
set on the broker.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

WHERE = sa.text("role = 'pairing'")


def upgrade() -> None:
    # keep the oldest pairing row if a race already made two
    op.execute(
        "DELETE FROM broker_users WHERE role = 'pairing' AND id <> "
        "(SELECT MIN(id) FROM broker_users WHERE role = 'pairing')"
    )
    op.create_index(
        "uq_broker_users_pairing",
        "broker_users",
        ["role"],
        unique=True,
        postgresql_where=WHERE,
        sqlite_where=WHERE,
    )


def downgrade() -> None:
    op.drop_index("uq_broker_users_pairing", table_name="broker_users")
