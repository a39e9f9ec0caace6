"""Leaderboards: by streak, reviews, retention, or best writing speed per server.

Streak, review and retention boards read the per-member counters each rating keeps up to date,
so a cohort of thousands costs one indexed query. Speed boards compare only like with like:
measured figures are grouped by (preset, model), and typed-in figures get boards of their own,
grouped by model. A member who keeps their numbers private is left off speed boards unless the
viewer is an instructor of the cohort. Only figures that passed their checks are ranked: one
above the machine's speed limit, or at odds with its own request records, waits for an
instructor's approval (`unranked` lists those and the unverified ones).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from sqlalchemy import Float, cast, func, select
from sqlalchemy.orm import Session

from felab_core.content.calendar import local_date
from felab_core.db import models as m
from felab_core.drills.review import live_streak
from felab_core.engine.server_kinds import validate_server
from felab_core.errors import Invalid
from felab_core.numbers.verdict import RANKED
from felab_core.text import spreadsheet_cell

BOARDS = ("streak", "reviews", "retention")
SOURCES = ("measured", "entered")


@dataclass(frozen=True)
class BoardRow:
    rank: int
    member_id: int
    name: str
    value: float
    detail: str = ""


@dataclass(frozen=True)
class Board:
    """One ranked list; `group` says what its rows share (preset and model for speeds)."""

    kind: str
    title: str
    rows: list[BoardRow]
    group: dict[str, str] = field(default_factory=dict)


def _ranked(items: list[tuple[int, str, float, str]], limit: int) -> list[BoardRow]:
    """Competition ranking (1, 1, 3): ties share a rank, sorted by value then name."""
    items.sort(key=lambda t: (-t[2], t[1].lower(), t[0]))
    rows: list[BoardRow] = []
    prev: float | None = None
    rank = 0
    for i, (mid, name, value, detail) in enumerate(items[:limit]):
        if value != prev:
            rank = i + 1
            prev = value
        rows.append(BoardRow(rank, mid, name, value, detail))
    return rows


def _name(member_name: str, discord_id: str) -> str:
    return member_name or f"member {discord_id}"


def leaderboard(
    session: Session,
    cohort_id: int,
    by: str,
    now: datetime,
    *,
    limit: int = 20,
    min_tries: int = 10,
) -> Board:
    """The cohort's board by 'streak', 'reviews' or 'retention' (at least `min_tries` recalls)."""
    if by not in BOARDS:
        raise Invalid(f"leaderboards are by {', '.join(BOARDS)} or speed; got {by!r}")
    if limit < 1:
        raise Invalid("a leaderboard shows at least one row")
    base = select(m.Member.id, m.Member.display_name, m.Member.discord_id, m.Member.timezone).where(
        m.Member.cohort_id == cohort_id
    )
    if by == "streak":
        # Alive streaks only: every time zone's "yesterday" is on or after UTC's today - 2.
        floor = now.astimezone(UTC).date() - timedelta(days=2)
        found = session.execute(
            base.add_columns(
                m.Member.streak_current, m.Member.streak_best, m.Member.last_review_day
            )
            .where(m.Member.last_review_day >= floor, m.Member.streak_current > 0)
            .order_by(m.Member.streak_current.desc(), m.Member.id)
        )
        todays: dict[str, date] = {}
        items: list[tuple[int, str, float, str]] = []
        for mid, name, did, tz, cur, best, last in found:
            if len(items) >= limit and cur < items[-1][2]:
                break  # sorted by kept streak: nothing further down can still rank
            today = todays.get(tz) or todays.setdefault(tz, local_date(now, tz))
            alive = live_streak(cur, last, today)
            if alive:
                items.append((mid, _name(name, did), float(alive), f"best {best}"))
        return Board("streak", "Longest current streak (days)", _ranked(items, limit))
    if by == "reviews":
        rows = session.execute(
            base.add_columns(m.Member.reviews_total)
            .where(m.Member.reviews_total > 0)
            .order_by(m.Member.reviews_total.desc(), m.Member.id)
            .limit(limit * 4)
        ).all()
        items = [(mid, _name(n, d), float(v), "") for mid, n, d, _tz, v in rows]
        return Board("reviews", "Most cards reviewed", _ranked(items, limit))
    share = cast(m.Member.recalled, Float) / m.Member.recall_tries
    rows = session.execute(
        base.add_columns(share, m.Member.recall_tries)
        .where(m.Member.recall_tries >= max(min_tries, 1))
        .order_by(share.desc(), m.Member.id)
        .limit(limit * 4)
    ).all()
    items = [
        (mid, _name(n, d), round(float(v), 4), f"{tries} recalls")
        for mid, n, d, _tz, v, tries in rows
    ]
    return Board(
        "retention", f"Best retention (at least {min_tries} recalls)", _ranked(items, limit)
    )


def speed_boards(
    session: Session,
    cohort_id: int,
    server: str,
    *,
    source: str = "measured",
    include_private: bool = False,
    limit: int = 20,
) -> list[Board]:
    """Best writing speed per member on one server, one board per (preset, model).

    `include_private` is for instructors' views: members who hid their numbers are shown.
    """
    server = validate_server(server)
    if source not in SOURCES:
        raise Invalid(f"source must be measured or entered, got {source!r}")
    query = (
        select(
            m.Member.id,
            m.Member.display_name,
            m.Member.discord_id,
            m.Number.preset,
            m.Number.model,
            func.max(m.Number.value),
        )
        .join(m.Member, m.Member.id == m.Number.member_id)
        .where(
            m.Member.cohort_id == cohort_id,
            m.Number.server == server,
            m.Number.metric == "writing_tps",
            m.Number.source == source,
            # A measured figure ranks once checked (felab_core.numbers.verdict): flagged ones
            # wait for an instructor, unverified ones for the member's chip and model size.
            m.Number.verdict.in_(RANKED),
        )
        .group_by(
            m.Member.id, m.Member.display_name, m.Member.discord_id, m.Number.preset, m.Number.model
        )
    )
    if not include_private:
        query = query.where(m.Member.public_numbers.is_(True))
    groups: dict[tuple[str, str], list[tuple[int, str, float, str]]] = {}
    for mid, name, did, preset, model, best in session.execute(query):
        key = ((preset or "") if source == "measured" else "", model or "")
        groups.setdefault(key, []).append((mid, _name(name, did), float(best), ""))
    boards = []
    for (preset, model), items in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        what = "measured by felab" if source == "measured" else "typed in"
        title = f"{server} writing speed, {what}: preset {preset or '-'}, model {model or '-'}"
        group = {"server": server, "source": source, "preset": preset, "model": model}
        boards.append(Board("speed", title, _ranked(items, limit), group))
    return boards


CSV_COLUMNS = ("board", "server", "source", "preset", "model", "rank", "member_id", "name", "value")


def boards_csv(boards: list[Board]) -> str:
    """Boards as one CSV (one row per ranked member), for instructors' spreadsheets."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for board in boards:
        g = board.group
        for row in board.rows:
            cells = [
                board.kind,
                g.get("server", ""),
                g.get("source", ""),
                g.get("preset", ""),
                g.get("model", ""),
                row.rank,
                row.member_id,
                row.name,  # a member's display name, as they set it
                f"{row.value:g}",
            ]
            writer.writerow([spreadsheet_cell(c) for c in cells])
    return out.getvalue()


@dataclass(frozen=True)
class Unranked:
    """A figure kept off the speed boards, and why."""

    number_id: int
    member_id: int
    name: str
    server: str
    value: float
    verdict: str  # flagged | unverified
    note: str
    source: str  # measured | entered


def unranked(session: Session, cohort_id: int, *, limit: int = 50) -> list[Unranked]:
    """Figures waiting for an instructor (flagged) or for the member's machine facts
    (unverified), newest first: what an instructor looks at before approving. Typed-in figures
    are here too: one above the machine's speed limit is flagged as a measured one is."""
    rows = session.execute(
        select(m.Number, m.Member.display_name, m.Member.discord_id)
        .join(m.Member, m.Member.id == m.Number.member_id)
        .where(
            m.Member.cohort_id == cohort_id,
            m.Number.verdict.in_(("flagged", "unverified")),
        )
        .order_by(m.Number.recorded_at.desc(), m.Number.id.desc())
        .limit(limit)
    ).all()
    return [
        Unranked(
            n.id,
            n.member_id,
            _name(name, did),
            n.server,
            n.value,
            n.verdict,
            n.verdict_note or "",
            n.source,
        )
        for n, name, did in rows
    ]
