"""What travels through the broker: jobs to a worker, signed events back to the ingest.

Both are plain JSON dictionaries (Celery's json serializer), built and read only here, so the
worker's task bodies stay a decode and a call.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from felab_core.errors import Invalid

#: The most machines one run may be spread over.
MAX_SHARDS = 16

EVENT_KINDS = ("heartbeat", "started", "progress", "result", "failed", "lost", "stopped")


@dataclass(frozen=True)
class JobMessage:
    """A job as the worker sees it: a target *name* from its own targets file, never a URL."""

    job_id: int
    attempt: str
    worker_id: int
    target: str
    preset: str
    params: dict[str, int] = field(default_factory=dict)
    sent_at: float = 0.0  # wall clock at send, for the enqueue-to-start figure
    # One slice of a run spread over several machines (jobs/spread.py): slice `shard` of
    # `shards`, all sending from `start_at`, in seconds on the broker's clock.
    shard: int = 0
    shards: int = 1
    start_at: float = 0.0

    def __post_init__(self) -> None:
        if not 1 <= self.shards <= MAX_SHARDS or not 0 <= self.shard < self.shards:
            raise Invalid(f"slice {self.shard} of {self.shards} is not a slice of a run")
        if self.shards > 1 and not math.isfinite(self.start_at):
            raise Invalid("a spread job needs the start its slices share")

    @property
    def spread(self) -> bool:
        return self.shards > 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobMessage:
        try:
            return cls(
                job_id=int(data["job_id"]),
                attempt=str(data["attempt"]),
                worker_id=int(data["worker_id"]),
                target=str(data["target"]),
                preset=str(data["preset"]),
                params={str(k): int(v) for k, v in dict(data.get("params") or {}).items()},
                sent_at=float(data.get("sent_at") or 0.0),
                shard=int(data.get("shard") or 0),
                shards=int(data.get("shards") or 1),
                start_at=float(data.get("start_at") or 0.0),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise Invalid(f"not a felab job message ({exc}); it was dropped") from None


def event(
    worker_id: int,
    kind: str,
    *,
    job_id: int | None = None,
    attempt: str | None = None,
    body: dict[str, Any] | None = None,
    at: float | None = None,
) -> dict[str, Any]:
    """An unsigned event; the worker signs it with its identity (and the time) before sending."""
    if kind not in EVENT_KINDS:
        raise Invalid(f"unknown event kind {kind!r}")
    return {
        "worker_id": worker_id,
        "kind": kind,
        "job_id": job_id,
        "attempt": attempt,
        "at": time.time() if at is None else at,
        "body": body or {},
    }
