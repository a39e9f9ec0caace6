"""The one way a finished job is shown: the post's text, its chart and its CSV.

The bot's outbox posts exactly this, and `felab demo` prints exactly this, so "as the bot would
post it" is true by construction. Discord markdown, at most 2,000 characters, a table narrow
enough for a phone (40 columns). Nothing here knows Discord.

Text a machine sent (its model name, a failure reason) is shown inside code spans or as plain
text; the bot sends every message with mentions disabled except the owner's, so none of it can
ping anyone.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from felab_core.chart_text import words_as_written
from felab_core.db import models as m
from felab_core.engine.results import short_model
from felab_core.text import in_code, literal

#: Discord refuses a message longer than this.
MAX_MESSAGE = 2000
#: The widest a table line may be and still read on a phone.
TABLE_WIDTH = 40
_HEAD = ("users", "ok", "tok/s", "TTFT p50", "E2E p50")
_EXPLAIN = "tok/s = writing speed (1/TPOT, p50): what one user sees once the reply has started"


@dataclass(frozen=True)
class RenderedJob:
    """A finished job as it is posted."""

    job_id: int
    status: str
    text: str
    chart_png: bytes | None
    chart_name: str
    csv: str | None
    csv_name: str
    rows: list[dict[str, str]] = field(default_factory=list)


def fit(text: str, limit: int = MAX_MESSAGE) -> str:
    """`text` cut to `limit` characters, with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def code(text: str) -> str:
    """Text from a machine as an inline code span: no markdown, no mention, one line."""
    clean = " ".join(in_code(str(text)).split())[:120]
    return f"`{clean}`" if clean else "`?`"


def mention_of(member: m.Member) -> str:
    """How a post names the machine's owner: a Discord mention, or their name outside Discord."""
    if member.discord_id.isdigit():
        return f"<@{member.discord_id}>"
    return literal(member.display_name) if member.display_name else "you"


def _num(row: dict[str, str], key: str, scale: float = 1.0) -> float | None:
    try:
        return float(row.get(key) or "") * scale
    except ValueError:
        return None


def result_table(rows: list[dict[str, str]]) -> str:
    """The runs of a job, one line each, at most TABLE_WIDTH wide (in a code block in chat)."""
    body = []
    for row in rows:
        tps = _num(row, "writing_tps_p50")
        ttft = _num(row, "ttft_p50_s", 1000)
        e2e = _num(row, "e2e_p50_s")
        ok, failed = row.get("ok") or "-", row.get("failed") or "0"
        total = ok
        if ok.isdigit() and failed.isdigit() and failed != "0":
            total = f"{ok}/{int(ok) + int(failed)}"
        body.append(
            (
                row.get("concurrency") or "-",
                total,
                "-" if tps is None else f"{tps:,.1f}",
                "-" if ttft is None else f"{ttft:,.0f} ms",
                "-" if e2e is None else f"{e2e:.2f} s",
            )
        )
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(_HEAD)]
    lines = [" ".join(c.rjust(w) for c, w in zip(_HEAD, widths, strict=True))]
    lines += [" ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in body]
    return "\n".join(line[:TABLE_WIDTH] for line in lines)


def rows_csv(rows: list[dict[str, str]]) -> str:
    """The measured rows as one CSV file (the results CSV's columns)."""
    names: list[str] = []
    for row in rows:
        names.extend(k for k in row if k not in names)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=names, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


#: What one chart draws: a sweep's runs (felab bench runs at most 64), each at most this many
#: points, a legend only while it can be read. A machine's record of 14,000 runs had held the
#: trusted ingest ~2 minutes at ~680 MB inside its database transaction.
CHART_RUNS = 64
CHART_POINTS = 2_000
CHART_LEGEND = 12


def chart_png(record: dict[str, Any] | None, title: str) -> bytes | None:
    """Each request's writing speed, one line per concurrency, from a job's record (drawn on
    the trusted side: a worker sends figures, never pictures)."""
    with words_as_written():  # a machine's model name `$\frac{x$` is text, not a crash
        return _chart_png(record, title)


def _chart_png(record: dict[str, Any] | None, title: str) -> bytes | None:
    runs = [r for r in (record or {}).get("runs") or [] if isinstance(r, dict)]
    series = []
    for run in runs[:CHART_RUNS]:
        requests = run.get("requests")
        speeds = [
            float(q["writing_tps"])
            for q in (requests if isinstance(requests, list) else [])
            if isinstance(q, dict)
            and q.get("ok")
            and type(q.get("writing_tps")) in (int, float)
            and math.isfinite(q["writing_tps"])
        ]
        users = run.get("concurrency")
        if speeds and type(users) is int:
            step = -(-len(speeds) // CHART_POINTS)  # every step-th request: the line's shape
            series.append((users, speeds[::step], step))
    if not series:
        return None
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3), dpi=80)
    for concurrency, speeds, step in series:
        ax.plot(
            range(1, step * len(speeds) + 1, step),
            speeds,
            marker="o" if len(speeds) <= 200 else None,
            label=f"{concurrency} users",
        )
    ax.set_xlabel("request")
    ax.set_ylabel("writing speed (tokens/s)")
    ax.set_title(title[:60])
    if len(series) <= CHART_LEGEND:
        ax.legend(loc="lower right")
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def _cache_lines(rows: list[dict[str, str]]) -> list[str]:
    """The prefix cache beside TTFT, when the server reported it (multi-turn, trace replay)."""
    lines = []
    for row in rows:
        users = row.get("concurrency") or "-"
        share = _num(row, "cached_share", 100)
        turns = [t for t in (row.get("ttft_p50_by_turn_ms") or "").split("/") if t.isdigit()]
        parts = []
        if share is not None:
            parts.append(f"{share:.0f}% of prompt tokens came from the prefix cache")
        if turns:
            parts.append("TTFT p50 by turn " + " → ".join(turns) + " ms")
        if parts:
            lines.append(f"{users} users: " + "; ".join(parts))
    return lines


def _verdicts(session: Session, job: m.BenchJob) -> list[str]:
    numbers = session.scalars(
        select(m.Number).where(m.Number.job_id == job.id, m.Number.verdict != "ok")
    ).all()
    notes = []
    for n in numbers:
        if n.verdict == "flagged":
            notes.append(
                f"Flagged, off the leaderboard until an instructor approves it: {n.verdict_note}"
            )
        elif n.verdict == "unverified":
            notes.append(f"Unverified, listed apart from the leaderboard: {n.verdict_note}")
    return notes


def clock_line(record: dict[str, Any] | None) -> str | None:
    """How far each machine's clock was from the broker's, as measured before its slice."""
    spread = (record or {}).get("spread")
    if not isinstance(spread, dict):
        return None
    parts = []
    for machine in spread.get("machines") or []:
        clock = machine.get("clock") if isinstance(machine, dict) else None
        if not isinstance(clock, dict):
            continue
        try:
            offset = float(clock["offset_s"]) * 1e3
            rtt = float(clock["rtt_s"]) * 1e3
        except (KeyError, TypeError, ValueError):
            continue
        parts.append(f"{machine.get('worker')} {offset:+.1f} ms (±{rtt / 2:.1f})")
    if not parts:
        return None
    return "Clocks against the broker's: " + ", ".join(parts)


def _machines(session: Session, job: m.BenchJob) -> str:
    """Where a job ran: its machine, or the machines its slices ran on."""
    if job.shards > 1 and job.spread_of is None:
        names = session.scalars(
            select(m.Worker.name)
            .join(m.BenchJob, m.BenchJob.worker_id == m.Worker.id)
            .where(m.BenchJob.spread_of == job.id)
            .order_by(m.BenchJob.shard_index)
        ).all()
        return f" spread over {job.shards} machines ({', '.join(literal(n) for n in names)})"
    worker = session.get(m.Worker, job.worker_id) if job.worker_id is not None else None
    return f" on {worker.name}" if worker else ""


def render_job(session: Session, job: m.BenchJob) -> RenderedJob:
    """The post for a finished job: whose and where, the table, or why it did not run."""
    owner = session.get(m.Member, job.member_id)
    who = mention_of(owner) if owner is not None else ""
    where = _machines(session, job)
    what = job.target or job.server
    head = f"{who} **Benchmark {job.id}**{where}: `{what}`, preset `{job.preset}`".strip()
    results = session.scalars(
        select(m.BenchResult)
        .where(m.BenchResult.job_id == job.id)
        .order_by(m.BenchResult.concurrency, m.BenchResult.id)
    ).all()
    rows = [dict(r.row or {}) for r in results]
    done = job.status == "done" and bool(rows)
    if done:
        first = rows[0]
        server = " ".join(x for x in (first.get("server"), first.get("server_version")) if x)
        model = short_model(first.get("model")) if first.get("model") else "model unknown"
        lines = [
            f"{head}: done",
            f"{code(server or what)} serving {code(model)}",
            "```",
            result_table(rows),
            "```",
            _EXPLAIN,
            *_cache_lines(rows),
            *_verdicts(session, job),
            *([f"{literal(job.error)}: these figures are not the whole run"] if job.error else []),
            *filter(None, [clock_line(job.record)]),
        ]
    else:
        # a failure may be a machine's words: shown as they read, never as Discord markdown
        lines = [f"{head}: {job.status}", literal(job.error) if job.error else "no reason recorded"]
    return RenderedJob(
        job_id=job.id,
        status=job.status,
        text=fit("\n".join(lines)),
        chart_png=job.chart_png if done else None,
        chart_name=f"felab-job{job.id}.png",
        csv=rows_csv(rows) if done else None,
        csv_name=f"felab-job{job.id}.csv",
        rows=rows if done else [],
    )
