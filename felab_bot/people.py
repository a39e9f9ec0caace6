"""What the instructors' commands and `/me` say, and the services behind them: no Discord here.

Instructors are checked on every call (felab_core.people.members.require_instructor), never by
Discord permissions alone: a student who finds `/progress` gets a plain refusal.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from felab_bot.drills import fit
from felab_bot.who import Who, member_of
from felab_core.db import models as m
from felab_core.errors import Invalid, NotFound
from felab_core.numbers.verdict import rejudge_waiting, rejudged_text
from felab_core.people.chat_posts import (
    PostToDelete,
    forget_post,
    post_ids_of,
    posts_to_delete,
    remember_post,
)
from felab_core.people.members import (
    find_member,
    require_instructor,
    set_hardware,
    set_public_numbers,
)
from felab_core.people.privacy import delete_member, export_member
from felab_core.reports.leaderboard import (
    BOARDS,
    Board,
    boards_csv,
    leaderboard,
    speed_boards,
)
from felab_core.reports.progress import ProgressRow, cohort_progress, progress_csv
from felab_core.text import in_code

SPEED_SERVERS = ("ollama", "llamacpp", "mlx")
METRICS = (*BOARDS, *(f"speed-{s}" for s in SPEED_SERVERS))


@dataclass(frozen=True)
class Report:
    """A short table for the chat and the whole thing as a file."""

    text: str
    file_name: str = ""
    data: bytes = b""


def _instructor(session: Session, who: Who, now: datetime) -> m.Member:
    member = member_of(session, who, now)
    require_instructor(member)
    return member


def _cols(head: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
    lines = [
        " ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in (head, *rows)
    ]
    return "```\n" + "\n".join(lines) + "\n```"


def _board_text(board: Board, top: int = 10) -> str:
    rows = [
        (
            str(r.rank),
            in_code(r.name[:16]),
            f"{r.value:g}" if board.kind != "retention" else f"{r.value:.0%}",
        )
        for r in board.rows[:top]
    ]
    if not rows:
        return f"**{board.title}**\nNobody yet."
    return f"**{board.title}**\n" + _cols(("#", "name", "value"), rows)


def leaderboard_report(session: Session, who: Who, metric: str, now: datetime) -> Report:
    """`/leaderboard [metric]` for instructors: the board(s) and all of them as CSV."""
    member = _instructor(session, who, now)
    if metric not in METRICS:
        raise Invalid(f"leaderboards are by {', '.join(METRICS)}; got {metric!r}")
    if metric.startswith("speed-"):
        boards = speed_boards(
            session, member.cohort_id, metric.removeprefix("speed-"), include_private=True
        )
    else:
        boards = [leaderboard(session, member.cohort_id, metric, now)]
    if not boards:
        return Report(f"No {metric} figures in the cohort yet.")
    text = "\n".join(_board_text(b) for b in boards)
    data = boards_csv(boards).encode()
    return Report(fit(text, 1900), f"leaderboard-{metric}.csv", data)


def _progress_line(r: ProgressRow) -> tuple[str, ...]:
    return (
        in_code(r.name[:14]),
        str(r.day_reached),
        str(r.streak),
        str(r.reviews),
        str(r.numbers_measured),
    )


def progress_report(session: Session, who: Who, member_id: int | None, now: datetime) -> Report:
    """`/progress [member]` for instructors: one line per member, and the CSV."""
    me = _instructor(session, who, now)
    rows = cohort_progress(session, me.cohort_id, now)
    if member_id is not None:
        target = find_member(session, me.cohort_id, str(member_id))
        if target is None:
            raise NotFound("that person is not in this cohort yet")
        rows = [r for r in rows if r.member_id == target.id]
    if not rows:
        return Report("Nobody in the cohort yet.")
    head = ("name", "day", "streak", "reviews", "measured")
    shown = rows[:25]
    text = _cols(head, [_progress_line(r) for r in shown])
    if len(rows) > len(shown):
        text += f"\n… and {len(rows) - len(shown)} more in the CSV."
    return Report(fit(text, 1900), "progress.csv", progress_csv(rows).encode())


# ----------------------------------------------------------------------------- /me


def me_text(session: Session, who: Who, now: datetime) -> str:
    member = member_of(session, who, now)
    if member.chip:
        machine = member.chip
    elif member.bandwidth_gb_s:
        machine = f"{member.bandwidth_gb_s:g} GB/s"
    else:
        machine = "not set (`/me hardware`)"
    public = (
        "public: they can appear on leaderboards"
        if member.public_numbers
        else "private: kept off leaderboards (instructors still see them)"
    )
    return f"**Machine**: {machine}\n**Your numbers** are {public}."


def hardware(
    session: Session, who: Who, chip: str | None, bandwidth: str | None, now: datetime
) -> str:
    member = member_of(session, who, now)
    set_hardware(session, member, chip=chip, bandwidth_gb_s=bandwidth)
    judged = rejudge_waiting(session, member)
    what = member.chip or f"{member.bandwidth_gb_s:g} GB/s"
    text = f"Recorded your machine: {what}. `/numbers show` now sets your speeds against its limit."
    return f"{text}\n{rejudged_text(judged)}" if judged else text


def privacy(session: Session, who: Who, public: bool, now: datetime) -> str:
    member = member_of(session, who, now)
    set_public_numbers(session, member, public)
    if public:
        return "Your numbers are public now: they can appear on leaderboards."
    return (
        "Your numbers are private now: kept off leaderboards, and your benchmark results come "
        "to you alone. Your instructors still see them."
    )


def _json_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def export(session: Session, who: Who, now: datetime) -> Report:
    member = member_of(session, who, now)
    data = export_member(session, member.id)
    text = json.dumps(data, indent=1, ensure_ascii=False, default=_json_value) + "\n"
    return Report("Everything felab holds about you, as JSON.", "felab-export.json", text.encode())


@dataclass(frozen=True)
class Deleted:
    """What `/me delete` removed from the database, and the bot's messages about the member
    that are now to be removed from Discord (`post_ids`)."""

    text: str
    post_ids: list[int]


def delete(session: Session, who: Who) -> Deleted:
    """Delete the member (after their confirmation press); nothing if they are not known."""
    from felab_core.people.members import cohort_for_channel

    cohort = cohort_for_channel(session, str(who.guild_id or ""), str(who.channel_id or ""))
    member = find_member(session, cohort.id, str(who.user_id))
    if member is None:
        return Deleted("felab holds nothing about you in this cohort.", [])
    post_ids = post_ids_of(session, member.id)
    counts = delete_member(session, member.id, confirm=member.discord_id)
    removed = [
        f"{n} {k.replace('_', ' ')}"
        for k, n in counts.items()
        if n and k not in ("members", "chat_posts")
    ]
    text = "Deleted everything felab held about you: " + ", ".join([*removed, "your member record"])
    return Deleted(text + ".", post_ids)


def removed_text(removed: int, refused: int, left: int) -> str:
    """What became of the bot's messages about a deleted member, in one line."""
    total = removed + refused + left
    if total == 0:
        return "felab had posted nothing about you in Discord."
    parts = [
        f"Removed {removed} of {total} message{'s' if total != 1 else ''} felab posted about you."
    ]
    if left:
        parts.append(f"{left} could not be removed just now: felab tries again shortly.")
    if refused:
        parts.append(
            f"{refused} felab may no longer remove (it lost access to the channel): ask a "
            "moderator to delete them."
        )
    return " ".join(parts)


def posted_about(
    session: Session, member_id: int, channel_id: int, message_id: int, about: str, now: datetime
) -> None:
    """Remember a message the bot posted about a member, so deleting them deletes it."""
    remember_post(session, member_id, channel_id, message_id, about, now=now)


def posts_to_remove(session: Session, post_ids: list[int] | None = None) -> list[PostToDelete]:
    return posts_to_delete(session, post_ids)


def removed_post(session: Session, post_id: int) -> None:
    forget_post(session, post_id)
