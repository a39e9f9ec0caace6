"""A migration that meets its own work already done: the database's alembic_version stamp says
an older revision than its tables are at (changed by hand). Twenty-second sweep, b B15: a stamp
of 0013 on 0014's tables had stopped every command with exit 70 (CircularDependencyError)."""

from __future__ import annotations

STAMP_MISMATCH = (
    "the database {url} has tables that do not match its schema revision (its alembic_version "
    "stamp was changed by hand?): felab did not upgrade it; restore it from a backup "
    "(`felab db restore FILE`), or set alembic_version back to the revision its tables are at"
)


def stamp_mismatch(exc: Exception) -> bool:
    """Whether a migration's error says its work was already done (a column or table there)."""
    from sqlalchemy.exc import CircularDependencyError

    said = str(exc).lower()
    return isinstance(exc, CircularDependencyError) or any(
        w in said for w in ("duplicate column", "already exists")
    )
