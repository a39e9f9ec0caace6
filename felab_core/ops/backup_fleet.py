"""Fleet, model and time rows a backup may hold only as felab's own writers store them
(twenty-second sweep, b B3, B4, B11): a job's server (validate_server), its attempt (the
uuid4 hex felab makes), a running job on a machine, a spread slice of another job, a worker's
key (load_public_key), reported targets (clean_targets) and the job it runs, a member's model
as `felab numbers model` checks it, and no time after the restore's own. Each had been
restored: a job 'running' on no machine stayed so for good, a server 'banana' then stopped
`felab numbers machine` and `export` for that member.
"""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import timedelta
from typing import Any

from felab_core.db.types import utcnow
from felab_core.errors import Invalid
from felab_core.text import formula_mark, holds_hidden, with_hidden_shown

#: As felab_core.jobs.ingest makes and checks an attempt's id (uuid4().hex).
_ATTEMPT = re.compile(r"[0-9a-f]{32}")

#: How far past the restore's own clock a stored time may be (clocks of two machines).
_CLOCK_SLACK = timedelta(days=1)

#: The times felab stores as "now" when it writes the row: none can be after the restore.
_TIMES = (
    ("numbers", "recorded_at"),
    ("bench_jobs", "created_at"),
    ("bench_results", "created_at"),
    ("workers", "created_at"),
    ("members", "joined_at"),
    ("cohorts", "created_at"),
    ("reviews", "reviewed_at"),
)


def _shown(value: Any) -> str:
    return with_hidden_shown(repr(value))[:60]


def _has(con: sqlite3.Connection, table: str, *columns: str) -> bool:
    held = {row[1] for row in con.execute(f'PRAGMA table_info("{table}")').fetchall()}
    return bool(held) and set(columns) <= held


def fleet_rows_problem(con: sqlite3.Connection) -> str:
    """The first fleet, model or time row felab's writers never store, in words ("" if none)."""
    return _future_times(con) or _jobs(con) or _workers(con) or _models(con)


def _future_times(con: sqlite3.Connection) -> str:
    latest = (utcnow() + _CLOCK_SLACK).replace(tzinfo=None).isoformat(sep=" ")
    for table, column in _TIMES:
        if not _has(con, table, "id", column):
            continue
        found = con.execute(
            f'SELECT id, "{column}" FROM "{table}" WHERE "{column}" > ? ORDER BY id LIMIT 1',
            (latest,),
        ).fetchone()
        if found is not None:
            return (
                f"holds a time after this restore: {table} row {found[0]} ({column} "
                f"{_shown(found[1])}; felab stores the time it writes the row)"
            )
    return ""


def _jobs(con: sqlite3.Connection) -> str:
    from felab_core.engine.server_kinds import validate_server

    if not _has(con, "bench_jobs", "server", "attempt", "spread_of", "worker_id"):
        return ""
    query = "SELECT id, server, attempt, status, worker_id, spread_of FROM bench_jobs ORDER BY id"
    for job_id, server, attempt, status, worker_id, spread_of in con.execute(query).fetchall():
        problem = ""
        try:
            if validate_server(str(server)) != server:
                problem = f"server {_shown(server)}, not as felab stores a server's name"
        except Invalid as exc:
            problem = str(exc)
        if not problem and attempt is not None and not _ATTEMPT.fullmatch(str(attempt)):
            problem = f"attempt {_shown(attempt)}, not an attempt's id as felab makes it"
        if not problem and spread_of is not None and spread_of == job_id:
            problem = "a spread slice of itself"
        if not problem and status == "running" and worker_id is None:
            parent = con.execute(
                "SELECT 1 FROM bench_jobs WHERE spread_of = ? LIMIT 1", (job_id,)
            ).fetchone()
            if parent is None:  # a spread run's parent runs on its slices' machines
                problem = "'running' on no machine"
        if problem:
            return f"holds a job felab never stores: bench_jobs row {job_id} ({problem})"
    return ""


def _workers(con: sqlite3.Connection) -> str:
    from felab_core.jobs.fleet import clean_targets
    from felab_core.jobs.keys import load_public_key

    if not _has(con, "workers", "public_key", "targets", "running_job_id"):
        return ""
    query = "SELECT id, public_key, targets, running_job_id FROM workers ORDER BY id"
    for worker_id, key, targets, running in con.execute(query).fetchall():
        problem = ""
        if key is not None:
            try:
                load_public_key(str(key))
            except Invalid as exc:
                problem = f"public_key {_shown(key)}: {exc}"
        if not problem and targets is not None:
            try:
                read = json.loads(targets)
            except (TypeError, ValueError):
                read = targets  # said by the readable-values check, which runs first
            if read is not None and clean_targets(read) != read:
                problem = f"targets {_shown(read)}, not {{name: server kind}} as a machine reports"
        if not problem and running is not None:
            job = con.execute(
                "SELECT worker_id FROM bench_jobs WHERE id = ?", (running,)
            ).fetchone()
            if job is None or job[0] != worker_id:
                problem = f"running job {_shown(running)}, which is no job of this machine"
        if problem:
            return f"holds a machine felab never stores: workers row {worker_id} ({problem})"
    return ""


def model_problem(server: Any, model: Any, label: Any) -> str:
    """What `felab numbers model` says of this server, model name and label ("" if it stores
    them as they are): the same checks as felab_core.people.members.set_server_model."""
    from felab_core.engine.server_kinds import validate_server

    try:
        if validate_server(str(server)) != server:
            return f"server {_shown(server)}, not as felab stores a server's name"
    except Invalid as exc:
        return str(exc)
    if not isinstance(model, str) or not model.strip() or model != model.strip():
        return f"model {_shown(model)}, not a model name as felab stores it"
    if label is not None and (not isinstance(label, str) or label != label.strip() or not label):
        return f"label {_shown(label)}, not a label as felab stores it"
    for what, text, most in (("model name", model, 300), ("label", label or "", 100)):
        if holds_hidden(text):
            return f"the {what} {_shown(text)} holds invisible or control characters"
        if len(text) > most:
            return f"the {what} is longer than {most} characters"
        if mark := formula_mark(text, allowed="@"):
            return f"the {what} begins with {mark!r}"
    return ""


def _models(con: sqlite3.Connection) -> str:
    if not _has(con, "member_servers", "server", "model", "model_label"):
        return ""
    query = "SELECT id, server, model, model_label FROM member_servers ORDER BY id"
    for row_id, server, model, label in con.execute(query).fetchall():
        problem = model_problem(server, model, label)
        if problem:
            return (
                f"holds a model `felab numbers model` refuses: member_servers row {row_id} "
                f"({problem})"
            )
    return ""
