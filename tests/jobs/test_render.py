"""A finished job as it is posted (felab_core.jobs.render), on SQLite and PostgreSQL: the one
text the bot posts and the demo prints."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.jobs.ingest import ingest_event
from felab_core.jobs.keys import Identity, new_private_key
from felab_core.jobs.messages import event
from felab_core.jobs.pairing import issue_pair_code, redeem_pair_code
from felab_core.jobs.queueing import cancel_job, queue_bench_job
from felab_core.jobs.render import (
    CHART_POINTS,
    CHART_RUNS,
    MAX_MESSAGE,
    TABLE_WIDTH,
    chart_png,
    render_job,
    result_table,
)
from tests.db_support import NOW
from tests.jobs.job_result import ARRIVED, job_record, job_row

ROW = job_row(at=NOW, server_version="0.26", model="/models/tiny", writing_tps_p50="44.61",
              ttft_p50_s="0.2104", ttft_p95_s="0.26", e2e_p50_s="1.234")  # fmt: skip


def _record(speeds: list[float], preset: str = "quick") -> dict[str, object]:
    """The job's record, its requests at `speeds` (in turn)."""
    record = job_record(preset)
    for run in record["runs"]:
        n = len(run["requests"])
        run["requests"] = [
            {"index": i, "ok": True, "writing_tps": v, "output_tokens": 8, "tpot_s": 1 / v,
             "ttft_s": 0.2, "e2e_s": 0.2 + 8 / v}
            for i, v in ((i, speeds[i % len(speeds)]) for i in range(n))
        ]  # fmt: skip
        run["summary"] = {"duration_s": sum(r["e2e_s"] for r in run["requests"]) + 1}
    return record


def _job(db: Session, member: m.Member, preset: str = "quick") -> tuple[Identity, m.BenchJob]:
    code = issue_pair_code(db, member, "studio", now=NOW)
    key = new_private_key()
    w = redeem_pair_code(db, code, Identity(0, "studio", key).public_key, now=NOW)
    job = queue_bench_job(db, member, w, "mlx", preset, now=NOW).job
    return Identity(w.id, "studio", key), job


def _result(ident: Identity, job: m.BenchJob, body: dict[str, object]) -> dict[str, object]:
    ev = event(
        ident.worker_id, "result", job_id=job.id, attempt=job.attempt, body=body, at=NOW.timestamp()
    )
    return ident.sign(ev)


def test_a_done_job_posts_its_table_chart_and_csv(db: Session, student: m.Member) -> None:
    ident, job = _job(db, student)
    body = {"rows": [ROW], "record": _record([44.0, 44.61, 45.0])}
    assert ingest_event(db, _result(ident, job, body), now=ARRIVED).accepted
    post = render_job(db, job)
    assert post.status == "done"
    assert post.chart_png is not None and post.chart_png.startswith(b"\x89PNG")  # drawn here
    assert post.chart_name == f"felab-job{job.id}.png" and post.csv_name == f"felab-job{job.id}.csv"
    assert post.rows == [{**ROW, "host": "studio"}]  # the machine's name, never its host's
    assert post.csv is not None and ",studio,mlx,mlx,0.26," in post.csv.splitlines()[1]
    lines = post.text.splitlines()
    assert (
        lines[0]
        == f"<@{student.discord_id}> **Benchmark {job.id}** on studio: `mlx`, preset `quick`: done"
    )
    assert lines[1] == "`mlx 0.26` serving `tiny`"
    table = post.text.split("```")[1].strip().splitlines()
    assert table[0].split() == ["users", "ok", "tok/s", "TTFT", "p50", "E2E", "p50"]
    assert table[1].split() == ["1", "3", "44.6", "210", "ms", "1.23", "s"]
    assert all(len(line) <= TABLE_WIDTH for line in table)
    assert len(post.text) <= MAX_MESSAGE


def test_machine_text_cannot_break_out_of_its_code_span(db: Session, student: m.Member) -> None:
    ident, job = _job(db, student)
    broken = {**ROW, "model": "`@everyone`\n**x**"}  # a line break: refused, said why
    refused = ingest_event(
        db, _result(ident, job, {"rows": [broken], "record": _record([1.0])}), now=ARRIVED
    )
    assert not refused.accepted and "control characters" in refused.reason
    assert job.status == "failed" and "control characters" in (job.error or "")
    ident, job = _job(db, student)
    row = {**ROW, "model": "`@everyone` <@&1> **x** " + "y" * 250}
    body = {"rows": [row], "record": _record([44.61])}
    assert ingest_event(db, _result(ident, job, body), now=ARRIVED).accepted
    second = render_job(db, job).text.splitlines()[1]
    assert second.count("`") == 4 and len(second) < 300


def test_a_job_that_did_not_run_posts_the_reason(db: Session, student: m.Member) -> None:
    _, job = _job(db, student)
    cancel_job(db, student, job.id, now=NOW)
    post = render_job(db, job)
    assert post.status == "cancelled" and post.chart_png is None and post.rows == []
    assert post.csv is None
    assert post.text.splitlines()[1] == "cancelled on request"


def test_failures_show_as_ok_of_total() -> None:
    table = result_table([{**ROW, "ok": "7", "failed": "1"}, {**ROW, "concurrency": "64"}])
    lines = table.splitlines()
    assert lines[1].split()[:2] == ["1", "7/8"] and lines[2].split()[0] == "64"


def test_the_same_job_renders_the_same_bytes(db: Session, student: m.Member) -> None:
    """What lets the demo promise "byte for byte what the bot posts": no clock, no randomness."""
    ident, job = _job(db, student)
    body = {"rows": [ROW], "record": _record([40.0])}
    assert ingest_event(db, _result(ident, job, body), now=ARRIVED).accepted
    assert render_job(db, job) == render_job(db, job)


def test_a_multi_turn_job_shows_its_cache_beside_ttft(db: Session, student: m.Member) -> None:
    ident, job = _job(db, student, "chat")
    row = {**ROW, **job_row("chat", at=NOW), "cached_share": "0.7125",
           "ttft_p50_by_turn_ms": "15/17/16"}  # fmt: skip
    body = {"rows": [row], "record": _record([44.0, 45.0], "chat")}
    assert ingest_event(db, _result(ident, job, body), now=ARRIVED).accepted
    text = render_job(db, job).text
    assert (
        "4 users: 71% of prompt tokens came from the prefix cache; TTFT p50 by turn 15 → 17 → 16 ms"
        in text
    )


def test_the_chat_and_agent_presets_are_jobs_within_the_limits() -> None:
    from felab_core.jobs.workload import Limits, job_workload

    limits = Limits(concurrency=8, requests=64, max_tokens=512, per_hour=10)
    chat = job_workload("chat", {}, limits)
    assert chat.sessions == 4 and chat.turns == 5
    assert job_workload("agent", {"max_tokens": 64}, limits).tools
    import pytest

    from felab_core.errors import Invalid

    with pytest.raises(Invalid, match="sets its own number of requests"):
        job_workload("chat", {"requests": 3}, limits)
    with pytest.raises(Invalid, match="requests must be 1 to 10"):
        job_workload("chat", {}, Limits(concurrency=8, requests=10, max_tokens=512, per_hour=10))


def test_a_record_of_thousands_of_runs_draws_a_bounded_chart(monkeypatch: Any) -> None:
    """Seventeenth sweep (b) H11: a machine's record of 14,000 runs held the trusted ingest
    ~2 minutes at ~680 MB drawing 14,000 lines and a 14,000-entry legend, inside its database
    transaction. At most CHART_RUNS lines of CHART_POINTS points are drawn, a legend only
    while it can be read."""
    import matplotlib.axes

    drawn: list[int] = []
    legends: list[int] = []
    plot, legend = matplotlib.axes.Axes.plot, matplotlib.axes.Axes.legend

    def counted_plot(self: Any, xs: Any, ys: Any, *args: Any, **kwargs: Any) -> Any:
        drawn.append(len(ys))
        return plot(self, xs, ys, *args, **kwargs)

    def counted_legend(self: Any, *args: Any, **kwargs: Any) -> Any:
        legends.append(1)
        return legend(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", counted_plot)
    monkeypatch.setattr(matplotlib.axes.Axes, "legend", counted_legend)
    bomb = [{"concurrency": i, "requests": [{"ok": 1, "writing_tps": 1}]} for i in range(14_000)]
    assert chart_png({"runs": bomb}, "x")
    assert len(drawn) == CHART_RUNS and not legends
    drawn.clear()
    long = [{"concurrency": 1, "requests": [{"ok": True, "writing_tps": 40.0}] * 50_000}]
    assert chart_png({"runs": long}, "x")
    assert drawn == [CHART_POINTS] and legends == [1]


def test_a_machine_s_name_with_math_marks_is_drawn_as_text() -> None:
    """Seventeenth sweep (c) H7: `$\\frac{b$` in a name was parsed as mathtext (ValueError)."""
    record = {"runs": [{"concurrency": 1, "requests": [{"ok": True, "writing_tps": 40.0}] * 5}]}
    assert chart_png(record, "box: a$\\frac{b$")
    assert chart_png(record, "box: $" + "{" * 149 + "}" * 149 + "$")  # was a RecursionError
