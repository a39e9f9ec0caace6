"""The Celery tasks: each decodes a message and calls felab_core; no rule lives here.

`felab.run_job` runs on a student worker (its own queue); `felab.ingest`, `felab.reconcile` and
`felab.pair` run on the trusted ingest, the only process that opens the database.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

from celery import Task
from celery.exceptions import TimeLimitExceeded

from felab_core.errors import ServiceError
from felab_core.jobs.keys import verify
from felab_core.jobs.messages import JobMessage, event
from felab_core.jobs.run import execute
from felab_worker import student
from felab_worker.app import app

log = logging.getLogger("felab.worker")


@contextlib.contextmanager
def keep_awake() -> Iterator[None]:
    """On macOS, `caffeinate -i` for as long as the job runs: a sleeping Mac times nothing."""
    proc = None
    if sys.platform == "darwin" and shutil.which("caffeinate"):
        proc = subprocess.Popen(["caffeinate", "-i", "-w", str(os.getpid())])
    try:
        yield
    finally:
        if proc is not None:
            proc.terminate()


def hard_limit_reason(seconds: float) -> str:
    return (
        f"the job ran past its hard time limit ({seconds:g} s, FELAB_JOB_TIME_LIMIT_S on the "
        "worker) and was stopped: ask for fewer requests or tokens"
    )


class RunJobTask(Task):  # type: ignore[misc]
    """`felab.run_job`, with a hook for the hard time limit.

    At the hard limit Celery kills the pool child running the job and calls `on_failure` in
    the worker's main process (which holds the same identity): the ingest hears why at once,
    rather than after the reconciler's limit-plus-a-minute. The message is acknowledged, so the
    job is not run again.
    """

    def on_failure(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        if not isinstance(exc, TimeLimitExceeded) or not args:
            return
        try:
            msg = JobMessage.from_dict(args[0])
            rt = student.runtime()
            limit = exc.args[0] if exc.args else rt.app.conf.task_time_limit
            body = {"reason": hard_limit_reason(float(limit))}
            rt.emit(
                event(msg.worker_id, "failed", job_id=msg.job_id, attempt=msg.attempt, body=body)
            )
        except Exception:
            log.exception("could not report the hard time limit of task %s", task_id)


@app.task(name="felab.run_job", base=RunJobTask)  # type: ignore[untyped-decorator]
def run_job(message: dict[str, Any]) -> None:
    rt = student.runtime()
    msg = JobMessage.from_dict(message)
    if msg.worker_id != rt.identity.worker_id:
        log.warning("dropped job %s: it is for worker %s, not this one", msg.job_id, msg.worker_id)
        return
    claim = rt.claims.claim(msg.job_id, msg.attempt)
    if claim == "stale":
        log.info("dropped a late delivery of job %s (attempt %s)", msg.job_id, msg.attempt)
        return

    def report(kind: str, body: dict[str, Any] | None = None) -> None:
        rt.emit(event(msg.worker_id, kind, job_id=msg.job_id, attempt=msg.attempt, body=body))

    if claim == "again":
        report("lost")
        return
    delay = time.time() - msg.sent_at
    log.info("job %s started %.1f ms after it was sent", msg.job_id, delay * 1000)
    report("started", {"delay_s": delay})
    with keep_awake():
        try:
            execute(
                msg,
                targets_file=rt.targets_file,
                limits=rt.limits,
                emit=rt.emit,
                time_limit_s=rt.soft_limit_s,
            )
            log.info("job %s reported at %.6f", msg.job_id, time.time())
        except Exception as exc:
            log.exception("job %s failed", msg.job_id)
            reason = f"the worker hit an error: {type(exc).__name__}: {exc}"
            report("failed", {"reason": reason})


def _ingest_sessions() -> Any:
    from felab_core.db.session import default_sessions

    return default_sessions()


def _send(msg: JobMessage) -> None:
    from felab_worker.dispatch import Dispatcher

    global _dispatcher
    if _dispatcher is None:
        _dispatcher = Dispatcher(app=app)
    _dispatcher.send(msg)


_dispatcher: Any = None


@app.task(name="felab.ingest")  # type: ignore[untyped-decorator]
def ingest(payload: dict[str, Any]) -> None:
    from felab_core.db.session import session_scope
    from felab_core.jobs.ingest import ingest_event
    from felab_core.jobs.lifecycle import send_after_commit

    try:
        with session_scope(_ingest_sessions()) as session:
            res = ingest_event(session, payload)
            send_after_commit(session, _send, res.resend)
    except ServiceError as exc:
        log.warning("refused an event from felab_worker %s: %s", payload.get("worker_id"), exc)
        return
    if not res.accepted:
        log.info("dropped: %s", res.reason)


@app.task(name="felab.reconcile")  # type: ignore[untyped-decorator]
def reconcile() -> dict[str, list[int]]:
    from felab_core.db.session import session_scope
    from felab_core.jobs.lifecycle import send_after_commit
    from felab_core.jobs.reconciler import reconcile as do_reconcile

    with session_scope(_ingest_sessions()) as session:
        out = do_reconcile(session)
        send_after_commit(session, _send, out.resend)
    return {"expired": out.expired, "failed": out.failed, "requeued": out.requeued}


@app.task(name="felab.pair", ignore_result=False)  # type: ignore[untyped-decorator]
def pair(payload: dict[str, Any]) -> dict[str, Any]:
    """Redeem a pairing code for a key whose owner proved they hold its private half."""
    from felab_core.db.session import session_scope
    from felab_core.jobs.pairing import redeem_pair_code

    try:
        verify(payload, str(payload.get("public_key")))
        with session_scope(_ingest_sessions()) as session:
            worker = redeem_pair_code(
                session,
                str(payload["code"]),
                str(payload["public_key"]),
                targets=payload.get("targets"),
            )
            return {"worker_id": worker.id, "name": worker.name}
    except (ServiceError, KeyError) as exc:
        return {"error": str(exc)}
