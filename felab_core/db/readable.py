"""Whether felab can read back every value a database holds.

A file changed by hand or by another program can hold what felab never writes: a time of 'zz',
a date that is no date, text in a number's column, a bandwidth of -5 GB/s, a figure of 1e308.
SQLite takes them all, and felab met them later, in whichever command first read the row, as an
unexpected error. Here each is named by table, column and row instead: `felab db restore` checks
a backup with it before anything is replaced, and a database command that stops on a value it
could not read says which one (felab/cli/db.py).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, datetime, time
from typing import Any

from sqlalchemy import Connection, column, inspect, select, table, text
from sqlalchemy import exc as sqlalchemy_errors
from sqlalchemy import types as sqltypes

from felab_core.db import models as m
from felab_core.numbers.speeds import MAX_PLAUSIBLE_TPS
from felab_core.sizing.units import GB, MAX_BANDWIDTH
from felab_core.text import with_hidden_shown

#: Values felab bounds whenever it writes them (numbers/speeds.py, sizing/units.py), with the
#: words for the bound (low < value <= high): a figure past them is no figure felab stored.
#: A card's FSRS state as the fsrs library keeps it (fsrs.State; its Scheduler clamps stability
#: to 0.001 and more, difficulty to MIN_DIFFICULTY-MAX_DIFFICULTY, 1-10): a restored stability
#: of -5 or 0, or a step of -4, had stopped the next review as "a bug in felab". Rating a card
#: checks its row with these too (drills/review.py).
BOUNDS: dict[tuple[str, str], tuple[float, float, str]] = {
    ("members", "bandwidth_gb_s"): (0.0, float(MAX_BANDWIDTH / GB), "GB/s above 0 up to 100,000"),
    ("numbers", "value"): (0.0, MAX_PLAUSIBLE_TPS, "tokens/s above 0 up to 100,000"),
    ("card_states", "state"): (0, 3, "1, 2 or 3 (FSRS's learning, review and relearning)"),
    ("card_states", "step"): (-1, 2**31 - 1, "a learning step counted from 0"),
    ("card_states", "stability"): (0.0, sys.float_info.max, "an FSRS stability above 0 days"),
    ("card_states", "difficulty"): (
        math.nextafter(1.0, 0.0),  # 1.0 itself is in: FSRS clamps to it
        10.0,
        "an FSRS difficulty from 1 to 10",
    ),
}


def bound_problem(table_name: str, column_name: str, value: Any) -> str | None:
    """What is wrong with a number felab bounds when it writes it (BOUNDS), or None."""
    bound = BOUNDS.get((table_name, column_name))
    if bound is None or not isinstance(value, int | float) or isinstance(value, bool):
        return None
    low, high, words = bound
    if not low < value <= high:
        return f"{_shown(value)}: felab keeps {words}"
    return None


@dataclass(frozen=True)
class Unreadable:
    """One stored value felab cannot read (or would not have written), and why."""

    table: str
    column: str
    row_id: Any
    why: str

    def __str__(self) -> str:
        return f"{self.table}.{self.column} of row {self.row_id} ({self.why})"


_KINDS = {
    bool: "true or false",
    int: "a whole number",
    float: "a number",
    datetime: "a date and time",
    date: "a date",
    time: "a time of day",
    dict: "JSON",
    bytes: "bytes",
    str: "text",
}


def _shown(value: Any) -> str:
    return with_hidden_shown(repr(value[:40] if isinstance(value, str | bytes) else value))[:40]


def _not_kind(raw: Any, expected: tuple[type, ...] | None) -> str:
    return f"{_shown(raw)}, not {_KINDS[expected[0]] if expected else 'readable'}"


def _expected_python(kind: sqltypes.TypeEngine[Any]) -> tuple[type, ...] | None:
    """The Python types a column's value must come back as, once its type has read it."""
    kind = kind.impl_instance if isinstance(kind, sqltypes.TypeDecorator) else kind
    if isinstance(kind, sqltypes.Boolean):
        return (bool,)
    if isinstance(kind, sqltypes.Integer):
        return (int,)
    if isinstance(kind, sqltypes.Float):
        return (float, int)
    if isinstance(kind, sqltypes.DateTime):
        return (datetime,)
    if isinstance(kind, sqltypes.Date):
        return (date,)
    if isinstance(kind, sqltypes.Time):
        return (time,)
    if isinstance(kind, sqltypes.JSON):
        return (dict, list)
    if isinstance(kind, sqltypes.LargeBinary):
        return (bytes, memoryview)
    if isinstance(kind, sqltypes.String):
        return (str,)
    return None


def _problem(
    raw: Any, read: Callable[[Any], Any] | None, col: Any, where: tuple[str, str]
) -> str | None:
    """What is wrong with one stored value `raw` of column `col`, or None."""
    if raw is None:
        return None if col.nullable else "empty, where felab always keeps a value"
    if isinstance(col.type, sqltypes.Boolean) and raw not in (0, 1, True, False):
        return f"{_shown(raw)}, not true or false"
    expected = _expected_python(col.type)
    try:
        value = read(raw) if read is not None else raw
    except Exception:  # each type's own parser: any failure means felab cannot read it
        return _not_kind(raw, expected)
    if value is None and col.nullable:  # JSON's null
        return None
    if expected is not None and (
        not isinstance(value, expected) or (bool not in expected and isinstance(value, bool))
    ):
        return _not_kind(raw, expected)
    if isinstance(value, float) and not math.isfinite(value):
        return f"{_shown(raw)}, not a finite number"
    return bound_problem(*where, value)


def _reader(kind: sqltypes.TypeEngine[Any], dialect: Any) -> Callable[[Any], Any] | None:
    """How the column's type turns what the driver returns into a value, or None where the
    driver's own value is the value (psycopg's numbers, which ask for their PostgreSQL type)."""
    try:
        return kind.dialect_impl(dialect).result_processor(dialect, None)
    except (TypeError, LookupError, ArithmeticError, sqlalchemy_errors.InvalidRequestError):
        return None


def unreadable_values(conn: Connection, limit: int = 5) -> list[Unreadable]:
    """Up to `limit` values of felab's tables that felab could not read back, each read through
    the column's own type as the ORM would read it. Only the columns both the database and
    this felab's models have are read (an older schema's backup lacks the newer ones)."""
    found: list[Unreadable] = []
    for problem in _each_problem(conn):
        found.append(problem)
        if len(found) >= limit:
            break
    return found


def _each_problem(conn: Connection) -> Iterator[Unreadable]:
    held = set(inspect(conn).get_table_names())
    dialect = conn.dialect
    for model_table in m.Base.metadata.sorted_tables:
        if model_table.name not in held:
            continue
        stored = {c["name"] for c in inspect(conn).get_columns(model_table.name)}
        cols = [c for c in model_table.columns if c.name in stored]
        if "id" not in stored:
            continue
        readers = [_reader(c.type, dialect) for c in cols]
        raw = table(model_table.name, *(column(c.name) for c in cols))  # untyped: values raw
        query = select(*raw.columns).order_by(raw.c.id)
        if dialect.name == "sqlite":  # only the rows SQL cannot show fine go through Python
            query = query.where(text(_suspect_rows(conn, model_table.name, cols)))
        for row in conn.execute(query):
            row_id = row._mapping["id"]
            for col, read, value in zip(cols, readers, row, strict=True):
                why = _problem(value, read, col, (model_table.name, col.name))
                if why is not None:
                    yield Unreadable(model_table.name, col.name, row_id, why)


#: The fraction of a second SQLite keeps after a time, as felab writes it.
_MICROS = ".[0-9][0-9][0-9][0-9][0-9][0-9]"
#: A JSON text this short nests too shallowly for Python's parser to run out of depth.
_JSON_SHORT = 1800


def _strict_json(conn: Connection) -> str | None:
    """SQLite's test for a JSON text Python's json reads too, or None where this SQLite takes
    JSON5 (3.42 and later) and has no strict test."""
    try:
        conn.exec_driver_sql("SELECT json_valid('{}', 1)")
        return "json_valid({x}, 1)"
    except sqlalchemy_errors.DBAPIError:
        pass
    version = conn.exec_driver_sql("SELECT sqlite_version()").scalar()
    parts = tuple(int(p) for p in str(version).split(".")[:2] if p.isdigit())
    return "json_valid({x})" if parts < (3, 42) else None


def _fine_sql(conn: Connection, table_name: str, col: Any) -> str | None:
    """SQL true for a value of `col` that `_problem` would find nothing wrong with (a subset:
    a value it is false for is read in Python, as before), or None where SQL cannot tell."""
    x = '"' + col.name.replace('"', '""') + '"'
    kind = col.type.impl_instance if isinstance(col.type, sqltypes.TypeDecorator) else col.type
    fine: str | None = None
    if isinstance(kind, sqltypes.Boolean):
        fine = f"typeof({x}) = 'integer' AND {x} IN (0, 1)"
    elif isinstance(kind, sqltypes.Integer):
        fine = f"typeof({x}) = 'integer'"
        if (table_name, col.name) in BOUNDS:
            low, high = BOUNDS[(table_name, col.name)][:2]
            fine += f" AND {x} > {low!r} AND {x} <= {high!r}"
    elif isinstance(kind, sqltypes.Float) and not kind.asdecimal:
        low, high = BOUNDS.get((table_name, col.name), (-1.7e308, 1.7e308, ""))[:2]
        fine = f"typeof({x}) IN ('integer', 'real') AND {x} > {low!r} AND {x} <= {high!r}"
    elif isinstance(kind, sqltypes.DateTime):  # SQLite's own datetime() writes it again
        fine = (
            f"typeof({x}) = 'text' AND length({x}) = 26 AND substr({x}, 1, 4) >= '0001' AND "
            f"datetime({x}, '+0 seconds') = substr({x}, 1, 19) AND substr({x}, 20) GLOB '{_MICROS}'"
        )
    elif isinstance(kind, sqltypes.Date):
        fine = (
            f"typeof({x}) = 'text' AND length({x}) = 10 AND substr({x}, 1, 4) >= '0001' AND "
            f"date({x}, '+0 days') = substr({x}, 1, 10)"
        )
    elif isinstance(kind, sqltypes.Time):
        fine = (
            f"typeof({x}) = 'text' AND length({x}) = 15 AND "
            f"time({x}, '+0 seconds') = substr({x}, 1, 8) AND substr({x}, 9) GLOB '{_MICROS}'"
        )
    elif isinstance(kind, sqltypes.JSON):
        valid = _strict_json(conn)
        if valid is not None:
            fine = (
                f"typeof({x}) = 'text' AND length({x}) < {_JSON_SHORT} AND {valid.format(x=x)} "
                f"AND substr(ltrim({x}, char(32, 9, 10, 13)), 1, 1) IN ('{{', '[')"
            )
    elif isinstance(kind, sqltypes.LargeBinary):
        fine = f"typeof({x}) = 'blob'"
    elif type(kind) in (sqltypes.String, sqltypes.Text, sqltypes.Unicode, sqltypes.UnicodeText):
        fine = f"typeof({x}) = 'text'"
    if fine is None:
        return None
    fine = f"coalesce(({fine}), 0)"  # a test SQL cannot answer (NULL) is no proof
    return f"({x} IS NULL OR {fine})" if col.nullable else fine


def _suspect_rows(conn: Connection, table_name: str, cols: list[Any]) -> str:
    """An SQLite WHERE clause for the rows holding a value SQL cannot show fine: a backup of
    three million reviews had been read value by value in Python, 33 s in silence (twentieth
    sweep, b B18); SQL passes the ordinary rows in a second."""
    fine = [_fine_sql(conn, table_name, col) for col in cols]
    if any(f is None for f in fine):
        return "1 = 1"
    return "NOT (" + " AND ".join(f for f in fine if f is not None) + ")"
