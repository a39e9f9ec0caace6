"""Progress for instructors: one member in detail, or the whole cohort as a table (and CSV).

Instructors see everything, private numbers included: privacy keeps numbers off public
leaderboards, not away from the people teaching the cohort. The cohort table is built from a
handful of grouped queries, not one query per member, so it stays quick for thousands.
"""

from __future__ import annotations

import csv
import io
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, date, datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from felab_core.content.calendar import course_day, local_date, zone
from felab_core.db import models as m
from felab_core.drills.review import (
    end_of_local_day,
    live_streak,
    member_retention,
    retention_of,
    streak,
)
from felab_core.numbers.verdict import RANKED
from felab_core.people.members import get_cohort
from felab_core.text import spreadsheet_cell


@dataclass(frozen=True)
class ServerNumbers:
    server: str
    best_entered: float | None = None
    best_measured: float | None = None
    measured_preset: str | None = None
    measured_model: str | None = None
    entered_count: int = 0
    measured_count: int = 0


@dataclass(frozen=True)
class MemberProgress:
    """Everything an instructor wants to know about one member today."""

    member_id: int
    name: str
    role: str
    cohort_day: int
    day_reached: int
    cards_seen: int
    due_now: int
    due_today: int
    overdue: int
    new_waiting: int
    streak: int
    best_streak: int
    reviews: int
    retention: float | None
    spoken_answers: int
    self_rating_mean: float | None
    peer_ratings: int
    peer_rating_mean: float | None
    numbers_entered: int
    numbers_measured: int
    benchmarks_run: int
    benchmarks_failed: int
    servers: list[ServerNumbers] = field(default_factory=list)


def _start_of_local_day(now: datetime, tz_name: str) -> datetime:
    today = local_date(now, tz_name)
    return datetime(today.year, today.month, today.day, tzinfo=zone(tz_name)).astimezone(UTC)


def member_progress(session: Session, member: m.Member, now: datetime) -> MemberProgress:
    """One member's progress as of `now` (their own day for due, overdue and streak)."""
    cohort_day = course_day(member.cohort, now)
    eod = end_of_local_day(now, member.timezone)
    sod = _start_of_local_day(now, member.timezone)
    live = (
        select(m.CardState.due, m.ContentDay.number)
        .join(m.Card, m.Card.id == m.CardState.card_id)
        .join(m.ContentDay, m.ContentDay.id == m.Card.day_id)
        .where(m.CardState.member_id == member.id, m.Card.retired.is_(False))
        .subquery()
    )
    seen, due_now, due_today, overdue, reached = session.execute(
        select(
            func.count(),
            func.count().filter(live.c.due <= now),
            func.count().filter(live.c.due < eod),
            func.count().filter(live.c.due < sod),
            func.max(live.c.number),
        ).select_from(live)
    ).one()
    seen_ids = select(m.CardState.card_id).where(m.CardState.member_id == member.id)
    new_waiting = session.scalar(
        select(func.count(m.Card.id))
        .join(m.ContentDay, m.ContentDay.id == m.Card.day_id)
        .where(
            m.ContentDay.number <= cohort_day,
            m.ContentDay.retired.is_(False),
            m.Card.retired.is_(False),
            m.Card.id.not_in(seen_ids),
        )
    )
    spoken, self_mean = session.execute(
        select(func.count(m.SpokenAnswer.id), func.avg(m.SpokenAnswer.self_rating)).where(
            m.SpokenAnswer.member_id == member.id
        )
    ).one()
    peers, peer_mean = session.execute(
        select(func.count(m.PeerRating.id), func.avg(m.PeerRating.rating))
        .join(m.SpokenAnswer, m.SpokenAnswer.id == m.PeerRating.answer_id)
        .where(m.SpokenAnswer.member_id == member.id)
    ).one()
    rows = session.execute(
        select(
            m.Number.server,
            m.Number.source,
            m.Number.value,
            m.Number.preset,
            m.Number.model,
            m.Number.verdict,
        ).where(m.Number.member_id == member.id, m.Number.metric == "writing_tps")
    ).all()
    per_server: dict[str, ServerNumbers] = {}
    for server, source, value, preset, model, verdict in rows:
        s = per_server.get(server) or ServerNumbers(server)
        # Counted all; a best is one a leaderboard would rank (a flagged 9,000 tok/s, or one
        # with no speed limit behind it, is no member's best: `numbers review` lists those).
        ranked = verdict in RANKED
        if source == "measured":
            better = ranked and (s.best_measured is None or value > s.best_measured)
            s = replace(
                s,
                measured_count=s.measured_count + 1,
                best_measured=value if better else s.best_measured,
                measured_preset=preset if better else s.measured_preset,
                measured_model=model if better else s.measured_model,
            )
        else:
            better = ranked and (s.best_entered is None or value > s.best_entered)
            s = replace(
                s,
                entered_count=s.entered_count + 1,
                best_entered=value if better else s.best_entered,
            )
        per_server[server] = s
    jobs = dict(
        session.execute(
            select(m.BenchJob.status, func.count(m.BenchJob.id))
            .where(m.BenchJob.member_id == member.id)
            .group_by(m.BenchJob.status)
        ).all()
    )
    st = streak(member, now)
    return MemberProgress(
        member_id=member.id,
        name=member.display_name or member.discord_id,
        role=member.role,
        cohort_day=cohort_day,
        day_reached=int(reached or 0),
        cards_seen=int(seen),
        due_now=int(due_now),
        due_today=int(due_today),
        overdue=int(overdue),
        new_waiting=int(new_waiting or 0),
        streak=st.current,
        best_streak=st.best,
        reviews=member.reviews_total,
        retention=member_retention(member),
        spoken_answers=int(spoken),
        self_rating_mean=float(self_mean) if self_mean is not None else None,
        peer_ratings=int(peers),
        peer_rating_mean=float(peer_mean) if peer_mean is not None else None,
        numbers_entered=sum(1 for r in rows if r[1] == "entered"),
        numbers_measured=sum(1 for r in rows if r[1] == "measured"),
        # "ready": a results file imported from the terminal; "done": a job a worker ran.
        benchmarks_run=int(jobs.get("ready", 0) + jobs.get("done", 0)),
        benchmarks_failed=int(jobs.get("failed", 0) + jobs.get("expired", 0)),
        servers=[per_server[k] for k in sorted(per_server)],
    )


@dataclass(frozen=True)
class ProgressRow:
    """One member's line in the cohort table."""

    member_id: int
    discord_id: str
    name: str
    role: str
    day_reached: int
    cards_seen: int
    due_today: int
    overdue: int
    streak: int
    reviews: int
    retention: float | None
    spoken_answers: int
    peer_rating_mean: float | None
    numbers_entered: int
    numbers_measured: int
    benchmarks_run: int
    public_numbers: bool


def cohort_progress(session: Session, cohort_id: int, now: datetime) -> list[ProgressRow]:
    """The whole cohort's progress, one row per member, from grouped queries."""
    cohort = get_cohort(session, cohort_id)
    # "Today" in the cohort's zone for the table; members' own zones differ by at most a day.
    sod = _start_of_local_day(now, cohort.timezone)
    eod = sod + timedelta(days=1)
    in_cohort = select(m.Member.id).where(m.Member.cohort_id == cohort_id)
    cards = {
        mid: (seen, due, over, reached)
        for mid, seen, due, over, reached in session.execute(
            select(
                m.CardState.member_id,
                func.count(),
                func.count().filter(m.CardState.due < eod),
                func.count().filter(m.CardState.due < sod),
                func.max(m.ContentDay.number),
            )
            .join(m.Card, m.Card.id == m.CardState.card_id)
            .join(m.ContentDay, m.ContentDay.id == m.Card.day_id)
            .where(m.CardState.member_id.in_(in_cohort), m.Card.retired.is_(False))
            .group_by(m.CardState.member_id)
        )
    }
    spoken = dict(
        session.execute(
            select(m.SpokenAnswer.member_id, func.count(m.SpokenAnswer.id))
            .where(m.SpokenAnswer.member_id.in_(in_cohort))
            .group_by(m.SpokenAnswer.member_id)
        ).all()
    )
    peer: dict[int, float | None] = dict(
        session.execute(
            select(m.SpokenAnswer.member_id, func.avg(m.PeerRating.rating))
            .join(m.PeerRating, m.PeerRating.answer_id == m.SpokenAnswer.id)
            .where(m.SpokenAnswer.member_id.in_(in_cohort))
            .group_by(m.SpokenAnswer.member_id)
        ).all()
    )
    numbers: dict[tuple[int, str], int] = {
        (mid, src): n
        for mid, src, n in session.execute(
            select(m.Number.member_id, m.Number.source, func.count(m.Number.id))
            .where(m.Number.member_id.in_(in_cohort))
            .group_by(m.Number.member_id, m.Number.source)
        )
    }
    jobs = dict(
        session.execute(
            select(m.BenchJob.member_id, func.count(m.BenchJob.id))
            .where(m.BenchJob.member_id.in_(in_cohort), m.BenchJob.status.in_(("ready", "done")))
            .group_by(m.BenchJob.member_id)
        ).all()
    )
    out = []
    todays: dict[str, date] = {}
    people = session.execute(
        select(
            m.Member.id,
            m.Member.discord_id,
            m.Member.display_name,
            m.Member.role,
            m.Member.timezone,
            m.Member.streak_current,
            m.Member.last_review_day,
            m.Member.reviews_total,
            m.Member.recall_tries,
            m.Member.recalled,
            m.Member.public_numbers,
        )
        .where(m.Member.cohort_id == cohort_id)
        .order_by(m.Member.id)
    )
    for mid, did, name, role, tz, cur, last, total, tries, recalled, public in people:
        seen, due, over, reached = cards.get(mid, (0, 0, 0, 0))
        pm = peer.get(mid)
        today = todays.get(tz) or todays.setdefault(tz, local_date(now, tz))
        out.append(
            ProgressRow(
                member_id=mid,
                discord_id=did,
                name=name,
                role=role,
                day_reached=int(reached or 0),
                cards_seen=int(seen),
                due_today=int(due),
                overdue=int(over),
                streak=live_streak(cur, last, today),
                reviews=total,
                retention=retention_of(recalled, tries),
                spoken_answers=int(spoken.get(mid, 0)),
                peer_rating_mean=float(pm) if pm is not None else None,
                numbers_entered=numbers.get((mid, "entered"), 0),
                numbers_measured=numbers.get((mid, "measured"), 0),
                benchmarks_run=int(jobs.get(mid, 0)),
                public_numbers=public,
            )
        )
    return out


def progress_csv(rows: list[ProgressRow]) -> str:
    """The cohort table as CSV (the columns are ProgressRow's fields, in order)."""
    out = io.StringIO()
    names = list(ProgressRow.__dataclass_fields__)
    writer = csv.DictWriter(out, fieldnames=names, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        data = asdict(row)
        if data["retention"] is not None:
            data["retention"] = f"{data['retention']:.4f}"
        if data["peer_rating_mean"] is not None:
            data["peer_rating_mean"] = f"{data['peer_rating_mean']:.2f}"
        writer.writerow({k: spreadsheet_cell(v) for k, v in data.items()})  # names as set
    return out.getvalue()


def member_progress_dict(progress: MemberProgress) -> dict[str, object]:
    """One member's progress as plain data (JSON-ready)."""
    return asdict(progress)
