"""felab's own Prometheus metrics: counts and timings, never member names.

Counters and histograms are defined once here and updated where things happen (a job finishing,
an event refused, a bot answer). Gauges that are facts about the database (queue depths,
heartbeat ages, the outbox) are read when Prometheus scrapes, by `FleetCollector`. Each process
serves its own `/metrics` when FELAB_METRICS_PORT is set; a worker's pool children write to
prometheus-client's multiprocess files, which its main process serves.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from felab_core.errors import Invalid

_TIMES = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800)

JOBS = Counter("felab_jobs", "Jobs that ended, by how they ended.", ["status"])
QUEUE_SECONDS = Histogram(
    "felab_job_queue_seconds", "From a job's queueing to its start on the machine.", buckets=_TIMES
)
RUN_SECONDS = Histogram(
    "felab_job_run_seconds", "From a job's start on the machine to its result.", buckets=_TIMES
)
INGEST_REFUSED = Counter(
    "felab_ingest_refused", "Events from machines the ingest refused, by why.", ["reason"]
)
INTERACTION_SECONDS = Histogram(
    "felab_interaction_seconds",
    "From a Discord interaction to the bot's first answer, by command.",
    ["command"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5),
)
WORKER_JOBS = Counter("felab_worker_jobs", "Jobs this machine ran, by outcome.", ["outcome"])


def seconds_between(start: datetime | None, end: datetime | None) -> float | None:
    if start is None or end is None:
        return None
    return max(0.0, (end - start).total_seconds())


class FleetCollector(Collector):
    """Gauges read from the database (and the broker) at scrape time."""

    def __init__(self, read: Callable[[], dict[str, Any]]) -> None:
        self.read = read  # returns {"depth": {worker_id: n}, "age": {worker_id: s}, ...}

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            facts = self.read()
        except Exception:  # a scrape must not fail because the database blinked
            return
        depth = GaugeMetricFamily(
            "felab_queue_depth", "Jobs waiting in a machine's queue.", labels=["worker"]
        )
        for wid, n in sorted(facts.get("depth", {}).items()):
            depth.add_metric([str(wid)], n)
        yield depth
        age = GaugeMetricFamily(
            "felab_worker_heartbeat_age_seconds",
            "Seconds since a machine's last heartbeat.",
            labels=["worker"],
        )
        for wid, s in sorted(facts.get("age", {}).items()):
            age.add_metric([str(wid)], s)
        yield age
        yield GaugeMetricFamily(
            "felab_outbox_pending", "Finished jobs not posted yet.", value=facts.get("pending", 0)
        )
        dead = facts.get("dead", 0)
        yield GaugeMetricFamily(
            "felab_outbox_dead", "Posts set aside after every try failed.", value=dead
        )
        if "inbox" in facts:  # a broker that can say (Redis)
            yield GaugeMetricFamily(
                "felab_ingest_inbox_waiting",
                "Messages waiting in the ingest's inbox (every machine's, one list).",
                value=facts["inbox"],
            )
            yield GaugeMetricFamily(
                "felab_ingest_inbox_oldest_seconds",
                "Seconds since the oldest waiting message was signed (as its sender says).",
                value=facts.get("inbox_oldest_s", 0.0),
            )


def serve(port: int, addr: str = "127.0.0.1", *, extra: Collector | None = None) -> None:
    """Serve this process's /metrics (with the multiprocess files when that mode is on)."""
    registry: CollectorRegistry = REGISTRY
    multiproc = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if multiproc:
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    if extra is not None:
        registry.register(extra)
    try:
        start_http_server(port, addr=addr, registry=registry)
    except OSError as exc:  # the port taken (another felab process, another program)
        raise Invalid(
            f"cannot serve metrics on {addr}:{port} ({exc.strerror or exc}): give another "
            "FELAB_METRICS_PORT (each process needs its own), or unset it"
        ) from None
