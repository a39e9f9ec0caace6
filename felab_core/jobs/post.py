"""What the bot posts when a benchmark job ends: one message (Discord markdown, under Discord's
2,000 characters) and the chart as an attachment.

Plain functions over a session, so the bot's outbox loop, `felab demo` and the tests render a
job the same way. Nothing here knows Discord.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.engine.results import short_model

#: Discord refuses a message longer than this.
MAX_MESSAGE = 2000

_COLUMNS = ("users", "ok", "failed", "writing tok/s", "TTFT p50 ms", "TTFT p95 ms", "E2E p50 s")


@dataclass(frozen=True)
class ResultPost:
    """One finished job as the bot posts it."""

    job_id: int
    status: str
    text: str
    chart_png: bytes | None
    chart_name: str
    rows: list[dict[str, str]]  # the results CSV rows the worker measured (empty unless done)


def _num(row: dict[str, str], key: str, scale: float = 1.0, digits: int = 1) -> str:
    value = row.get(key) or ""
    try:
        return f"{float(value) * scale:,.{digits}f}"
    except ValueError:
        return "-"


def result_table(rows: list[dict[str, str]]) -> str:
    """The runs of a job as a fixed-width table (a code block keeps it aligned in chat)."""
    body = [
        (
            row.get("concurrency") or "-",
            row.get("ok") or "-",
            row.get("failed") or "-",
            _num(row, "writing_tps_p50"),
            _num(row, "ttft_p50_s", 1000),
            _num(row, "ttft_p95_s", 1000),
            _num(row, "e2e_p50_s", 1.0, 2),
        )
        for row in rows
    ]
    widths = [max(len(c), *(len(r[i]) for r in body)) for i, c in enumerate(_COLUMNS)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(_COLUMNS, widths, strict=True))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in body]
    return "\n".join(lines)


def result_post(session: Session, job: m.BenchJob) -> ResultPost:
    """The message for a finished job: who and where, the table or the reason it did not run."""
    worker = session.get(m.Worker, job.worker_id) if job.worker_id is not None else None
    where = f" on {worker.name}" if worker else ""
    what = job.target or job.server
    head = f"**Benchmark {job.id}**{where}: `{what}`, preset `{job.preset}`"
    results = session.scalars(
        select(m.BenchResult).where(m.BenchResult.job_id == job.id).order_by(m.BenchResult.id)
    ).all()
    rows = [dict(r.row or {}) for r in results]
    if job.status == "done" and rows:
        first = rows[0]
        server = first.get("server") or what
        version = first.get("server_version") or ""
        model = short_model(first.get("model")) if first.get("model") else "model unknown"
        host = first.get("host") or "?"
        lines = [
            f"{head}: done",
            f"{server} {version}".strip() + f" serving `{model}` on {host}",
            "```",
            result_table(rows),
            "```",
            "writing = 1/TPOT, what one user sees once the reply has started; p50 unless noted",
        ]
    else:
        reason = job.error or "no reason recorded"
        lines = [f"{head}: {job.status}", reason]
    text = "\n".join(lines)
    if len(text) > MAX_MESSAGE:
        text = text[: MAX_MESSAGE - 1] + "…"
    return ResultPost(
        job_id=job.id,
        status=job.status,
        text=text,
        chart_png=job.chart_png if job.status == "done" else None,
        chart_name=f"job-{job.id}-{what}.png",
        rows=rows if job.status == "done" else [],
    )
