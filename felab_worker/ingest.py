"""The trusted ingest: events from machines, pairing requests and the reconciler's beat, each a
Celery task that decodes and calls felab_core.

Anyone allowed to push to one of the ingest's queues can put any task name in the message, and
the message's own routing fields are the sender's to write: so no task trusts where a message
came from. An event is signed by its worker, a pairing request proves its code, and the
reconciler, which anyone could ask for, runs at most twice per beat interval. What Celery would
act on for the sender (callbacks, an eta, another task's name) never reaches a task: the gate
drops it (felab_worker.gate).

It is the one process that opens the database for the fleet, and it holds the broker user that
manages machines' Redis users. A database that is briefly away is retried with backoff; a
message the ingest was killed holding comes back within minutes (felab_worker.app).
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from celery import Celery, Task
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session, sessionmaker

from felab_core.db.session import default_sessions, session_scope
from felab_core.db.types import utcnow
from felab_core.errors import ServiceError
from felab_core.jobs.handshake import answer_id, seal
from felab_core.jobs.ingest import Ingested, ingest_event
from felab_core.jobs.lifecycle import send_after_commit
from felab_core.jobs.pairing import (
    MachineCredential,
    PairRequestLate,
    machine_credentials,
    pairing_secret_hash,
    redeem_pair_request,
    secret_hash,
)
from felab_core.jobs.reconciler import reconcile
from felab_core.ops import logs, metrics
from felab_core.ops.repeats import Repeated, flush_all
from felab_core.ops.status import fleet_facts
from felab_core.settings import Settings
from felab_worker.acl import Synced
from felab_worker.app import server_app
from felab_worker.broker import broker_url
from felab_worker.dispatch import Dispatcher
from felab_worker.gate import gated, only_felab_tasks
from felab_worker.outage import BrokerOutage, away_reason

log = logging.getLogger("felab.ingest")
#: A machine's flood of refused events is said once a kind, then counted.
_SAID = Repeated(log)

#: Database errors worth waiting out (the server restarting, a dropped connection).
TRANSIENT = (sa_exc.OperationalError, sa_exc.InterfaceError)
_LOOKUP = re.compile(r"^[0-9a-f]{64}\Z")


@dataclass
class Ingest:
    """The ingest's state: settings, its broker client, its database sessions."""

    settings: Settings
    dispatcher: Dispatcher
    outage: BrokerOutage
    _last_reconcile: float = float("-inf")
    started: float = field(default_factory=time.monotonic)

    def due(self) -> bool:
        """Whether the reconciler may run now: at most twice per FELAB_RECONCILE_EVERY_S, so a
        flood of forged requests for it costs nothing."""
        now = time.monotonic()
        if now - self._last_reconcile < self.settings.reconcile_every_s / 2:
            return False
        self._last_reconcile = now
        return True

    @cached_property
    def sessions(self) -> sessionmaker[Session]:
        return default_sessions(self.settings.resolved_database_url())

    # ------------------------------------------------------------------ the broker's users

    def sync_users(self) -> Synced:
        """Recreate felab's Redis users from the database (after a restart, or at start)."""
        with session_scope(self.sessions) as session:
            pairing_hash = pairing_secret_hash(session)
            machines = machine_credentials(session)
        return self.dispatcher.sync_users(pairing_hash, machines)

    # ------------------------------------------------------------------ metrics

    def facts(self) -> dict[str, Any]:
        """What the fleet's gauges show at a scrape (felab_core.ops.metrics.FleetCollector)."""
        now = utcnow()
        with session_scope(self.sessions) as session:
            seen = fleet_facts(session, now)
        depths = {wid: self.dispatcher.depth(wid) for wid in seen["age"]}
        seen["depth"] = {wid: d for wid, d in depths.items() if d is not None}
        waiting = self.dispatcher.inbox_waiting()
        if waiting is not None:
            seen["inbox"] = waiting
            seen["inbox_oldest_s"] = self.dispatcher.oldest_unread_s()
        return seen

    # ------------------------------------------------------------------ events

    def ingest(self, payload: Any) -> Ingested | None:
        who = payload.get("worker_id") if isinstance(payload, dict) else None
        job = payload.get("job_id") if isinstance(payload, dict) else None
        try:
            with (
                logs.context(
                    worker=who if isinstance(who, int) else None,
                    job_id=job if isinstance(job, int) else None,
                ),
                session_scope(self.sessions) as session,
            ):
                res = ingest_event(session, payload, settings=self.settings)
                send_after_commit(session, self.dispatcher.send, res.resend)
                log.debug("applied a %s event", payload.get("kind"))
        except ServiceError as exc:
            metrics.INGEST_REFUSED.labels(exc.reason).inc()
            name = str(who) if isinstance(who, int) and not isinstance(who, bool) else "?"
            _SAID.warn(
                (name, exc.reason),
                f"refused {{n:,}} more events from worker {name} ({exc.reason})",
                "refused an event from worker %s: %s",
                str(who)[:24],
                exc,
            )
            return None
        if not res.accepted:
            log.info("dropped: %s", res.reason)
        try:
            if res.ack is not None:
                self.dispatcher.acknowledge(res.ack)
            for worker_id, job_id in res.withdraw:
                self.dispatcher.withdraw(worker_id, job_id)
        except Exception as exc:  # the machine resends; its event is applied once
            log.warning("could not acknowledge to worker %s: %s", payload.get("worker_id"), exc)
        return res

    # ------------------------------------------------------------------ pairing

    def pair(self, payload: Any) -> None:
        """Redeem a pairing request; the answer waits under the request's lookup, sealed."""
        lookup = payload.get("lookup") if isinstance(payload, dict) else None
        if not isinstance(lookup, str) or not _LOOKUP.match(lookup):
            log.warning("dropped a pairing request without a valid lookup")
            return
        box: dict[str, str]
        try:
            with session_scope(self.sessions) as session:
                paired = redeem_pair_request(session, payload, now_s=self._clock())
                worker = paired.worker
                answer: dict[str, Any] = {"worker_id": worker.id, "name": worker.name}
                if self.dispatcher.redis:
                    names = self.dispatcher.names
                    answer["broker_user"] = names.machine_user(worker.id)
                    answer["broker_password"] = paired.broker_password
                    cred = MachineCredential(worker.id, secret_hash(paired.broker_password))
                    self.dispatcher.remove_machine(worker.id)  # a re-paired name: old links cut
                    self.dispatcher.add_machine(cred)
                box = {"sealed": seal(paired.secret, answer)}
                log.info("paired worker %s (%s)", worker.id, worker.name)
        except PairRequestLate as exc:  # its sender left: nobody reads an answer
            _SAID.warn(
                ("pairing", "late"),
                "dropped {n:,} more pairing requests whose senders had stopped waiting (their "
                "codes not used)",
                "dropped a pairing request that came %.0f s after its sender stopped waiting "
                "(was the ingest stopped?): its code was not used, the machine may pair with it "
                "again",
                exc.late_s,
            )
            return
        except ServiceError as exc:
            box = {"error": str(exc)}
        key = self.dispatcher.names.answer_key(answer_id(payload))
        self.dispatcher.store.set(key, json.dumps(box), int(self.settings.pair_code_ttl_s))

    def _clock(self) -> float:
        """The broker's clock, which a pairing request's `until` is read on; this machine's
        when the broker is the embedded one or does not answer."""
        try:
            now = self.dispatcher.store.clock()
        except Exception:  # the broker away: the redeem fails on it soon after, or this is near
            now = None
        return time.time() if now is None else now

    # ------------------------------------------------------------------ the reconciler

    def heard_for_s(self) -> float:
        """How long this ingest has heard machines without a gap: since it or the broker last
        started, and zero while it is behind on their events (heartbeats waiting unread are
        news the database does not have yet)."""
        heard = time.monotonic() - self.started
        uptime = self.dispatcher.uptime_s()
        if uptime is not None:
            heard = min(heard, uptime)
        if self.dispatcher.oldest_unread_s() > self.settings.worker_offline_after_s / 2:
            heard = 0.0
        return heard

    def reconcile(self) -> dict[str, list[int]]:
        if not self.dispatcher.users_present():
            synced = self.sync_users()
            # Machines could not log in until now: give them time to be heard from before
            # any of them is called lost.
            self.started = time.monotonic()
            log.warning(
                "the broker had lost felab's users (restarted?): recreated %d machine(s)",
                synced.machines,
            )
        with session_scope(self.sessions) as session:
            out = reconcile(session, settings=self.settings, heard_for_s=self.heard_for_s())
            send_after_commit(session, self.dispatcher.send, out.resend)
        return {"expired": out.expired, "failed": out.failed, "requeued": out.requeued}


def create_app(settings: Settings, *, debug: bool = False) -> tuple[Celery, Ingest]:
    """The ingest's Celery app with its three tasks registered; with `debug`, Celery's own
    words about a broker that went away are kept (tracebacks included)."""
    app = server_app(settings)
    outage = BrokerOutage(broker_url(settings), "ingest", debug=debug)
    state = Ingest(settings, Dispatcher(settings, app), outage)
    retry: dict[str, Any] = {
        "bind": True,
        "autoretry_for": TRANSIENT,
        "retry_backoff": 2,
        "retry_backoff_max": 60,
        "retry_jitter": True,
        "max_retries": 40,
    }

    @app.task(name="felab.ingest", **retry)  # type: ignore[untyped-decorator]
    def ingest(task: Task, payload: Any) -> None:
        state.ingest(payload)

    @app.task(name="felab.pair", **retry)  # type: ignore[untyped-decorator]
    def pair(task: Task, payload: Any) -> None:
        state.pair(payload)

    @app.task(name="felab.reconcile")  # type: ignore[untyped-decorator]
    def reconcile_task() -> None:
        state.outage.back()  # a beat came through the broker
        flush_all()  # the counts of a flood that stopped
        if not state.due():
            log.info("a reconcile asked for between beats was skipped")
            return
        try:
            state.reconcile()
        except TRANSIENT as exc:
            log.warning("reconciler skipped a beat: the database is away (%s)", exc)
        except Exception as exc:  # the broker gone again mid-beat: said once, not a traceback
            reason = away_reason(exc)
            if reason is None:
                raise
            state.outage.away(reason)

    only_felab_tasks(app)
    gated(app)
    return app, state
