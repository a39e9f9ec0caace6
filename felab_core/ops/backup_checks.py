"""What an SQLite backup must be before `felab db restore` replaces anything with it: intact,
at a schema revision this felab knows, made as felab's migrations make it (tables, columns,
CHECKs, UNIQUEs, indexes, nothing of its own), rows that point at rows, and values felab could
have written.
"""

from __future__ import annotations

import sqlite3
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from sqlalchemy.exc import DBAPIError

from felab_core.errors import Invalid
from felab_core.numbers.speeds import MIN_PLAUSIBLE_TPS
from felab_core.ops.backup_rows import open_read_only as _open_read_only
from felab_core.ops.backup_rows import rows_felab_never_stores
from felab_core.people.members import MAX_MODEL_BYTES
from felab_core.sizing.units import MIN_WEIGHTS_BYTES
from felab_core.text import with_hidden_shown


class BackupError(Invalid):
    """A backup or restore could not be made; the message says why and what to do."""


def _schema_of(con: sqlite3.Connection) -> dict[str, set[str]]:
    """Each table's columns."""
    tables = [
        row[0]
        for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    ]
    return {
        t: {row[1] for row in con.execute(f"PRAGMA table_info({_quoted(t)})").fetchall()}
        for t in tables
    }


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _tables_sql_of(con: sqlite3.Connection) -> dict[str, tuple[str, ...]]:
    """Each table's CREATE TABLE as its parts (columns with their types, CHECKs, UNIQUEs and
    keys), spaces folded and sorted: a migration that re-creates a table writes its
    constraints in no fixed order."""
    rows = con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
    return {str(name): _parts(" ".join(str(sql or "").split())) for name, sql in rows}


def _parts(sql: str) -> tuple[str, ...]:
    """A CREATE TABLE's head and the parts between its outer brackets, split at the commas
    outside brackets and quotes, sorted."""
    head, bracket, body = sql.partition("(")
    if not bracket:
        return (sql,)
    body = body.rstrip().removesuffix(")")
    parts, depth, quote, start = [], 0, "", 0
    for i, c in enumerate(body):
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(body[start:i].strip())
            start = i + 1
    parts.append(body[start:].strip())
    return (head.strip(), *sorted(parts))


def _indexes_of(con: sqlite3.Connection) -> frozenset[tuple[str, str]]:
    """Each index's name and its SQL, spaces folded (SQLite's own, for a UNIQUE, has none)."""
    rows = con.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index'").fetchall()
    return frozenset((str(name), " ".join(str(sql or "").split())) for name, sql in rows)


@dataclass(frozen=True)
class _Schema:
    """What felab's migrations make up to one revision: tables and columns, each table's own
    SQL, and the indexes."""

    tables: dict[str, frozenset[str]]
    tables_sql: dict[str, tuple[str, ...]]
    indexes: frozenset[tuple[str, str]]


@lru_cache(maxsize=4)
def _expected(revision: str) -> _Schema:
    """What felab's migrations make up to `revision` (on a scratch file; kept, since this
    felab's migrations make the same every time)."""
    from felab_core.db.session import make_engine, upgrade

    with tempfile.TemporaryDirectory(prefix="felab-restore-") as scratch:
        engine = make_engine(f"sqlite:///{Path(scratch) / 'expected.db'}")
        try:
            upgrade(engine, revision)
        finally:
            engine.dispose()
        con = _open_read_only(Path(scratch) / "expected.db")
        try:
            tables = {t: frozenset(columns) for t, columns in _schema_of(con).items()}
            return _Schema(tables, _tables_sql_of(con), _indexes_of(con))
        finally:
            con.close()


def check_sqlite_backup(source: Path) -> str:
    """Check an SQLite backup before anything is replaced with it: SQLite's integrity check
    passes, its schema revision is one this felab knows, and it holds every table and column
    felab's migrations make up to that revision. Its revision; BackupError saying what is
    wrong otherwise."""
    not_felab = f"{source} is not a felab SQLite backup: give the file `felab db backup` wrote"
    try:
        con = _open_read_only(source)
    except sqlite3.Error:
        raise BackupError(not_felab) from None
    try:
        try:
            problems = [row[0] for row in con.execute("PRAGMA integrity_check(5)").fetchall()]
        except sqlite3.DatabaseError as exc:
            if "not a database" in str(exc) or "encrypted" in str(exc):
                raise BackupError(not_felab) from None
            problems = [str(exc)]
        if problems != ["ok"]:
            said = str(problems[0] if problems else "no answer")
            first = " ".join(said.replace("*** in database main ***", "").split())[:200]
            raise BackupError(
                f"{source} is damaged (SQLite's integrity check: {first}): nothing was "
                "replaced; restore from another backup"
            )
        try:
            held = _schema_of(con)
            if "alembic_version" not in held:
                raise BackupError(f"{not_felab} (it has no alembic_version table)")
            added = con.execute(  # felab makes none: a trigger would run on felab's next write
                "SELECT type, name FROM sqlite_master WHERE type IN ('trigger', 'view') LIMIT 3"
            ).fetchall()
            if added:
                shown = ", ".join(
                    f"{kind} {with_hidden_shown(str(name))[:40]}" for kind, name in added
                )
                raise BackupError(
                    f"{source} holds what felab's schema never makes ({shown}): it was changed "
                    "after `felab db backup` wrote it; nothing was replaced, restore another backup"
                )
            revisions = [row[0] for row in con.execute("SELECT version_num FROM alembic_version")]
            indexes = _indexes_of(con)
            tables_sql = _tables_sql_of(con)
        except sqlite3.DatabaseError as exc:
            raise BackupError(f"{source} cannot be read ({exc}): restore another backup") from None
    finally:
        con.close()
    if len(revisions) != 1 or not isinstance(revisions[0], str):
        raise BackupError(
            f"{not_felab} (its alembic_version holds {len(revisions)} revisions, not one)"
        )
    revision = revisions[0]
    from felab_core.db.models import Base
    from felab_core.db.session import known_revisions

    others = sorted(t for t in held if t != "alembic_version" and not t.startswith("sqlite_"))
    if others and not any(t in Base.metadata.tables for t in held):  # another Alembic program's
        shown = ", ".join(with_hidden_shown(t)[:40] for t in others[:3])  # (B19)
        raise BackupError(f"{not_felab} (it holds {shown}, none of felab's tables)")

    if revision not in known_revisions():
        raise BackupError(
            f"{source} is at schema revision {revision[:40]!r}, which this felab does not know "
            "(made by a newer felab?): upgrade felab first, then restore it; nothing was replaced"
        )
    missing = []
    schema = _expected(revision)
    expected, expected_indexes = schema.tables, schema.indexes
    for table, columns in sorted(expected.items()):
        if table not in held:
            missing.append(f"table {table}")
        else:
            missing += [f"{table}.{c}" for c in sorted(columns - held[table])]
    if missing:
        shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
        raise BackupError(
            f"{source} lacks what felab's schema {revision} has ({shown}): it was changed "
            "after `felab db backup` wrote it; nothing was replaced, restore another backup"
        )
    _check_rows(source, held, expected)
    _check_same_tables(source, tables_sql, indexes, schema)
    extra = sorted(name for name, sql in indexes - expected_indexes)
    if extra:  # a UNIQUE index of its own had let each member record one number, ever
        shown = ", ".join(f"index {with_hidden_shown(name)[:40]}" for name in extra[:3])
        raise BackupError(
            f"{source} holds what felab's schema never makes ({shown}): it was changed after "
            "`felab db backup` wrote it; nothing was replaced, restore another backup"
        )
    return revision


def _check_same_tables(
    source: Path,
    tables_sql: dict[str, tuple[str, ...]],
    indexes: frozenset[tuple[str, str]],
    schema: _Schema,
) -> None:
    """Refuse a table made otherwise than felab's migrations make it, or an index of theirs
    that is gone (twentieth sweep, b B1): a table re-created without its CHECKs and UNIQUEs
    had been restored with rows breaking them (advance 'banana', two cohorts on one channel),
    and the live database kept the weakened table for good."""
    changed = [
        table
        for table, sql in sorted(schema.tables_sql.items())
        if table in tables_sql and tables_sql[table] != sql
    ]
    held_index_names = {name for name, _ in indexes}
    gone = sorted(name for name, _ in schema.indexes if name not in held_index_names)
    if changed or gone:
        shown = [f"table {t} (its columns, CHECKs or UNIQUEs)" for t in changed[:3]]
        shown += [f"index {with_hidden_shown(name)[:40]}" for name in gone[:3]]
        raise BackupError(
            f"{source} is not as felab's schema makes it: {', '.join(shown)} differ or are "
            "missing: it was changed after `felab db backup` wrote it; nothing was replaced, "
            "restore another backup"
        )


def _check_rows(
    source: Path, held: dict[str, set[str]], expected: dict[str, frozenset[str]]
) -> None:
    """Refuse a backup holding what felab's schema never makes (a table or column of its own),
    rows pointing at missing rows, or a value felab cannot read back (felab_core.db.readable):
    each had been restored silently, and every command then stopped on an unexpected error."""
    added = [t for t in held if t not in expected and not t.startswith("sqlite_")]
    added += [f"{t}.{c}" for t in expected if t in held for c in sorted(held[t] - expected[t])]
    if added:
        shown = ", ".join(with_hidden_shown(a)[:60] for a in sorted(added)[:3])
        problem = f"holds what felab's schema never makes ({shown})"
    else:
        try:
            problem = (
                _broken_links(source)
                or _unreadable(source)
                or _unusable_words(source)
                or _out_of_bounds(source)
                or rows_felab_never_stores(source)
            )
        except (sqlite3.Error, DBAPIError) as exc:
            raise BackupError(f"{source} cannot be read ({exc}): restore another backup") from None
    if problem:
        raise BackupError(
            f"{source} {problem}: it was changed after `felab db backup` wrote it, or is "
            "damaged; nothing was replaced, restore another backup"
        )


def _broken_links(source: Path) -> str:
    """SQLite's foreign key check, in words: the first row pointing at a missing row."""
    con = _open_read_only(source)
    try:
        broken = con.execute("PRAGMA foreign_key_check").fetchmany(1)
        if not broken:
            return ""
        child, rowid, parent, fk = broken[0]
        links = con.execute(f"PRAGMA foreign_key_list({_quoted(child)})").fetchall()
        column = next((link[3] for link in links if link[0] == fk), "?")
    finally:
        con.close()
    return f"holds rows pointing at missing rows ({child}.{column} of row {rowid}: not in {parent})"


def _unreadable(source: Path) -> str:
    """The first values felab could not read back from the backup, in words."""
    from sqlalchemy import create_engine

    from felab_core.db.readable import unreadable_values

    engine = create_engine("sqlite://", creator=lambda: _open_read_only(source))
    try:
        with engine.connect() as conn:
            found = unreadable_values(conn, limit=3)
    finally:
        engine.dispose()
    if not found:
        return ""
    return "holds values felab cannot use: " + "; ".join(map(str, found))


#: Words felab checks whenever it stores them, and the check: a backup's value that fails one
#: was restored, and `felab status` then stopped asking for "an IANA name" no one had given.
_WORD_CHECKS = (("cohorts", "timezone"), ("members", "timezone"), ("workers", "name"))


def _unusable_words(source: Path) -> str:
    """The first stored word felab would have refused when it was written, in words."""
    from felab_core.content.calendar import zone
    from felab_core.jobs.keys import check_worker_name

    check = {"timezone": zone, "name": check_worker_name}
    con = _open_read_only(source)
    try:
        for table, column in _WORD_CHECKS:
            query = f"SELECT id, {_quoted(column)} FROM {_quoted(table)} ORDER BY id"
            for row_id, word in con.execute(query):
                try:
                    check[column](str(word))
                except Invalid:
                    shown = with_hidden_shown(repr(str(word)[:40]))
                    return (
                        f"holds values felab cannot use: {table}.{column} of row {row_id} "
                        f"({shown}, which felab refuses when it is given)"
                    )
    finally:
        con.close()
    return ""


#: What felab never stores, as SQL that finds such a row: each had been restored (twentieth
#: sweep, b B2: a result of -1e9 tok/s at concurrency -4, progress -5 of 3, a worker 'banana').
#: The bounds are the checks felab makes when it writes the row (numbers.row_checks, the
#: ingest, pairing): a speed above 0 and at most 100,000 tok/s (MAX_SERVER_TPS), times from 0.
_NEVER_STORED = (
    ("bench_results", "concurrency < 0 OR concurrency > 1000000", "concurrency"),
    ("bench_results", "writing_tps_p50 <= 0 OR writing_tps_p50 > 100000", "writing_tps_p50"),
    ("bench_results", "ttft_p50_s < 0 OR ttft_p50_s > 86400", "ttft_p50_s"),
    ("bench_jobs", "attempts < 0", "attempts"),
    ("bench_jobs", "resends < 0", "resends"),
    ("bench_jobs", "progress_done < 0", "progress_done"),
    ("bench_jobs", "progress_total < 0 OR progress_done > progress_total", "progress_done"),
    ("bench_jobs", "shards < 1 OR shard_index < 0 OR shard_index >= shards", "its shards"),
    ("workers", "status NOT IN ('paired', 'removed')", "status"),
    ("workers", "heartbeat_seq < 0", "heartbeat_seq"),
    # twenty-first sweep: counts, days and sizes felab keeps in their domains when it writes
    # them (drills/review.py, content/calendar.py's advance_day, people/members.py)
    ("cohorts", "manual_day < 1", "manual_day: the course starts at day 1"),
    (
        "members",
        "streak_current < 0 OR streak_best < streak_current",
        "its review streaks, counted up from 0",
    ),
    (
        "members",
        "reviews_total < 0 OR recall_tries < 0 OR recalled < 0 OR recalled > recall_tries",
        "its review counts, counted up from 0",
    ),
    ("card_states", "reps < 0 OR lapses < 0", "reps or lapses, counted up from 0"),
    # FSRS asserts these once a card is past its first review (its values: db/readable BOUNDS)
    (
        "card_states",
        "state IN (2, 3) AND (stability IS NULL OR difficulty IS NULL) OR state = 3 AND step "
        "IS NULL",
        "an FSRS review state without its stability, difficulty or step",
    ),
    ("reviews", "duration_ms < 0", "duration_ms"),
    ("spoken_answers", "duration_s < 0", "duration_s"),
    ("job_outbox", "attempts < 0", "attempts"),
    (
        "member_servers",
        f"model_bytes < {MIN_WEIGHTS_BYTES} OR model_bytes > {MAX_MODEL_BYTES}",
        "model_bytes, a size `felab numbers model SERVER --bytes` refuses",
    ),
    ("numbers", f"value < {MIN_PLAUSIBLE_TPS!r} AND source = 'entered'", "value, tok/s"),
    # Redis's ACL takes only SHA-256 hex; 'zz' had passed, and `broker setup` blamed the port
    (
        "broker_users",
        "length(secret_hash) != 64 OR secret_hash GLOB '*[^0-9a-f]*'",
        "secret_hash, not SHA-256 hex",
    ),
)


def _out_of_bounds(source: Path) -> str:
    """The first row holding what felab never stores there, in words."""
    con = _open_read_only(source)
    try:
        for table, bad, what in _NEVER_STORED:
            try:
                found = con.execute(
                    f"SELECT id FROM {_quoted(table)} WHERE {bad} ORDER BY id LIMIT 1"
                ).fetchone()
            except sqlite3.OperationalError as exc:
                if "no such column" in str(exc) or "no such table" in str(exc):
                    continue  # an older revision, before the column or the table
                raise
            if found is not None:
                return (
                    f"holds values felab never stores: {table} row {found[0]} ({what}: {bad} "
                    "holds for it)"
                )
    finally:
        con.close()
    return ""
