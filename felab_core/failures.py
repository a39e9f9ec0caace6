"""What went wrong, in words: every failure felab expects (a bad setting, an unreachable or
unusable database or broker, a file that is not what it should be, felab's own refusals) turned
into one or two lines that say what is wrong and what to do, with an exit code.

Every entry point (the CLI, the bot, the worker, the ingest) shows these instead of a traceback;
a traceback is for a bug, and then only when asked for (`--debug`, FELAB_DEBUG=1).

Exceptions are recognised by their class's qualified name, so this module imports none of the
libraries they come from: a student's machine loads it without SQLAlchemy or Redis.
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass
from typing import Any

from felab_core.redact import redact, url_password_masked
from felab_core.text import holds_hidden

#: Bad usage, a bad setting or file: something to fix before trying again.
EXIT_USAGE = 2
#: A service felab needs (the database, the broker, a server) could not be reached or used.
EXIT_UNREACHABLE = 3
#: A bug in felab: the message asks for a report with the traceback (`--debug`).
EXIT_BUG = 70
#: Interrupted by the user (Ctrl-C), as a shell reports it.
EXIT_INTERRUPTED = 130

#: felab's own errors: their message is written for people and says what to do.
_OWN_ERRORS = frozenset(
    {
        "felab_core.errors.ServiceError",
        "felab_core.sizing.errors.SizingError",
        "felab_core.engine.targets.TargetError",
        "felab_core.engine.results.ResultsFileError",
        "felab_core.engine.probe.IdentityError",
        "felab_core.lab.engines.EngineError",
        "felab_core.lab.serve.ServeError",
        "felab_core.content.loader.ContentError",
        "felab_core.db.session.DatabaseError",
        "felab_core.reports.memo.MemoError",
        "felab_worker.autostart.ServiceError",
        "felab.fleet_demo.FleetDemoError",
    }
)
_NETWORK_ERRNOS = frozenset(
    {
        errno.ECONNREFUSED,
        errno.ECONNRESET,
        errno.EHOSTUNREACH,
        errno.ENETUNREACH,
        errno.ETIMEDOUT,
        errno.ECONNABORTED,
    }
)
#: Settings whose value may hold a secret (a URL's password, a token): their value is never
#: repeated. Matched at the end of the name: FELAB_JOB_MAX_TOKENS is a count, not a token.
_SECRET_FIELDS = ("_url", "_token", "password", "secret")


@dataclass(frozen=True)
class Failure:
    """What to tell the person, and the process's exit code."""

    message: str
    exit_code: int


def debug_requested() -> bool:
    """FELAB_DEBUG=1 (or true/yes/on): show tracebacks. Read from the environment itself, not
    through Settings, since a bad setting is one of the things it helps to debug."""
    return os.environ.get("FELAB_DEBUG", "").strip().lower() in _YES


_YES = ("1", "true", "yes", "on")
_NO = ("", "0", "false", "no", "off")


def debug_setting_problem() -> str | None:
    """What is wrong with FELAB_DEBUG, if it is neither yes nor no (a typo would silently mean
    no, and the traceback someone asked for would never come)."""
    raw = os.environ.get("FELAB_DEBUG", "")
    if raw.strip().lower() in _YES + _NO:
        return None
    return f"FELAB_DEBUG={raw[:40]!r} is neither yes nor no: set it to 1 (show tracebacks) or 0"


def _names(exc: BaseException) -> set[str]:
    return {f"{c.__module__}.{c.__qualname__}" for c in type(exc).__mro__}


def _first_line(exc: BaseException | None) -> str:
    text = str(exc or "").strip().splitlines()
    return redact(text[0].strip()) if text else type(exc).__name__


def settings_messages(errors: list[dict[str, Any]]) -> list[str]:
    """One line per bad FELAB_ variable, naming it (a pydantic error list on Settings)."""
    from felab_core.settings import Settings

    lines: list[str] = []
    for e in errors:
        if not e.get("loc"):  # a rule between two settings: its message names both
            lines.append(str(e["msg"]).removeprefix("Value error, ") + ".")
            continue
        field = str(e["loc"][0])
        name = f"FELAB_{field.upper()}"
        secret = field.endswith(_SECRET_FIELDS)
        given = str(e.get("input"))
        shown = given.encode("unicode_escape").decode() if holds_hidden(given) else given
        value = "" if secret else f"={shown[:80]}"  # an escape code would reach the terminal
        info = Settings.model_fields.get(field)
        about = (
            f" ({info.description.rstrip('.')})" if info is not None and info.description else ""
        )
        msg = str(e["msg"]).removeprefix("Value error, ")
        # a message that already says "unset it" is not told it twice
        tail = "" if "unset it" in msg else " Fix it, or unset it for the default."
        lines.append(f"{name}{value}: {msg}{about}.{tail}")
    return lines


def unreadable_sqlite(where: str, said: str) -> str | None:
    """What to do about an SQLite database that SQLite cannot read (`said` is its message):
    damaged or cut short ("malformed"), or no SQLite file at all; None for any other error.
    One wording for every command, and for `db backup` and `db restore`, which add theirs."""
    if "file is not a database" in said or "file is encrypted" in said:
        return (
            f"{where} is not an SQLite database (another program's file, or felab's overwritten "
            "or cut short): point FELAB_DATABASE_URL or FELAB_DATA_DIR at felab's own database, "
            "or restore a backup (`felab db restore FILE --yes`)"
        )
    if "malformed" in said or "corrupt" in said:
        return (
            f"the database {where} is damaged (SQLite: {said}): restore a backup "
            "(`felab db restore FILE --yes`)"
        )
    return None


def _database_url() -> str:
    try:
        from felab_core.settings import get_settings

        return url_password_masked(get_settings().resolved_database_url())
    except Exception:
        return "FELAB_DATABASE_URL"


def _broker_url() -> str:
    raw = os.environ.get("FELAB_BROKER_URL")
    return url_password_masked(raw) if raw else "the broker (FELAB_BROKER_URL)"


def _from_pathlib(exc: BaseException) -> bool:
    """Whether `exc` was raised inside pathlib (a path's own recursion, not felab's)."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith("pathlib.py"):
            return True
        tb = tb.tb_next
    return False


def explain(exc: BaseException) -> Failure | None:
    """The words and exit code for `exc`, or None when it is not a failure felab expects."""
    names = _names(exc)
    unreachable = {
        "felab_core.sizing.errors.Unreachable",
        "felab_worker.pairing.BrokerUnreachable",
        "felab_worker.answers.BrokerUnusable",  # it answered, but not as Redis, or too slowly
        "felab_core.ops.backup.BackupUnreachable",
    }
    if unreachable & names:
        return Failure(redact(str(exc)), EXIT_UNREACHABLE)
    if isinstance(exc, RecursionError) and _from_pathlib(exc):  # mkdir(parents=True), 2,000 deep
        return Failure(
            "a folder path given is nested too deeply (more folders than Python's path library "
            "makes one by one): give a shorter path (--out, --json, --csv)",
            EXIT_USAGE,
        )
    if "builtins.OverflowError" in names and "int too large" in str(exc):
        return Failure(
            "a number given is too large (an id, a day or a count above 9,223,372,036,854,775,807"
            "): check the numbers on the command line",
            EXIT_USAGE,
        )
    if "builtins.ValueError" in names and "integer string conversion" in str(exc):
        # Python refuses to read an integer of over 4,300 digits (a guard against slow parsing)
        return Failure(
            "a file given holds a number of thousands of digits (Python reads at most 4,300): "
            "no config, record, pack or trace felab reads holds one; check the file",
            EXIT_USAGE,
        )
    if "alembic.util.exc.CommandError" in names and "Can't locate revision" in str(exc):
        return Failure(
            f"the database {_database_url()} is at a schema this felab does not know (made by a "
            "newer felab?): upgrade felab, or point FELAB_DATABASE_URL / FELAB_DATA_DIR at "
            "another database",
            EXIT_USAGE,
        )
    if names & _OWN_ERRORS:
        return Failure(redact(str(exc)) or type(exc).__name__, EXIT_USAGE)
    if "pydantic_core._pydantic_core.ValidationError" in names and getattr(exc, "title", "") in (
        "Settings",
    ):
        lines = settings_messages(exc.errors())  # type: ignore[attr-defined]
        return Failure("bad setting: " + "\n       ".join(lines), EXIT_USAGE)
    if "sqlalchemy.exc.NoSuchModuleError" in names:
        return Failure(
            f"the database URL {_database_url()} names a driver felab does not ship: use "
            "postgresql+psycopg://USER:PASSWORD@HOST:5432/NAME, or unset FELAB_DATABASE_URL "
            "for SQLite",
            EXIT_USAGE,
        )
    if "sqlalchemy.exc.ArgumentError" in names:
        return Failure(
            "FELAB_DATABASE_URL is not a database URL: use "
            "postgresql+psycopg://USER:PASSWORD@HOST:5432/NAME, or sqlite:////ABSOLUTE/PATH.db "
            "(four slashes), or unset it for felab's own SQLite file",
            EXIT_USAGE,
        )
    if "sqlalchemy.exc.DBAPIError" in names:
        orig = getattr(exc, "orig", None)
        detail = _first_line(orig)
        if (unreadable := unreadable_sqlite(_database_url(), detail)) is not None:
            return Failure(unreadable, EXIT_USAGE)
        if "unable to open database file" in detail:
            return Failure(
                f"cannot open the database {_database_url()}: the path is a folder, or its "
                "folder is missing or not writable; check FELAB_DATA_DIR or FELAB_DATABASE_URL",
                EXIT_USAGE,
            )
        sqlite_said = orig is not None and bool(
            _names(orig) & {"sqlite3.OperationalError", "sqlite3.DatabaseError"}
        )
        if sqlite_said and "locked" in detail:  # not unreachable: the URL is right (sweep 22, B9)
            return Failure(
                f"the database {_database_url()} is locked by another process (the bot, the "
                "ingest, another felab command or a sqlite3 shell writing to it): try again "
                "when it has finished",
                EXIT_UNREACHABLE,
            )
        if sqlite_said:
            # An SQLite file is a path on this machine: nothing to reach, something to fix.
            return Failure(
                f"cannot use the SQLite database {_database_url()}: {detail}; point "
                "FELAB_DATABASE_URL or FELAB_DATA_DIR at a file felab can write",
                EXIT_USAGE,
            )
        if re.search(r"invalid \w+ value|invalid (connection|URI query) option", detail):
            # libpq refused an option after ? in the URL: nothing to reach, something to fix
            return Failure(
                f"FELAB_DATABASE_URL's options are not PostgreSQL's: {detail}; fix or remove "
                "what follows ? in the URL",
                EXIT_USAGE,
            )
        if {"sqlalchemy.exc.OperationalError", "sqlalchemy.exc.InterfaceError"} & names:
            return Failure(
                f"could not use the database at {_database_url()}: {detail}\n"
                "       Is it running and reachable? Check FELAB_DATABASE_URL.",
                EXIT_UNREACHABLE,
            )
        return Failure(f"the database refused: {detail}", EXIT_USAGE)
    if "redis.exceptions.AuthenticationError" in names:  # reached: it refused the user
        return Failure(
            f"the broker at {_broker_url()} refused its user: {_first_line(exc)}\n"
            "       Check the user and password in FELAB_BROKER_URL (`felab broker setup` "
            "prints the server's URLs; a student's machine uses the one it paired with).",
            EXIT_USAGE,
        )
    if names & {
        "redis.exceptions.ConnectionError",
        "redis.exceptions.TimeoutError",
        "kombu.exceptions.OperationalError",
    }:
        url = _broker_url()
        tls_hint = (
            " A rediss:// URL that times out is often a plain (non-TLS) Redis: is this port "
            "TLS (rediss://) or plain (redis://)?"
            if url.startswith("rediss://") and "timeout" in _first_line(exc).lower()
            else ""
        )
        return Failure(
            f"could not reach the broker at {url}: {_first_line(exc)}\n"
            "       Is Redis running there? Check FELAB_BROKER_URL (and FELAB_BROKER_CA_FILE "
            f"for rediss://).{tls_hint}",
            EXIT_UNREACHABLE,
        )
    if isinstance(exc, ConnectionError | TimeoutError) or (
        isinstance(exc, OSError) and exc.errno in _NETWORK_ERRNOS
    ):
        return Failure(
            f"could not connect: {_first_line(exc)}\n"
            "       Is the service running, and is its address right in your FELAB_ settings?",
            EXIT_UNREACHABLE,
        )
    if isinstance(exc, OSError) and exc.errno is not None and exc.filename:
        where = f" {redact(str(exc.filename))}" if exc.filename else ""
        hint = {
            errno.ENOTDIR: "a part of that path is a file, not a folder",
            errno.EISDIR: "that is a folder, not a file",
            errno.EACCES: "permission denied",
            errno.ENOENT: "no such file or folder",
            errno.ENOSPC: "the disk is full",
            errno.EROFS: "the file system is read-only",
            errno.EEXIST: "it already exists (a file where a folder is needed?)",
        }.get(exc.errno, exc.strerror or "")
        return Failure(f"cannot use{where}: {hint}: choose another path", EXIT_USAGE)
    if isinstance(exc, UnicodeDecodeError):
        return Failure(f"a file is not UTF-8 text ({_first_line(exc)})", EXIT_USAGE)
    return None


def unexpected(exc: BaseException) -> Failure:
    """The words for a bug: short, and how to get the traceback for a report."""
    return Failure(
        f"felab stopped on an unexpected error ({type(exc).__name__}: {_first_line(exc)}).\n"
        "       This is a bug in felab: run again with --debug (or FELAB_DEBUG=1) and report "
        "the traceback.",
        EXIT_BUG,
    )
