"""Whether a measured writing speed may be ranked: checked against physics and against the
result's own request records before any leaderboard shows it.

- Above the speed limit of the member's machine for that model (memory bandwidth divided by
  the bytes read per token): impossible, so "flagged", off the boards until an instructor
  approves it.
- Not what the result's own per-request figures give (their median writing speed, their count
  of successful requests): a doctored row, "flagged" too.
- The member's chip or the model's size unknown: "unverified", listed apart, unranked, with
  what to set to have it checked.
- Otherwise "ok". An instructor's approval makes a flagged figure "approved".
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.errors import Forbidden, Invalid, NotFound
from felab_core.numbers.recording import LimitComparison, limit_verdict, speed_limit_for
from felab_core.sizing.speed_limit import check_speed

RANKED = ("ok", "approved")
#: How far a row's p50 may sit from the median of its own requests (rounding in the CSV).
RECORD_TOLERANCE = 0.01


@dataclass(frozen=True)
class Verdict:
    verdict: str  # ok | unverified | flagged
    note: str = ""


def _run_requests(
    record: Mapping[str, Any] | None, concurrency: int
) -> list[dict[str, Any]] | None:
    if not isinstance(record, Mapping):
        return None
    for run in record.get("runs") or []:
        if isinstance(run, dict) and run.get("concurrency") == concurrency:
            reqs = run.get("requests")
            return [r for r in reqs if isinstance(r, dict)] if isinstance(reqs, list) else None
    return None


def against_record(
    tps: float, ok: int | None, record: Mapping[str, Any] | None, concurrency: int
) -> str:
    """What is wrong with a row's figures given the run's own request records ("" if nothing)."""
    requests = _run_requests(record, concurrency)
    if requests is None:
        return "the result carries no request records to check the figure against"
    good = [r for r in requests if r.get("ok") is True]
    if ok is not None and ok != len(good):
        return f"the row says {ok} requests succeeded, its records show {len(good)}"
    speeds = [
        float(r["writing_tps"])
        for r in good
        if isinstance(r.get("writing_tps"), int | float) and r["writing_tps"] > 0
    ]
    if not speeds:
        return "no request record has a writing speed"
    median = statistics.median(speeds)
    if abs(median - tps) > RECORD_TOLERANCE * max(median, tps):
        return (
            f"the row says {_speed(tps)} tokens/s, its own requests give {_speed(median)} "
            "(median): "
            "the figures do not agree"
        )
    for r in good:
        tokens, tpot = r.get("output_tokens"), r.get("tpot_s")
        e2e, ttft = r.get("e2e_s"), r.get("ttft_s")
        if not all(isinstance(v, int | float) for v in (tokens, tpot, e2e, ttft)):
            continue
        assert isinstance(tokens, int | float) and isinstance(tpot, int | float)
        assert isinstance(e2e, int | float) and isinstance(ttft, int | float)
        decode = e2e - ttft
        # n tokens after the first cannot be written faster than the time the stream took.
        if tokens > 1 and tpot > 0 and (tokens - 1) * tpot > decode * 1.05 + 0.005:
            return (
                f"request {r.get('index')} claims {tokens} tokens at {tpot * 1000:.2f} ms each "
                f"in a {decode * 1000:.0f} ms stream: impossible"
            )
    return ""


def judge(
    session: Session,
    member: m.Member,
    server: str,
    tps: float,
    *,
    ok: int | None = None,
    record: Mapping[str, Any] | None = None,
    concurrency: int = 1,
    model: str | None = None,
) -> Verdict:
    """The verdict on one measured writing speed of `member` on `server`. `record` None: a row
    imported from the member's own results file, checked against the speed limit only."""
    if record is not None:
        wrong = against_record(tps, ok, record, concurrency)
        if wrong:
            return Verdict("flagged", wrong)
    return _against(speed_limit_for(session, member, server, model), tps)


def _against(limit: Any, tps: float) -> Verdict:
    """A speed against the member's limit (a reason in words when none is known)."""
    if isinstance(limit, str):
        comparison = LimitComparison(None, limit)
    else:
        comparison = LimitComparison(check_speed(Fraction(repr(tps)), limit))
    return Verdict(*limit_verdict(comparison))


def judge_imports(session: Session, member: m.Member) -> Callable[[str, str, float], Verdict]:
    """`judge` for the many rows of one imported file: each server and model's limit looked up
    once."""
    limits: dict[tuple[str, str], Any] = {}

    def one(server: str, model: str, tps: float) -> Verdict:
        if (server, model) not in limits:
            limits[server, model] = speed_limit_for(session, member, server, model)
        return _against(limits[server, model], tps)

    return one


#: How speed_limit_for's words for a missing chip or model size begin: a measured speed
#: judged then waits, "unverified", for them.
_WAITING_FOR_LIMIT = "felab does not know "


def rejudge_waiting(session: Session, member: m.Member) -> list[m.Number]:
    """Judge again each speed of `member` (measured or typed) that waited for the speed limit
    (call it once their chip or a model's size is set): it becomes "ok" (ranked) or "flagged",
    or keeps waiting with what is still missing. A spread run short of a slice stays
    unverified: its job holds why. The numbers whose verdict changed are returned.
    """
    waiting = session.scalars(
        select(m.Number).where(
            m.Number.member_id == member.id,
            m.Number.source.in_(("measured", "entered")),  # a typed one waits too (B6)
            m.Number.verdict == "unverified",
        )
    ).all()
    limits: dict[tuple[str, str], Any] = {}
    changed = []
    for number in waiting:
        if not (number.verdict_note or "").startswith(_WAITING_FOR_LIMIT):
            continue
        job = session.get(m.BenchJob, number.job_id) if number.job_id is not None else None
        if job is not None and job.error:  # partial: unverified whatever the limit says
            continue
        key = (number.server, number.model or "")
        if key not in limits:
            limits[key] = speed_limit_for(session, member, *key)
        verdict = _against(limits[key], number.value)
        if verdict.verdict != number.verdict:
            changed.append(number)
        number.verdict, number.verdict_note = verdict.verdict, verdict.note or None  # what is
        # missing now (the model's size, once the chip is known)
    session.flush()
    return changed


def rejudged_text(numbers: list[m.Number]) -> str:
    """What judging again did, in one line for a terminal or a chat reply."""
    ok = sum(n.verdict == "ok" for n in numbers)
    flagged = len(numbers) - ok
    parts = [f"{ok} ok (ranked)"] if ok else []
    if flagged:
        parts.append(f"{flagged} above the speed limit (flagged: an instructor reviews it)")
    figures = "figure" if len(numbers) == 1 else "figures"
    return (
        f"{len(numbers)} {figures} that waited for the speed limit checked now: "
        + ", ".join(parts)
        + "."
    )


def approve(session: Session, instructor: m.Member, number_id: int) -> m.Number:
    """An instructor vouches for a flagged figure (a server faster than physics says, really)."""
    number = session.get(m.Number, number_id)
    if number is None:
        raise NotFound(f"no number {number_id}")
    owner = session.get(m.Member, number.member_id)
    if instructor.role != "instructor" or owner is None or owner.cohort_id != instructor.cohort_id:
        raise Forbidden("only an instructor of the member's cohort can approve a figure")
    if number.verdict != "flagged":
        raise Invalid(f"number {number_id} is {number.verdict}, not flagged: nothing to approve")
    number.verdict = "approved"
    number.verdict_note = f"approved by {instructor.display_name or instructor.discord_id}: " + (
        number.verdict_note or ""
    )
    session.flush()
    return number


def _speed(tps: float) -> str:
    """A speed as a note shows it: 301 digits of a forged 1e300 are '1e+300' (b B5)."""
    return f"{tps:,.1f}" if abs(tps) < 1e7 else f"{tps:.3g}"
