"""Sending jobs to workers: the attempt is written for claiming, then the message is published.

Used by the bot (through felab_core.jobs.queueing.queue_bench_job's `send`), the ingest's
reconciler and the tests.
"""

from __future__ import annotations

from celery import Celery

from felab_core.jobs.messages import JobMessage, host_queue
from felab_core.settings import Settings, get_settings
from felab_worker.app import make_app
from felab_worker.claims import Claims, make_claims


class Dispatcher:
    def __init__(self, settings: Settings | None = None, app: Celery | None = None) -> None:
        self.settings = settings or get_settings()
        self.app = app or make_app(self.settings)
        self._claims: Claims | None = None

    @property
    def claims(self) -> Claims:
        if self._claims is None:
            self._claims = make_claims(self.settings)
        return self._claims

    def send(self, msg: JobMessage) -> None:
        ttl = int(self.settings.job_queue_expire_s + self.settings.job_time_limit_s + 600)
        self.claims.offer(msg.job_id, msg.attempt, ttl)
        self.app.send_task(
            "felab.run_job",
            args=[msg.to_dict()],
            queue=host_queue(msg.worker_id),
            task_id=f"job{msg.job_id}-{msg.attempt}",
        )

    def withdraw(self, job_id: int) -> None:
        """A cancelled job's message, wherever it is, is dropped when a worker takes it."""
        self.claims.withdraw(job_id)
