"""`felab drill`: today's cards in the terminal: read, answer out loud, reveal, rate.

The same service calls the bot makes (`cards_due`, `rate_card`); each rating is committed as it
is given, so quitting half-way keeps what was done. Without --member it drills the terminal's
own learner (a local cohort paced by hand: --day picks the course day).
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime

import typer
from rich.console import Console
from rich.panel import Panel
from rich.text import Text
from sqlalchemy.orm import Session, sessionmaker

from felab.cli.acting_for import member_for
from felab.cli.db import service_errors, sessions
from felab.cli.errors import EXIT_USAGE, err
from felab_core.content.calendar import last_content_day, set_manual_day, today_plan, zone
from felab_core.content.view import CardView, card_view
from felab_core.db.session import session_scope
from felab_core.drills.review import (
    DueCard,
    cards_due,
    next_due_at,
    parse_grade,
    rate_card,
    streak,
)
from felab_core.people.members import (
    LOCAL_COHORT,
    get_member,
)

_KEYS = "[a]gain  [h]ard  [g]ood  [e]asy   [q]uit"


def _panel(text: str, title: str) -> Panel:
    """A titled box holding text as written (square brackets are not rich markup here)."""
    return Panel(Text(text), title=Text(title), title_align="left")


def _show_answer(console: Console, view: CardView, deep: bool) -> None:
    console.print(_panel(view.answer, "In plain words"))
    if view.picture:
        console.print(_panel(view.picture, "Picture it"))
    if view.numbers:
        rows = [f"({view.numbers_source})"] if view.numbers_source else []
        rows += [f"- {n}" for n in view.numbers]
        console.print(_panel("\n".join(rows), "With real numbers"))
    if view.words:
        lines = [
            f"{term}: {meaning}" + (f" Example: {ex}" if ex else "")
            for term, meaning, ex in view.words
        ]
        console.print(_panel("\n".join(lines), "Words to know"))
    if deep and view.engineer:
        eng = view.engineer
        text = f"Q: {eng.question}\nA: {eng.answer}" + (f"\n\n{eng.detail}" if eng.detail else "")
        console.print(_panel(text, "The engineer version"))


def drill(
    member_id: str | None = typer.Option(
        None, "--member", help="A member's Discord id (default: this terminal's own learner)."
    ),
    cohort_id: int | None = typer.Option(None, "--cohort", help="The member's cohort number."),
    day: int | None = typer.Option(
        None,
        "--day",
        min=1,
        max=366,
        help="Set the course day (only for this terminal's own learner).",
    ),
    list_only: bool = typer.Option(False, "--list", help="List today's cards and stop."),
    deep: bool = typer.Option(
        True, "--deep/--plain", help="Show the engineer version on reveal (default) or not."
    ),
    timezone: str | None = typer.Option(
        None, "--timezone", help="IANA zone for a new local learner (default: this machine's)."
    ),
) -> None:
    """Drill today's cards: answer out loud, press Enter to reveal, then rate yourself."""
    console = Console(highlight=False, emoji=False)  # a card's :warning: is text
    factory = sessions()
    with service_errors():
        if timezone is not None and not timezone.strip():
            raise typer.BadParameter("--timezone is empty: give an IANA zone, e.g. Europe/London")
        if timezone:
            zone(timezone)  # a typo is said even when the learner already has a zone
        with session_scope(factory) as s:
            member = member_for(s, member_id, cohort_id, timezone=timezone or "")
            if day is not None:
                if member.cohort.name != LOCAL_COHORT or member.cohort.guild_id is not None:
                    raise typer.BadParameter("--day only moves this terminal's own learner")
                set_manual_day(s, member.cohort, day)
                last = last_content_day(s)
                if last is not None and day > last:
                    console.print(
                        f"Note: day {day} is past the last day of the loaded content (day "
                        f"{last}): no new cards come after it; earlier ones still do.",
                        markup=False,
                    )
            now = datetime.now(UTC)
            plan = today_plan(s, member.cohort, now)
            due = cards_due(s, member, now)
            mid = member.id
        console.print(plan.message, markup=False)
        if not due:
            _finish(console, factory, mid, nothing=True)
            return
        cards = f"{len(due)} card{'' if len(due) == 1 else 's'}"
        console.print(f"{cards} today. Say each answer out loud before revealing it.")
        if list_only:
            for d in due:
                console.print(f"  [{d.kind}] day {d.day_number}: {d.card.question}", markup=False)
            return
        done = 0
        for d in due:
            try:
                if not _one_card(console, factory, mid, d, deep):
                    break
            except ReplyTooLong as exc:
                err(f"{exc} (rated {done} of {len(due)}: those are kept)")
                raise typer.Exit(EXIT_USAGE) from None
            done += 1
        console.print(f"Rated {done} of {len(due)}.")
        _finish(console, factory, mid, nothing=False)


#: The longest reply a drill reads from a pipe: a rating or an Enter is a few characters.
MAX_REPLY_CHARS = 4096


class ReplyTooLong(Exception):
    """Input no person typed: a line longer than any reply (/dev/zero has no end of line), or
    reply after reply that is no rating (`yes | felab drill` repeated 'y' for good)."""


#: Non-ratings in a row, one card, before the input is called the wrong file.
MAX_WRONG_REPLIES = 10


def _ask(text: str, default: str | None = None) -> str | None:
    """A prompt that treats end of input (Ctrl-D) as quitting, not as an error.

    From a terminal, typer's prompt (line editing); from a pipe or a file, one line of at most
    MAX_REPLY_CHARS, so an input without line ends is refused instead of read into memory."""
    if sys.stdin is None:  # closed (`<&-`): nothing to read, as at end of input
        typer.echo(f"{text}: ")
        return None
    if not sys.stdin.isatty():
        typer.echo(f"{text}: ", nl=False)
        line = sys.stdin.readline(MAX_REPLY_CHARS + 1)
        if not line:
            return None
        if len(line) > MAX_REPLY_CHARS:
            raise ReplyTooLong(
                f"a line of input longer than {MAX_REPLY_CHARS:,} characters: the drill reads "
                "one short reply per line (Enter, a rating, q); is stdin the right file?"
            )
        reply = line.rstrip("\r\n")
        return reply if reply or default is None else default
    try:
        answer: str = typer.prompt(text, default=default, show_default=False)
    except typer.Abort:  # end of input (Ctrl-D)
        return None
    return answer


def _one_card(
    console: Console, factory: sessionmaker[Session], member_pk: int, d: DueCard, deep: bool
) -> bool:
    """Ask, reveal, rate one card; False when the learner quits."""
    view = card_view(d.card)
    label = {"new": "new today", "review": "review", "catch-up": f"from day {d.day_number}"}
    console.print(_panel(view.question, f"Question ({label[d.kind]})"))
    shown = time.monotonic()
    answer = _ask("Enter to show the answer (q to quit)", default="")
    if answer is None or answer.strip().lower() == "q":
        return False
    _show_answer(console, view, deep)
    for _ in range(MAX_WRONG_REPLIES + 1):
        reply = _ask(_KEYS)
        if reply is None or reply.strip().lower() == "q":
            return False
        text = reply.strip()  # parse_grade ignores case; a refusal echoes what was typed
        try:
            grade = parse_grade(text)
            break
        except ValueError as exc:
            err(str(exc))
    else:
        raise ReplyTooLong(
            f"{MAX_WRONG_REPLIES + 1} replies in a row were not ratings: the drill waits for "
            "again, hard, good or easy (or 1-4); is stdin the right file?"
        )
    took = int((time.monotonic() - shown) * 1000)
    with session_scope(factory) as s:
        member = get_member(s, member_pk)
        outcome = rate_card(s, member, d.card.key, grade, datetime.now(UTC), duration_ms=took)
    when = outcome.due.astimezone().strftime("%a %d %b %H:%M")
    console.print(f"{grade.value}: back {when} ({outcome.state}).", markup=False)
    return True


def _finish(
    console: Console, factory: sessionmaker[Session], member_pk: int, *, nothing: bool
) -> None:
    with session_scope(factory) as s:
        member = get_member(s, member_pk)
        st = streak(member, datetime.now(UTC))
        nxt = next_due_at(s, member)
    if nothing:
        console.print("Nothing due right now.")
    if nxt is not None:
        console.print(f"Next review: {nxt.astimezone().strftime('%a %d %b %H:%M')}.")
    console.print(f"Streak: {st.current} day{'' if st.current == 1 else 's'} (best {st.best}).")
