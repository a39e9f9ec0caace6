"""A student worker's process state: its identity, its targets file, and the heartbeat.

It holds broker credentials and its own key, never database credentials: everything it reports
goes to the ingest as a message signed with that key.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from celery import Celery
from celery.signals import worker_ready, worker_shutdown

from felab_core.jobs.keys import Identity
from felab_core.jobs.messages import INGEST_QUEUE, event
from felab_core.jobs.run import target_names
from felab_core.jobs.workload import Limits
from felab_core.settings import Settings
from felab_worker.app import soft_time_limit
from felab_worker.claims import Claims, make_claims

log = logging.getLogger("felab.worker")


@dataclass
class Runtime:
    app: Celery
    identity: Identity
    targets_file: Path | None
    limits: Limits
    claims: Claims
    heartbeat_s: float
    soft_limit_s: float | None = None  # felab's own (in the event loop); Celery's is the hard one
    stop: threading.Event = field(default_factory=threading.Event)
    _unreadable_said: bool = False

    def emit(self, payload: dict[str, Any], connection: Any = None) -> None:
        """Sign an event with this worker's key and send it to the ingest."""
        self.app.send_task(
            "felab.ingest",
            args=[self.identity.sign(payload)],
            queue=INGEST_QUEUE,
            connection=connection,
        )

    def heartbeat(self) -> dict[str, Any]:
        """A heartbeat with the names and kinds in the targets file, read again each beat so an
        edit shows without a restart (never the URLs: they stay on this machine)."""
        names = target_names(self.targets_file)
        if names is None and not self._unreadable_said:  # said once, not every beat
            log.warning(
                "targets file %s cannot be read: its targets are not reported", self.targets_file
            )
        self._unreadable_said = names is None
        body = {} if names is None else {"targets": names}
        return event(self.identity.worker_id, "heartbeat", body=body)

    def heartbeat_loop(self) -> None:
        """Beat on a connection of its own, so a long job never silences it."""
        conn = None
        while not self.stop.is_set():
            try:
                if conn is None:
                    conn = self.app.connection_for_write()
                self.emit(self.heartbeat(), connection=conn)
            except Exception as exc:  # the broker restarting: try again next beat
                log.warning("heartbeat not sent (%s); retrying", exc)
                if conn is not None:
                    conn.release()
                conn = None
            self.stop.wait(self.heartbeat_s)


_runtime: Runtime | None = None


def configure(app: Celery, identity: Identity, settings: Settings) -> Runtime:
    global _runtime
    _runtime = Runtime(
        app=app,
        identity=identity,
        targets_file=settings.targets_file,
        limits=Limits.from_settings(settings),
        claims=make_claims(settings),
        heartbeat_s=settings.worker_heartbeat_s,
        soft_limit_s=soft_time_limit(settings),
    )
    return _runtime


def runtime() -> Runtime:
    if _runtime is None:
        raise RuntimeError(
            "this process is not a student worker: start one with `felab worker start --name NAME`"
        )
    return _runtime


@worker_ready.connect  # type: ignore[untyped-decorator]
def _start_heartbeat(**_kw: Any) -> None:
    if _runtime is not None:
        threading.Thread(
            target=_runtime.heartbeat_loop, name="felab-heartbeat", daemon=True
        ).start()


@worker_shutdown.connect  # type: ignore[untyped-decorator]
def _stop_heartbeat(**_kw: Any) -> None:
    if _runtime is not None:
        _runtime.stop.set()
