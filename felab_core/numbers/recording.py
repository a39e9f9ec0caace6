"""Recording a member's figures: typed ones set beside their machine's speed limit, measured
ones from a felab job, each judged before it can rank.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from sqlalchemy import select
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.db.types import utcnow
from felab_core.engine.server_kinds import validate_server
from felab_core.errors import Invalid, NotFound
from felab_core.numbers.row_checks import check_result_row
from felab_core.numbers.speeds import TPS_UNIT, Speed, parse_speed
from felab_core.people.members import bandwidth_bytes_per_s
from felab_core.sizing.errors import SizingError
from felab_core.sizing.speed_limit import (
    Ceiling,
    SpeedCheck,
    bytes_per_token,
    ceiling,
    check_speed,
    find_chip,
)
from felab_core.sizing.units import decimal_size_text


@dataclass(frozen=True)
class LimitComparison:
    """A speed set against the member's machine, or the reason it cannot be."""

    check: SpeedCheck | None
    missing: str = ""

    @property
    def explanation(self) -> str:
        return self.check.explanation if self.check is not None else self.missing


def _model_key(name: str) -> str:
    """A model's name as servers differ in writing it: no case, no folder (llama-server says
    /models/x.gguf, MLX org/x), no ":latest" (Ollama's default tag)."""
    key = name.strip().lower().rstrip("/").rsplit("/", 1)[-1]
    return key.removesuffix(":latest")


def same_model(reported: str, recorded: m.MemberServer) -> bool:
    """Whether a run's model is the one whose file size the member recorded for that server
    (its name or its label)."""
    key = _model_key(reported)
    return any(
        key == _model_key(name) for name in (recorded.model, recorded.model_label or "") if name
    )


def speed_limit_for(
    session: Session, member: m.Member, server: str, model: str | None = None
) -> Ceiling | str:
    """The ceiling for one server on the member's machine, or what is missing to compute it.

    `model`: the model a run reported; a run of another model than the one whose size is
    recorded for that server waits for that model's size (its limit is not the recorded one's).
    """
    server = validate_server(server)
    bandwidth = bandwidth_bytes_per_s(member)
    if bandwidth is None:
        return (
            "felab does not know your machine yet: set your chip (such as M4 Pro) or its memory "
            "bandwidth to see the speed limit"
        )
    row = session.scalar(
        select(m.MemberServer).where(
            m.MemberServer.member_id == member.id, m.MemberServer.server == server
        )
    )
    if row is None or not row.model_bytes:
        return (
            f"felab does not know the size of the model file {server} runs: record it (such as "
            "4.9GB) to see the speed limit"
        )
    if model and model.strip() and not same_model(model, row):
        return (
            f"felab does not know the size of the model file {model.strip()[:80]} on {server} "
            f"(the size recorded is {row.model}'s): record this model and its size (such as "
            "4.9GB) to see its speed limit"
        )
    chip = find_chip(member.chip) if member.chip else None
    try:
        reads = bytes_per_token(
            row.model_bytes,
            weights_note=f"{row.model}, a {decimal_size_text(row.model_bytes)} file",
        )
        return ceiling(bandwidth, reads, chip)
    except SizingError as exc:
        return str(exc)


def compare_with_limit(
    session: Session, member: m.Member, server: str, tokens_per_s: float
) -> LimitComparison:
    limit = speed_limit_for(session, member, server)
    if isinstance(limit, str):
        return LimitComparison(None, limit)
    return LimitComparison(check_speed(Fraction(repr(tokens_per_s)), limit))


def limit_verdict(comparison: LimitComparison) -> tuple[str, str]:
    """The one verdict on a speed set against the member's limit, typed or measured: "ok"
    (ranked) only when a limit was computed and the speed is within it; "flagged" above it;
    "unverified" (kept off the boards, listed with what is missing) when no limit can be
    computed (no machine, no model size, another model): sweep 22 B6, a typed 9,000 tok/s with
    no machine set had been stored "ok" and ranked first."""
    if comparison.check is None:
        return "unverified", comparison.missing
    if comparison.check.impossible:
        return "flagged", comparison.check.explanation
    return "ok", ""


# ----------------------------------------------------------------------------- recording


@dataclass(frozen=True)
class Recorded:
    number: m.Number
    comparison: LimitComparison
    note: str = ""
    unchanged: bool = False  # the same figure as the latest typed in: nothing new was stored


def _same_typing(latest: m.Number, speed: Speed) -> bool:
    """Whether a figure is the one typed last time: the same number (22.40 is 22.4) in the
    same unit; for a figure stored before felab kept the typing, the same text it was shown
    back as."""
    if latest.typed_value:
        try:
            same = Decimal(latest.typed_value) == Decimal(speed.typed_value)
        except InvalidOperation:
            same = latest.typed_value == speed.typed_value
        return same and (latest.typed_unit or TPS_UNIT) == speed.typed_unit
    return speed.typed_unit == TPS_UNIT and f"{latest.value:g}" == speed.typed_value


def record_entered(
    session: Session,
    member: m.Member,
    server: str,
    value: str | float | int,
    *,
    unit: str | None = None,
    field_key: str | None = None,
    skip_unchanged: bool = False,
    now: datetime | None = None,
) -> Recorded:
    """Store a writing speed the member typed, checked, and compared with the speed limit.

    Kept as typed (the number and its unit) beside its value in tokens per second, so it is
    shown back exactly as typed and never drifts through a conversion. `skip_unchanged`: a
    form sent again with the figure it showed stores nothing (`Recorded.unchanged`)."""
    server = validate_server(server)
    metric = "writing_tps"
    if field_key is not None:
        fld = session.scalar(select(m.NumberField).where(m.NumberField.key == field_key))
        if fld is None:
            raise NotFound(f"no numbers field {field_key!r} in the loaded content")
        if fld.server != server:
            raise Invalid(f"field {field_key!r} asks for {fld.server}, not {server}")
        metric = fld.metric
    if metric != "writing_tps":
        raise Invalid(f"only writing speeds can be typed in so far (field asks for {metric})")
    speed = parse_speed(value, unit)
    if skip_unchanged:
        latest = latest_number(session, member, server, metric, "entered")
        if latest is not None and _same_typing(latest, speed):
            return Recorded(
                latest,
                compare_with_limit(session, member, server, latest.value),
                speed.note,
                unchanged=True,
            )
    model = session.scalar(
        select(m.MemberServer.model).where(
            m.MemberServer.member_id == member.id, m.MemberServer.server == server
        )
    )
    number = m.Number(
        member_id=member.id,
        server=server,
        metric=metric,
        value=speed.tokens_per_s,
        unit="tokens/s",
        typed_value=speed.typed_value,
        typed_unit=speed.typed_unit,
        source="entered",
        model=model,
        field_key=field_key,
        recorded_at=now or utcnow(),
    )
    comparison = compare_with_limit(session, member, server, speed.tokens_per_s)
    # Said on screen, stored so too: a flagged or unverified figure ranked first otherwise.
    verdict, note = limit_verdict(comparison)
    number.verdict, number.verdict_note = verdict, note or None
    session.add(number)
    session.flush()
    return Recorded(number, comparison, speed.note)


def create_job(
    session: Session,
    member: m.Member,
    server: str,
    preset: str,
    *,
    worker: m.Worker | None = None,
    now: datetime | None = None,
) -> m.BenchJob:
    """A queued benchmark job (the worker fleet sends it and ingests its result)."""
    job = m.BenchJob(
        member_id=member.id,
        worker_id=worker.id if worker is not None else None,
        server=validate_server(server),
        preset=preset,
        status="queued",
        created_at=now or utcnow(),
    )
    session.add(job)
    session.flush()
    return job


def record_measured(
    session: Session,
    job: m.BenchJob,
    row: Mapping[str, str],
    *,
    verdict: tuple[str, str] = ("ok", ""),
    now: datetime | None = None,
) -> m.BenchResult:
    """Store one run of a job (a row with the results CSV's columns) and its measured speed,
    with the verdict on it (felab_core.numbers.verdict: "ok", "unverified" or "flagged").

    Only a trusted ingest calls this: the worker fleet, for a job assigned to the worker that
    sent the row, or `import_results`, for a results file the member's own terminal holds.
    """
    checked = check_result_row(row)
    server = checked.server
    if server != job.server and job.server != "openai":
        raise Invalid(f"job {job.id} asked for {job.server} but the row measured {server}")
    concurrency = checked.concurrency
    when = now or utcnow()
    result = m.BenchResult(
        job_id=job.id,
        server=server,
        model=checked.model,
        preset=checked.preset,
        concurrency=concurrency,
        writing_tps_p50=checked.writing_tps_p50,
        ttft_p50_s=checked.ttft_p50_s,
        row=dict(row),
        created_at=when,
    )
    session.add(result)
    tps = result.writing_tps_p50
    if tps is not None and checked.gives_writing_speed:
        session.add(
            m.Number(
                member_id=job.member_id,
                server=server,
                metric="writing_tps",
                value=tps,
                unit="tokens/s",
                source="measured",
                model=result.model,
                preset=result.preset,
                job_id=job.id,
                recorded_at=when,
                verdict=verdict[0],
                verdict_note=verdict[1] or None,
            )
        )
    job.status = "ready"
    job.finished_at = when
    session.flush()
    return result


# ----------------------------------------------------------------------------- the day's fields


def latest_number(
    session: Session, member: m.Member, server: str, metric: str, source: str
) -> m.Number | None:
    return session.scalar(
        select(m.Number)
        .where(
            m.Number.member_id == member.id,
            m.Number.server == server,
            m.Number.metric == metric,
            m.Number.source == source,
        )
        .order_by(m.Number.recorded_at.desc(), m.Number.id.desc())
        .limit(1)
    )
