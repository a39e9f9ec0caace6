"""What the drills cog says, and the service calls behind each button: no Discord import here.

Each function takes the caller's session (the cog wraps every call in one unit of work) and
returns plain text or plain data; the rules live in felab_core (calendar: which post is due and
claimed once; drills: which cards, FSRS rating, one rating per press).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

from felab_bot.who import member_for
from felab_core.content.calendar import claim_daily_post, cohorts_due_for_post, today_plan
from felab_core.content.calendar import mark_posted as mark_post_sent
from felab_core.content.view import card_view
from felab_core.db import models as m
from felab_core.drills.kinds import KINDS
from felab_core.drills.review import (
    Grade,
    card_by_id,
    cards_due,
    day_cards,
    day_drill_items,
    drill_item_by_id,
    end_of_local_day,
    item_of,
    rate_card_once,
)
from felab_core.drills.speaking import ADVICE, TIMINGS, day_prompts, prompt_by_id, said_it

LIMIT = 2000  # characters in one Discord message
ACTIONS = ("reveal", "again", "hard", "good", "easy")
CUSTOM_ID = r"felab:card:(?P<card_id>[0-9]{1,18}):(?P<action>reveal|again|hard|good|easy)"
_CUSTOM_ID = re.compile(CUSTOM_ID)
# The say-it-aloud prompt's "Said it" and a whiteboard's reveal, on the daily post (persistent).
PROMPT_ID = r"felab:prompt:(?P<prompt_id>[0-9]{1,18}):said"
BOARD_ID = r"felab:board:(?P<board_id>[0-9]{1,18}):reveal"
SAID_LABEL = "Said it"
BOARD_LABEL = "Reveal the answer"

# (action, label, style): "Hard" is a pass: the member got it, with effort.
BUTTONS: tuple[tuple[str, str, str], ...] = (
    ("reveal", "Reveal the answer", "secondary"),
    ("again", "Again: I forgot", "danger"),
    ("hard", "Hard: got it, with effort", "secondary"),
    ("good", "Good: got it", "primary"),
    ("easy", "Easy: got it at once", "success"),
)
GRADE_LABEL = {action: label for action, label, _ in BUTTONS if action != "reveal"}


def custom_id(card_id: int, action: str) -> str:
    """The button's id: the card's database id and what the button does (persistent)."""
    if action not in ACTIONS:
        raise ValueError(f"unknown card action {action!r}")
    return f"felab:card:{card_id}:{action}"


def parse_custom_id(value: str) -> tuple[int, str] | None:
    match = _CUSTOM_ID.fullmatch(value)
    return (int(match["card_id"]), match["action"]) if match else None


def prompt_custom_id(prompt_id: int) -> str:
    return f"felab:prompt:{prompt_id}:said"


def board_custom_id(board_id: int) -> str:
    return f"felab:board:{board_id}:reveal"


def fit(text: str, limit: int = LIMIT) -> str:
    """Text cut to Discord's limit, saying so when it was cut."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def fit_parts(parts: list[str], limit: int = LIMIT, sep: str = "\n\n") -> str:
    """Sections joined within the limit: short ones whole, the long ones cut to equal shares
    (a long answer never pushes the engineer version out)."""
    budget = limit - len(sep) * (len(parts) - 1)
    cap = max((len(p) for p in parts), default=0)
    remaining = budget
    sizes = sorted(len(p) for p in parts)
    for i, size in enumerate(sizes):
        share = remaining // (len(sizes) - i)
        if size > share:
            cap = share
            break
        remaining -= size
    return sep.join(fit(p, cap) for p in parts)


def when(at: datetime) -> str:
    """A Discord timestamp each reader sees in their own clock ("in 10 minutes")."""
    return f"<t:{int(at.timestamp())}:R>"


# ----------------------------------------------------------------------------- the daily post


@dataclass(frozen=True)
class CardPost:
    card_id: int
    text: str


@dataclass(frozen=True)
class ExtraPost:
    """A say-it-aloud prompt or a whiteboard on the daily post: its database id and text."""

    item_id: int
    text: str


@dataclass(frozen=True)
class DailyPost:
    """A claimed daily post: the header and one message per card, for one channel."""

    post_id: int
    cohort_id: int
    channel_id: int
    header: str
    cards: list[CardPost]
    prompts: list[ExtraPost] = field(default_factory=list)  # "Said it" under each
    boards: list[ExtraPost] = field(default_factory=list)  # "Reveal the answer" under each
    ping_role_id: int | None = None  # the role the header mentions, and pings (the cohort's)


def card_text(card: m.Card, day_number: int, index: int, total: int) -> str:
    return fit(
        f"**Day {day_number} · card {index} of {total}**\n{card.question}\n\n"
        "*Answer out loud first, then reveal and rate yourself. Hard still means you got it.*"
    )


def prompt_post_text(prompt: m.SpeakPrompt, day_number: int) -> str:
    return fit(
        f"**Day {day_number} · say it out loud** ({prompt.seconds} s)\n{prompt.question}\n\n"
        f"*Answer aloud in under {prompt.seconds} seconds. {ADVICE} Then press {SAID_LABEL} "
        "and rate yourself.*"
    )


def board_post_text(row: m.DrillItem, day_number: int, index: int, total: int) -> str:
    """A drill item on the daily post: "Day 2 · whiteboard 1 of 2", what its kind shows first,
    and the instruction before its reveal button."""
    kind = KINDS[row.kind]
    item = item_of(row)
    source = kind.source(item)
    head = f"**Day {day_number} · {kind.name} {index} of {total}**"
    head += f" ({source})" if source else ""
    tail = f"*{kind.instruction}, then press {BOARD_LABEL}.*"
    body = fit_parts(kind.front(item), limit=LIMIT - len(head) - len(tail) - 4)
    return f"{head}\n{body}\n\n{tail}"


def _board_posts(rows: list[m.DrillItem], day_number: int) -> list[ExtraPost]:
    """Each drill item's post, counted within its kind ("whiteboard 2 of 2")."""
    totals = Counter(row.kind for row in rows)
    seen: Counter[str] = Counter()
    posts = []
    for row in rows:
        seen[row.kind] += 1
        text = board_post_text(row, day_number, seen[row.kind], totals[row.kind])
        posts.append(ExtraPost(row.id, text))
    return posts


def claim_due_posts(session: Session, now: datetime) -> list[DailyPost]:
    """Claim every Discord cohort's post that is due (once per cohort and day) and lay it out.

    A cohort with no channel (the terminal's own) is never claimed here.
    """
    out: list[DailyPost] = []
    for cohort, _number in cohorts_due_for_post(session, now):
        if not cohort.channel_id or not cohort.channel_id.isdigit():
            continue
        post = claim_daily_post(session, cohort, now)
        if post is None:
            continue
        plan = today_plan(session, cohort, now)
        cards = day_cards(session, plan.day) if plan.day is not None else []
        prompts = day_prompts(session, plan.day) if plan.day is not None else []
        boards = day_drill_items(session, plan.day) if plan.day is not None else []
        role_text = cohort.post_role_id or ""
        role = int(role_text) if role_text.isdigit() else None
        lines = [f"<@&{role}> **{plan.message}**" if role else f"**{plan.message}**"]
        if plan.day is not None and plan.day.summary:
            lines.append(plan.day.summary)
        if cards:
            lines.append(
                f"{len(cards)} card{'s' if len(cards) != 1 else ''} today: read the question, "
                "answer out loud, then press Reveal and rate yourself."
            )
        out.append(
            DailyPost(
                post_id=post.id,
                cohort_id=cohort.id,
                channel_id=int(cohort.channel_id),
                header=fit("\n".join(lines)),
                cards=[
                    CardPost(c.id, card_text(c, plan.day_number, i, len(cards)))
                    for i, c in enumerate(cards, 1)
                ],
                prompts=[ExtraPost(p.id, prompt_post_text(p, plan.day_number)) for p in prompts],
                boards=_board_posts(boards, plan.day_number),
                ping_role_id=role,
            )
        )
    return out


def posted(session: Session, post_id: int, message_id: int, now: datetime) -> None:
    """Record the message that carried a claimed post."""
    mark_post_sent(session, post_id, str(message_id), now)


def release(session: Session, post_id: int) -> None:
    """Give a claim back after its header could not be sent, so the next look posts it."""
    post = session.get(m.Post, post_id)
    if post is not None and post.message_id is None:
        session.delete(post)
        session.flush()


# ----------------------------------------------------------------------------- buttons


def reveal_text(session: Session, card_id: int) -> str:
    """The back of a card: the plain-words answer, then the engineer version."""
    view = card_view(card_by_id(session, card_id))
    parts = [f"**In plain words**\n{view.answer}"]
    if view.picture:
        parts.append(f"**Picture it**\n{view.picture}")
    if view.engineer:
        eng = view.engineer
        text = f"**Engineer version**\n*{eng.question}*\n{eng.answer}"
        if eng.detail:
            text += f"\n{eng.detail}"
        parts.append(text)
    return fit_parts(parts)


def rate_text(
    session: Session,
    *,
    guild_id: int | None,
    channel_id: int | None,
    user_id: int,
    display_name: str,
    card_id: int,
    grade: str,
    now: datetime,
) -> str:
    """Rate the card for whoever pressed; a repeated press records nothing."""
    member = member_for(session, guild_id, channel_id, user_id, display_name, now)
    card = card_by_id(session, card_id)
    once = rate_card_once(session, member, card, grade, now)
    if once.outcome is None:
        return f"Already rated: this card comes back {when(once.due)}. Nothing was recorded twice."
    days = once.outcome.streak
    return (
        f"Recorded **{GRADE_LABEL[Grade(grade).value]}**. This card comes back {when(once.due)}. "
        f"Streak: {days} day{'s' if days != 1 else ''}."
    )


@dataclass(frozen=True)
class DrillReply:
    text: str
    card_id: int | None  # the first card to show, with its buttons


def drill_reply(
    session: Session,
    *,
    guild_id: int | None,
    channel_id: int | None,
    user_id: int,
    display_name: str,
    now: datetime,
) -> DrillReply:
    """`/drill`: how many cards are due for the member today, and the first of them."""
    member = member_for(session, guild_id, channel_id, user_id, display_name, now)
    due = cards_due(session, member, now, until=end_of_local_day(now, member.timezone))
    ready = [d for d in due if d.due is None or d.due <= now]
    if not ready:
        later = f" ({len(due)} more come back later today)" if due else ""
        return DrillReply(f"Nothing to drill right now{later}. Well done.", None)
    first = ready[0]
    text = (
        f"{len(ready)} card{'s' if len(ready) != 1 else ''} ready for you now.\n\n"
        f"**Day {first.day_number}**\n{first.card.question}\n\n"
        "*Answer out loud first, then reveal and rate yourself.*"
    )
    return DrillReply(fit(text), first.card.id)


# ----------------------------------------------------------------------------- prompt, whiteboard


@dataclass(frozen=True)
class SaidReply:
    text: str
    answer_id: int | None  # an answer still without a self-rating: the reply asks for one


def said_text(
    session: Session,
    *,
    guild_id: int | None,
    channel_id: int | None,
    user_id: int,
    display_name: str,
    prompt_id: int,
    now: datetime,
    shown_at: datetime | None = None,
) -> SaidReply:
    """The "Said it" button: record the clicker's spoken answer (once per day), timed from the
    prompt (`shown_at`, the message the button is on) to the click when that measures it, and
    ask for a self-rating; the rating buttons are felab_bot/speak.py's, so the course's answer
    follows it."""
    member = member_for(session, guild_id, channel_id, user_id, display_name, now)
    prompt = prompt_by_id(session, prompt_id)
    answer, new = said_it(session, member, prompt, now, shown_at)
    ask = "How did it go? Rate yourself 1 (lost) to 5 (clear, correct and inside the time)."
    if new:
        if answer.duration_s is not None:
            timing = (
                f"{answer.duration_s:g} s {TIMINGS['prompt-to-click']} (reading the question "
                "included)"
            )
        else:
            timing = (
                "not timed: the prompt was posted too long before your click. For a timed try, "
                "use `/speak prompt` and press Said it there, or send a voice message"
            )
        return SaidReply(f"Recorded: you said it out loud, {timing}. {ask}", answer.id)
    if answer.self_rating is None:
        return SaidReply(f"Already recorded today: nothing was recorded twice. {ask}", answer.id)
    return SaidReply(
        f"Already recorded today, rated {answer.self_rating}/5: nothing was recorded twice."
        f"\n\n**The course's answer**\n{prompt.answer}",
        None,
    )


def board_reveal_text(session: Session, board_id: int) -> str:
    """A drill item's back, as its kind says it (a whiteboard: the answer, the working step by
    step and the careful note), within one message: long parts cut to equal shares."""
    row = drill_item_by_id(session, board_id)
    return fit_parts(KINDS[row.kind].back(item_of(row)))
