"""A result body as felab_core.jobs.run sends it for a job: a row per concurrency with every
column felab writes, and the record beside them (the job's workload, each run's requests and
length), so a test changes only what it means to (a figure, a model, a forged field)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from felab_core.engine.workloads import Workload
from felab_core.jobs.result_load import expected_workload
from felab_core.jobs.workload import ASKED, job_workload
from tests.db_support import NOW

#: When a test's result reaches the ingest: minutes after its job was made at NOW (a run's
#: length fits in the time the server saw pass, with no clock slack; sweep 22, b, B13).
ARRIVED = NOW + timedelta(minutes=10)

#: One answered request as a job's record keeps it (40 tok/s, 32 tokens).
REQUEST = {"ok": True, "ttft_s": 0.1, "e2e_s": 0.9, "tpot_s": 0.025, "writing_tps": 40.0,
           "output_tokens": 32, "first_chunk_tokens": 1}  # fmt: skip


def _count(w: Workload) -> int:
    return w.sessions * w.turns if w.sessions is not None else w.requests or 1


def job_row(
    preset: str = "quick",
    params: dict[str, int] | None = None,
    *,
    at: datetime | None = None,
    users: int | None = None,
    target: str = "mlx",
    **cells: str,
) -> dict[str, str]:
    """The row a worker writes for a job's run at `users` (the first concurrency asked)."""
    w = job_workload(preset, dict(params or {}), ASKED)
    n = _count(w)
    lasted = n * 0.9 + 1
    row = {
        "timestamp": (at or datetime.now(UTC)).isoformat(),
        "host": "",
        "target": target,
        "server": "mlx",
        "server_version": "",
        "model": "m",
        "api": "openai-chat",
        "preset": w.preset or "",
        "concurrency": str(users if users is not None else w.concurrency[0]),
        "rate": "",
        "burstiness": "",
        "requests": str(n),
        "ok": str(n),
        "failed": "0",
        "prompt_tokens": "" if w.prompt_tokens is None else str(w.prompt_tokens),
        "shared_prefix_tokens": str(w.shared_prefix_tokens),
        "max_tokens": str(w.max_tokens),
        "warmup": str(w.warmup),
        "seed": str(w.seed),
        "ttft_p50_s": "0.1",
        "e2e_p50_s": "0.9",
        "writing_tps_p50": "40",
        "request_tps": f"{n / lasted:.6g}",
    }
    return {**row, **cells}


def job_record(
    preset: str = "quick", params: dict[str, int] | None = None, **request: Any
) -> dict[str, Any]:
    """The record beside the rows: the job's workload, a run per concurrency of its requests."""
    w = job_workload(preset, dict(params or {}), ASKED)
    n = _count(w)
    runs = [
        {
            "concurrency": c,
            "summary": {"duration_s": n * 0.9 + 1},
            "requests": [{"index": i, **REQUEST, **request} for i in range(n)],
        }
        for c in w.concurrency
    ]
    return {"server": None, "workload": expected_workload(w), "runs": runs}


def job_body(
    preset: str = "quick",
    params: dict[str, int] | None = None,
    *,
    at: datetime | None = None,
    **cells: str,
) -> dict[str, Any]:
    """What a worker sends for the job: its rows and its record."""
    w = job_workload(preset, dict(params or {}), ASKED)
    rows = [job_row(preset, params, at=at, users=c, **cells) for c in w.concurrency]
    return {"rows": rows, "record": job_record(preset, params)}
