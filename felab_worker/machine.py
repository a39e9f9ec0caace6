"""A paired machine's worker: its runtime (identity, heartbeat, control list, spool) and the one
task it registers, `felab.run_job`.

It connects with its own broker user, never the pairing URL, and holds its own key, never the
database's credentials: everything it reports goes to the ingest as a message signed with that
key. The task body decodes, claims and calls felab_core.jobs.run.execute; no rule lives here.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from celery import Celery, Task
from celery.exceptions import TimeLimitExceeded
from celery.signals import worker_ready, worker_shutdown

from felab_core.errors import Invalid
from felab_core.jobs.keys import PAIR_AGAIN, Identity
from felab_core.jobs.messages import JobMessage, event
from felab_core.jobs.run import execute, target_names
from felab_core.jobs.workload import Limits
from felab_core.ops import logs, metrics
from felab_core.settings import Settings
from felab_worker.answers import broker_fault
from felab_worker.app import machine_app, soft_time_limit, worker_args
from felab_worker.broker import Store, broker_url, make_store
from felab_worker.fatal import kept_fatal
from felab_worker.gate import gated, only_felab_tasks
from felab_worker.login import (
    BrokerRefused,
    RefusalWatch,
    login_grace_s,
    refusal,
    unlike_redis,
    user_of,
)
from felab_worker.names import INGEST_QUEUE, Names
from felab_worker.outage import BrokerOutage, away_reason
from felab_worker.spool import Spool

log = logging.getLogger("felab.worker")

#: Events the ingest must get once: kept on disk until it acknowledges them.
KEPT = ("result", "failed", "lost")


def state_folder(key_file: Path) -> Path:
    """Where a machine keeps its spool, beside its identity file (worker-NAME.json ->
    worker-NAME.state/)."""
    return key_file.with_name(key_file.stem + ".state")


@dataclass
class Runtime:
    app: Celery
    identity: Identity
    names: Names
    store: Store
    spool: Spool
    targets_file: Path | None
    limits: Limits
    heartbeat_s: float
    soft_limit_s: float | None = None  # felab's own (in the event loop); Celery's is the hard one
    max_result_bytes: int = 1_000_000
    stop: threading.Event = field(default_factory=threading.Event)
    login: RefusalWatch | None = None  # set by configure; the heartbeat loop feeds it
    outage: BrokerOutage | None = None  # set by start: a broker away said once, and its return
    _unreadable_said: bool = False
    _sender: tuple[int, queue.Queue[dict[str, Any]]] | None = None

    # ------------------------------------------------------------------ sending

    def send(self, payload: dict[str, Any], connection: Any = None) -> None:
        """Sign an event with this machine's key (stamped now) and push it to the ingest.

        One try: what must arrive is kept on disk and sent again, so a broker that is away
        fails the call at once instead of holding it in retries."""
        signed = self.identity.sign({**payload, "at": time.time()})
        self.app.send_task(
            "felab.ingest",
            args=[signed],
            queue=INGEST_QUEUE,
            connection=connection,
            retry=False,
        )

    def report(self, payload: dict[str, Any]) -> None:
        """Send an event; a result, failure or loss is kept on disk until acknowledged.

        Progress goes through a background thread: it is reported from inside the timed run,
        which must never wait on the broker."""
        kind = payload.get("kind")
        if kind not in KEPT:
            with contextlib.suppress(queue.Full):
                self._background().put_nowait(payload)
            return
        self.spool.keep(payload)
        try:
            self.send(payload)
        except Exception as exc:  # the broker away: sent again by the heartbeat loop
            log.warning(
                "job %s: %s kept on disk until the broker is back (%s)",
                payload.get("job_id"),
                kind,
                exc,
            )

    def _background(self) -> queue.Queue[dict[str, Any]]:
        """This process's sender thread (a pool child makes its own: threads do not fork)."""
        if self._sender is None or self._sender[0] != os.getpid():
            q: queue.Queue[dict[str, Any]] = queue.Queue(maxsize=1000)

            def drain() -> None:
                while True:
                    item = q.get()
                    try:
                        self.send(item)
                    except Exception as exc:
                        log.info("progress of job %s not sent (%s)", item.get("job_id"), exc)

            threading.Thread(target=drain, name="felab-progress", daemon=True).start()
            self._sender = (os.getpid(), q)
        return self._sender[1]

    def resend_pending(self, connection: Any = None, *, all_of_them: bool = False) -> int:
        """Send again what the ingest has not acknowledged; returns how many went."""
        sent = 0
        for item in self.spool.due(all_of_them=all_of_them):
            self.send(item.payload, connection=connection)
            self.spool.touch(item)
            sent += 1
        return sent

    # ------------------------------------------------------------------ heartbeat

    def heartbeat(self) -> dict[str, Any]:
        """A numbered heartbeat with the targets file's names and kinds (read again each beat,
        so an edit shows without a restart; never the URLs) and the job running now."""
        names = target_names(self.targets_file)
        if names is None and not self._unreadable_said:  # said once, not every beat
            log.warning(
                "targets file %s cannot be read: its targets are not reported", self.targets_file
            )
        self._unreadable_said = names is None
        body: dict[str, Any] = {
            "seq": self.spool.next_seq(),
            "running": self.spool.running_job(),
            "pending": self.spool.pending_count(),
        }
        if names is not None:
            body["targets"] = names
        return event(self.identity.worker_id, "heartbeat", body=body)

    def heartbeat_loop(self) -> None:
        """Beat on a connection of its own, so a long job never silences it; resend what the
        ingest has not acknowledged."""
        conn = None
        first = True
        while not self.stop.is_set():
            try:
                if conn is None:
                    conn = self.app.connection_for_write()
                self.send(self.heartbeat(), connection=conn)
                self.resend_pending(connection=conn, all_of_them=first)
                first = False
                self._login_seen(None)
                if self.outage is not None:
                    self.outage.back()
            except Exception as exc:  # the broker restarting: try again next beat
                if not self._login_seen(exc) and not self._away(exc):  # a refusal is said
                    log.warning("heartbeat not sent (%s); retrying", exc)  # once, by the watch
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.release()
                conn = None
                if self.login is not None and self.login.final is not None:
                    self.stop.set()
                    os.kill(os.getpid(), signal.SIGTERM)  # Celery's warm shutdown; start() says why
                    return
            self.stop.wait(self.heartbeat_s)

    def _login_seen(self, exc: BaseException | None) -> bool:
        return self.login is not None and self.login.saw(exc)

    def _away(self, exc: BaseException) -> bool:
        """Whether `exc` is the broker being away, said (once per outage) by the outage."""
        reason = away_reason(exc)
        if self.outage is None or reason is None:
            return False
        self.outage.away(reason)
        return True

    # ------------------------------------------------------------------ the control list

    def handle_control(self, raw: str) -> None:
        try:
            msg = json.loads(raw)
        except ValueError:
            return
        if not isinstance(msg, dict):
            return
        if "ack" in msg and isinstance(msg["ack"], dict):
            ack = msg["ack"]
            with contextlib.suppress(KeyError, TypeError, ValueError):
                self.spool.acknowledged(int(ack["job_id"]), str(ack["attempt"]))
        elif "cancel" in msg and isinstance(msg["cancel"], dict):
            with contextlib.suppress(KeyError, TypeError, ValueError):
                job_id = int(msg["cancel"]["job_id"])
                self.spool.cancel(job_id)
                log.info("job %s cancelled from the server", job_id)

    def control_loop(self) -> None:
        """Read acknowledgements and cancels the ingest and the bot push to this machine."""
        key = self.names.control_key(self.identity.worker_id)
        while not self.stop.is_set():
            try:
                raw = self.store.pop(key, 1.0)
            except Exception as exc:  # a refusal is the heartbeat loop's to say
                if not refusal(exc) and not self._away(exc):
                    log.warning("control list not read (%s); retrying", exc)
                self.stop.wait(self.heartbeat_s)
                continue
            if raw is not None:
                self.handle_control(raw)


_runtime: Runtime | None = None


def configure(identity: Identity, key_file: Path, settings: Settings) -> Runtime:
    """Set up this process as the machine `identity`; returns the runtime the task uses."""
    global _runtime
    url = identity.broker_url or broker_url(settings)
    app = machine_app(settings, url, identity.worker_id)
    app.task(name="felab.run_job", base=RunJobTask)(run_job)
    # the owner's (or admin's) own pushes to this queue: a callback, an eta or a built-in task
    # is refused in one line, as the ingest refuses them (a traceback had been printed)
    only_felab_tasks(app)
    gated(app)
    spool = Spool(state_folder(key_file))
    spool.forget_cancels()
    _runtime = Runtime(
        app=app,
        identity=identity,
        names=Names(settings.broker_prefix),
        store=make_store(url, settings),
        spool=spool,
        targets_file=settings.targets_file,
        limits=Limits.from_settings(settings),
        heartbeat_s=settings.worker_heartbeat_s,
        soft_limit_s=soft_time_limit(settings),
        max_result_bytes=settings.result_max_bytes,
        login=RefusalWatch(url, login_grace_s(settings)),
    )
    return _runtime


def runtime() -> Runtime:
    if _runtime is None:
        raise RuntimeError(
            "this process is not a student worker: start one with `felab worker start --name NAME`"
        )
    return _runtime


def default_pool() -> str:
    """solo on macOS (fork is unsafe there with Apple's frameworks loaded), prefork elsewhere
    (a lost pool child is then noticed and its job handed back)."""
    return "solo" if sys.platform == "darwin" else "prefork"


def _stopped_on(exc: BaseException, rt: Runtime, settings: Settings) -> BaseException:
    """What to raise for the error Celery stopped on: a refusal, a broken queue or a broker
    that now answers as no Redis does said in felab's words, anything else as it is (the CLI's
    boundary explains it, or calls it a bug)."""
    if not refusal(exc):
        url = rt.identity.broker_url or broker_url(settings)
        return broker_fault(exc, rt.names.prefix) or unlike_redis(url, settings) or exc
    url = rt.identity.broker_url or ""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return BrokerRefused(
        f"the broker refused this machine's user ({user_of(url)}) its own queue ({first}): "
        f"FELAB_BROKER_PREFIX must be the server's (it is {rt.names.prefix!r}); if the identity "
        f"file was edited, {PAIR_AGAIN}",
        reason="queue",
    )


def start(
    rt: Runtime, settings: Settings, *, pool: str, loglevel: str, debug: bool = False
) -> None:
    """Run the worker until stopped: its own queue only, one job at a time. An error Celery
    cannot recover from is raised (Celery itself would log it and exit 0). A broker that goes
    away is said in one line, and its return in another (Celery's retries and tracebacks only
    with `debug`)."""
    ident = rt.identity
    url = rt.login.url if rt.login is not None else broker_url(settings)
    rt.outage = BrokerOutage(url, "worker", debug=debug, refusals_said=rt.login is not None)
    with kept_fatal(rt.outage) as fatal:
        rt.app.worker_main(  # it drops Celery's exit code: the filter keeps the error
            worker_args(
                settings,
                [
                    "worker",
                    "-Q",
                    Names.jobs_queue(ident.worker_id),
                    "-n",
                    f"{ident.name}-{ident.worker_id}@{socket.gethostname()}",
                    "--pool",
                    pool or default_pool(),
                    "--concurrency",
                    "1",
                    "--without-gossip",
                    "--without-mingle",
                    "--without-heartbeat",
                    "--loglevel",
                    loglevel,
                ],
            )
        )
    if rt.login is not None and rt.login.final is not None:  # removed while it ran
        raise rt.login.final
    if fatal.exc is not None:
        error = _stopped_on(fatal.exc, rt, settings)
        if error is fatal.exc:
            raise error
        raise error from fatal.exc


@worker_ready.connect  # type: ignore[untyped-decorator]
def _start_threads(**_kw: Any) -> None:
    if _runtime is not None:
        for target, name in (
            (_runtime.heartbeat_loop, "felab-heartbeat"),
            (_runtime.control_loop, "felab-control"),
        ):
            threading.Thread(target=target, name=name, daemon=True).start()


@worker_shutdown.connect  # type: ignore[untyped-decorator]
def _stop_threads(**_kw: Any) -> None:
    if _runtime is not None:
        _runtime.stop.set()


# ----------------------------------------------------------------------------- the task


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
            rt = runtime()
            rt.spool.running(None)
            limit = exc.args[0] if exc.args else rt.app.conf.task_time_limit
            body = {"reason": hard_limit_reason(float(limit))}
            rt.report(
                event(msg.worker_id, "failed", job_id=msg.job_id, attempt=msg.attempt, body=body)
            )
        except Exception:
            log.exception("could not report the hard time limit of task %s", task_id)


def _broker_clock(rt: Runtime) -> Callable[[], float] | None:
    """How a slice reads the broker's clock; None on the embedded broker (this machine's)."""
    if rt.store.clock() is None:
        return None

    def read() -> float:
        value = rt.store.clock()
        assert value is not None
        return value

    return read


def run_job(message: dict[str, Any]) -> None:
    """Decode, check it is this machine's, claim the attempt, run, report."""
    rt = runtime()
    try:
        msg = JobMessage.from_dict(message)
    except Invalid as exc:  # a hand-pushed message on this machine's own queue: one line
        log.warning("%s", exc)
        metrics.WORKER_JOBS.labels("dropped").inc()
        return
    if msg.worker_id != rt.identity.worker_id:
        log.warning("dropped job %s: it is for worker %s, not this one", msg.job_id, msg.worker_id)
        return
    claim = rt.store.claim(rt.names.claim_key(msg.worker_id, msg.job_id), msg.attempt)
    if claim == "stale" or rt.spool.is_cancelled(msg.job_id):
        log.info("dropped job %s (attempt %s): late or cancelled", msg.job_id, msg.attempt)
        metrics.WORKER_JOBS.labels("dropped").inc()
        return

    def report(kind: str, body: dict[str, Any] | None = None) -> None:
        rt.report(event(msg.worker_id, kind, job_id=msg.job_id, attempt=msg.attempt, body=body))

    if claim == "again":
        report("lost")
        metrics.WORKER_JOBS.labels("lost").inc()
        return
    delay = time.time() - msg.sent_at
    log.info("job %s started %.1f ms after it was sent", msg.job_id, delay * 1000)
    ctx = contextlib.ExitStack()
    rt.spool.running(msg.job_id)
    try:
        ctx.enter_context(logs.context(job_id=msg.job_id, worker=msg.worker_id))
        report("started", {"delay_s": delay})
        with keep_awake():
            execute(
                msg,
                targets_file=rt.targets_file,
                limits=rt.limits,
                emit=rt.report,
                time_limit_s=rt.soft_limit_s,
                cancelled=lambda: rt.spool.is_cancelled(msg.job_id),
                max_result_bytes=rt.max_result_bytes,
                broker_clock=_broker_clock(rt) if msg.spread else None,
            )
        log.info("job %s reported at %.6f", msg.job_id, time.time())
        metrics.WORKER_JOBS.labels("ran").inc()
    except Exception as exc:
        log.exception("job %s failed", msg.job_id)
        report("failed", {"reason": f"the worker hit an error: {type(exc).__name__}: {exc}"})
    finally:
        rt.spool.running(None)
        ctx.close()
