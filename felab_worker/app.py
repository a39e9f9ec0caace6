"""The Celery app, configured from FELAB_* settings, with what long benchmark jobs need.

- acks_late + reject_on_worker_lost: a job whose process dies goes back to its queue rather
  than vanishing; the attempt id then decides whether it runs again.
- prefetch 1: a worker never holds a second job while it runs one.
- visibility timeout above the hard time limit: Redis does not hand a job that is still running
  to anyone else; unacked messages are swept back every `unacked_restore_interval` seconds.
"""

from __future__ import annotations

import ssl
from typing import Any

from celery import Celery

from felab_core.jobs.messages import INGEST_QUEUE
from felab_core.settings import Settings, get_settings


def broker_url(settings: Settings) -> str:
    """FELAB_BROKER_URL, or kombu's SQLAlchemy transport on a SQLite file (no server needed)."""
    if settings.broker_url:
        return settings.broker_url
    return f"sqla+sqlite:///{(settings.data_dir / 'broker.db').resolve()}"


def is_redis(url: str) -> bool:
    return url.startswith(("redis://", "rediss://"))


def ssl_options(settings: Settings) -> dict[str, Any] | None:
    """TLS for rediss:// URLs: the server's certificate is always checked."""
    url = broker_url(settings)
    if not url.startswith("rediss://"):
        return None
    opts: dict[str, Any] = {"ssl_cert_reqs": ssl.CERT_REQUIRED}
    if settings.broker_ca_file is not None:
        opts["ssl_ca_certs"] = str(settings.broker_ca_file)
    return opts


def soft_time_limit(settings: Settings) -> float | None:
    """FELAB_JOB_SOFT_MARGIN_S before the hard limit (the job stops itself and says why);
    None when the margin is 0 or leaves no time: the hard limit alone ends the job."""
    soft = settings.job_time_limit_s - settings.job_soft_margin_s
    if settings.job_soft_margin_s <= 0 or soft <= 0:
        return None
    return soft


def make_app(settings: Settings | None = None) -> Celery:
    s = settings or get_settings()
    url = broker_url(s)
    if is_redis(url):
        backend = url
    else:
        backend = f"db+sqlite:///{(s.data_dir / 'broker-results.db').resolve()}"
    app = Celery("felab", broker=url, backend=backend, include=["felab_worker.tasks"])
    # kombu's SQLAlchemy transport hands its options to create_engine, which refuses these:
    # it has no visibility timeout (an unacknowledged message stays where it is).
    transport: dict[str, Any] = {}
    if is_redis(url):
        transport = {
            "visibility_timeout": int(s.job_time_limit_s + 300),
            "unacked_restore_interval": 10,
            "unacked_restore_throttle": 1,
            "global_keyprefix": s.broker_prefix,
        }
    tls = ssl_options(s)
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_time_limit=s.job_time_limit_s,
        # No Celery soft limit: it raises from a signal handler, which the job's asyncio loop
        # swallows. felab stops the run itself at soft_time_limit (worker.student.Runtime).
        task_soft_time_limit=None,
        broker_transport_options=transport,
        result_backend_transport_options=dict(transport),
        broker_connection_retry_on_startup=True,
        broker_use_ssl=tls,
        redis_backend_use_ssl=tls,
        task_ignore_result=True,
        result_expires=600,
        task_default_queue=INGEST_QUEUE,
        worker_enable_remote_control=False,
        worker_hijack_root_logger=False,
        beat_schedule={
            "reconcile": {
                "task": "felab.reconcile",
                "schedule": s.reconcile_every_s,
                "options": {"queue": INGEST_QUEUE, "expires": s.reconcile_every_s},
            }
        },
    )
    return app


app = make_app()
