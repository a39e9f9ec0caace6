"""The trusted side's broker client: sends jobs to machines, cancels them, acknowledges what
machines reported, and keeps the broker's Redis users in step with the database.

Used by the bot (as its job publisher), the ingest and the CLI. It holds FELAB_BROKER_URL, a
user that may manage ACL users; no machine ever holds it.
"""

from __future__ import annotations

import base64
import json
import math
import time
from dataclasses import replace
from functools import cached_property
from typing import Any

from celery import Celery

from felab_core.jobs.ingest import Ack
from felab_core.jobs.messages import JobMessage
from felab_core.jobs.pairing import MachineCredential
from felab_core.settings import Settings, get_settings
from felab_worker import acl, answers
from felab_worker.app import job_queue, server_app
from felab_worker.broker import (
    Store,
    broker_url,
    is_redis,
    make_store,
    redis_client,
    send_task,
)
from felab_worker.names import INGEST_QUEUE, Names

#: A control message waits this long for its machine (an offline machine gets it when back).
CONTROL_TTL_S = 7 * 86_400


#: Ages past this are not believed: any paired machine may push a message whose `at` says
#: 1970 (the signature is checked only when the ingest reads it).
OLDEST_BELIEVED_S = 30 * 86400.0
#: Nor a time this far ahead of the reader's clock (the ingest's own skew bound).
AHEAD_BELIEVED_S = 300.0


def signed_at_of(raw: Any, *, now: float) -> float | None:
    """When the inbox message `raw` says it was signed, or None when it says nothing a felab
    machine could have: not felab's envelope, nested too deep, not a finite number, or a time
    outside [now - OLDEST_BELIEVED_S, now + AHEAD_BELIEVED_S]."""
    if not isinstance(raw, bytes | str):
        return None
    try:
        message = json.loads(raw)
        body = json.loads(base64.b64decode(message["body"], validate=True))
        at = body[0][0]["at"]
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):
        return None
    if isinstance(at, bool) or not isinstance(at, int | float) or not math.isfinite(at):
        return None
    if not now - OLDEST_BELIEVED_S <= at <= now + AHEAD_BELIEVED_S:
        return None
    return float(at)


class Dispatcher:
    def __init__(
        self,
        settings: Settings | None = None,
        app: Celery | None = None,
        *,
        within_s: float | None = None,
    ) -> None:
        """`within_s`: a one-shot command's budget for every admin answer (`felab status`,
        `felab broker setup`), from the first use; None for the long-running ingest."""
        self.settings = settings or get_settings()
        self.within_s = within_s
        self.url = broker_url(self.settings)
        self.app = app or server_app(self.settings)
        self.names = Names(self.settings.broker_prefix)

    @cached_property
    def store(self) -> Store:
        return make_store(self.url, self.settings)

    @cached_property
    def admin(self) -> Any:
        """A plain Redis client as the trusted user (ACL management, server facts)."""
        return redis_client(self.url, self.settings, within_s=self.within_s)

    @property
    def redis(self) -> bool:
        return is_redis(self.url)

    # ------------------------------------------------------------------ jobs

    def send(self, msg: JobMessage) -> None:
        """Write the attempt the machine will claim, then publish the job to its queue.

        A slice's shared start leaves in the broker's clock, the one every machine reads."""
        if msg.spread:
            here = self.store.clock()
            if here is not None:
                msg = replace(msg, start_at=msg.start_at + (here - time.time()))
        ttl = int(self.settings.job_queue_expire_s + self.settings.job_time_limit_s + 600)
        self.store.set(self.names.claim_key(msg.worker_id, msg.job_id), msg.attempt, ttl)
        send_task(
            self.app,
            "felab.run_job",
            args=[msg.to_dict()],
            queue=job_queue(msg.worker_id),
            task_id=f"job{msg.job_id}-{msg.attempt}",
        )

    def withdraw(self, worker_id: int, job_id: int) -> None:
        """Drop a job's pending delivery: the machine finds no attempt to claim, and skips it."""
        self.store.delete(self.names.claim_key(worker_id, job_id))

    def cancel(self, job_id: int, worker_id: int | None) -> None:
        """A cancelled job: its queued message is dropped, and a run already going is stopped
        on the machine (it watches its control list)."""
        if worker_id is None:
            return
        self.withdraw(worker_id, job_id)
        self._control(worker_id, {"cancel": {"job_id": job_id}})

    def acknowledge(self, ack: Ack) -> None:
        """Tell a machine the ingest has its event, so it stops sending it again."""
        self._control(ack.worker_id, {"ack": {"job_id": ack.job_id, "attempt": ack.attempt}})

    def _control(self, worker_id: int, message: dict[str, Any]) -> None:
        key = self.names.control_key(worker_id)
        self.store.push(key, json.dumps(message), ttl_s=CONTROL_TTL_S)

    # ------------------------------------------------------------------ the broker's users

    def sync_users(self, pairing_hash: str, machines: list[MachineCredential]) -> acl.Synced:
        """Make the broker's felab users the database's (nothing to do on the embedded broker)."""
        if not self.redis:
            return acl.Synced(0, 0)
        cap = acl.push_cap_for(self.settings.result_max_bytes)
        memory = self.settings.broker_max_memory_bytes
        return acl.ensure_users(
            self.admin, self.names, pairing_hash, machines, push_cap=cap, memory_cap=memory
        )

    def add_machine(self, cred: MachineCredential) -> None:
        if self.redis:
            acl.set_machine(self.admin, self.names, cred)

    def remove_machine(self, worker_id: int) -> None:
        if self.redis:
            acl.remove_machine(self.admin, self.names, worker_id)

    def users_present(self) -> bool:
        return not self.redis or acl.users_present(self.admin, self.names)

    def depth(self, worker_id: int) -> int | None:
        """Jobs waiting in a machine's queue (None on the embedded broker, which cannot say)."""
        if not self.redis:
            return None
        queue = self.names.key(self.names.jobs_queue(worker_id))
        return answers.a_count(self.admin.llen(queue), self.url, "LLEN")

    def inbox_waiting(self) -> int | None:
        """Messages waiting in the ingest's inbox (None on the embedded broker): one shared list
        for every machine, so a flood from one delays everyone's results behind it."""
        if not self.redis:
            return None
        return answers.a_count(self.admin.llen(self.names.key(INGEST_QUEUE)), self.url, "LLEN")

    def oldest_unread_s(self) -> float:
        """How long the oldest event waiting in the ingest's inbox has waited (0 when none, or
        on the embedded broker): the ingest is behind on machines' news by that much."""
        return self.oldest_signed_s() or 0.0

    def oldest_signed_s(self) -> float | None:
        """How long ago the oldest message in the ingest's inbox says it was signed; None when
        there is none, on the embedded broker, or when it says no believable time."""
        if not self.redis:
            return None
        raw = self.admin.lindex(self.names.key(INGEST_QUEUE), -1)  # LPUSHed: the oldest last
        now = time.time()
        signed_at = signed_at_of(raw, now=now)
        return None if signed_at is None else max(0.0, now - signed_at)

    def uptime_s(self) -> float | None:
        """How long the broker has been up (Redis's own count); None on the embedded broker."""
        if not self.redis:
            return None
        return float(self.admin.info("server").get("uptime_in_seconds", 0))
