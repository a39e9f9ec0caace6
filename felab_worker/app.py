"""The Celery apps, one per role, configured from FELAB_* settings.

- `machine_app`: a paired machine's worker. It consumes its own queue only, under its own Redis
  user, with kombu's ack emulation off: that emulation keeps bookkeeping keys shared by every
  consumer and releases its lock with a Lua script, neither of which a machine may touch. A
  message a machine takes is then gone from Redis; felab's reconciler resends what it lost.
- `server_app`: the trusted side (the ingest, and the bot and CLI when they publish jobs). It
  consumes the two inboxes and its own beat queue, with ack emulation and a short visibility
  timeout, so a message the ingest was killed holding comes back in minutes.
- `pairing_app`: an unpaired machine, which only publishes its one pairing request.
Every queue is declared `no_declare`: a publish is a bare LPUSH and a consume a BRPOP, with no
binding tables for anyone to read or write.
"""

from __future__ import annotations

from typing import Any

from celery import Celery
from celery.signals import setup_logging
from kombu.entity import Queue

from felab_core.ops import logs
from felab_core.settings import Settings, get_settings
from felab_worker.broker import (
    CONNECT_TIMEOUT_S,
    READ_TIMEOUT_S,
    broker_url,
    is_redis,
    ssl_options,
)
from felab_worker.names import BEAT_QUEUE, INGEST_QUEUE, PAIRING_QUEUE, Names
from felab_worker.transport import register as register_transport

register_transport()  # a body that is not a message is dropped, never fatal

#: The ingest's messages are short database writes: one it holds longer than this, unacked,
#: was lost with the process, and is handed out again.
SERVER_VISIBILITY_S = 120


@setup_logging.connect  # type: ignore[untyped-decorator]
def _felab_logging(loglevel: int | str | None = None, **_kw: Any) -> None:
    """Celery leaves logging to felab (one format for every process, secrets masked)."""
    logs.setup(get_settings(), level=loglevel or "WARNING")


def worker_args(settings: Settings, args: list[str]) -> list[str]:
    """`celery worker` arguments; in JSON-log mode without the banner, so every line parses."""
    return ["-q", *args] if settings.log_format == "json" else args


def soft_time_limit(settings: Settings) -> float | None:
    """FELAB_JOB_SOFT_MARGIN_S before the hard limit (the job stops itself and says why);
    None when the margin is 0 or leaves no time: the hard limit alone ends the job."""
    soft = settings.job_time_limit_s - settings.job_soft_margin_s
    if settings.job_soft_margin_s <= 0 or soft <= 0:
        return None
    return soft


def _app(
    name: str, url: str, settings: Settings, transport: dict[str, Any], queues: list[str]
) -> Celery:
    app = Celery(name, broker=url, backend=None, set_as_current=False)
    redis = is_redis(url)
    options = dict(transport) if redis else {}
    if redis:
        options.update(
            {
                "global_keyprefix": settings.broker_prefix,
                "socket_connect_timeout": CONNECT_TIMEOUT_S,
                "socket_timeout": READ_TIMEOUT_S,
                "health_check_interval": 30,
                "retry_on_timeout": True,
            }
        )
    tls = ssl_options(url, settings)
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        task_queues=[_queue(q) for q in queues],
        task_default_queue=queues[0],
        task_create_missing_queues=False,
        broker_transport_options=options,
        broker_use_ssl=tls,
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,  # a laptop that slept for hours still comes back
        worker_enable_remote_control=False,
        worker_hijack_root_logger=False,
        worker_prefetch_multiplier=1,
    )
    return app


def machine_app(settings: Settings, url: str, worker_id: int) -> Celery:
    """A paired machine's app: its own queue, and the ingest's inbox to publish to."""
    transport = {"ack_emulation": False}
    app = _app(
        "felab-machine", url, settings, transport, [Names.jobs_queue(worker_id), INGEST_QUEUE]
    )
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_time_limit=settings.job_time_limit_s,
        # No Celery soft limit: it raises from a signal handler, which the job's asyncio loop
        # swallows. felab stops the run itself at soft_time_limit.
        task_soft_time_limit=None,
    )
    return app


def server_app(settings: Settings) -> Celery:
    """The trusted side's app: the inboxes, the beat queue and every machine's queue to send to."""
    url = broker_url(settings)
    transport = (
        {"visibility_timeout": SERVER_VISIBILITY_S, "unacked_restore_interval": 10}
        if is_redis(url)
        else {}
    )
    app = _app("felab-server", url, settings, transport, [INGEST_QUEUE, PAIRING_QUEUE, BEAT_QUEUE])
    app.conf.update(
        task_acks_late=True,
        beat_schedule={
            "reconcile": {
                "task": "felab.reconcile",
                "schedule": settings.reconcile_every_s,
                "options": {"queue": BEAT_QUEUE, "expires": settings.reconcile_every_s},
            }
        },
    )
    return app


def pairing_app(settings: Settings) -> Celery:
    """An unpaired machine's app: it publishes its pairing request, nothing else."""
    return _app(
        "felab-pairing", broker_url(settings), settings, {"ack_emulation": False}, [PAIRING_QUEUE]
    )


def _queue(name: str) -> Queue:
    """A queue felab never declares: no binding tables, a bare LPUSH and BRPOP."""
    return Queue(name, no_declare=True)  # type: ignore[no-untyped-call]


def job_queue(worker_id: int) -> Queue:
    """A machine's queue, for the trusted side to publish to."""
    return _queue(Names.jobs_queue(worker_id))
