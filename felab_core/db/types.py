"""Column types that behave the same on SQLite and PostgreSQL.

SQLite has no time zone type: it hands back naive datetimes. Every timestamp felab stores is UTC
and comes back as an aware UTC datetime on both databases, because the FSRS scheduler refuses
anything else and streaks depend on converting instants to each member's own day.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, Dialect
from sqlalchemy.types import TypeDecorator


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored in UTC and always returned aware (tzinfo=UTC)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(
                f"naive datetime {value!r}: felab stores instants; pass an aware datetime "
                "(e.g. datetime.now(UTC))"
            )
        utc = value.astimezone(UTC)
        return utc.replace(tzinfo=None) if dialect.name == "sqlite" else utc

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def utcnow() -> datetime:
    """Now, aware and in UTC (the only kind of datetime felab stores)."""
    return datetime.now(UTC)
