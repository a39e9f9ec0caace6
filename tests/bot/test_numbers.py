"""`/numbers`: the modal's fields from the day's pack, each value checked, an impossible value
kept but flagged, bad input refused clearly without losing the good values, and the table."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from felab_bot import numbers
from felab_bot.cogs.numbers import NumbersModal
from felab_core.db import models as m
from felab_core.people.members import find_member, set_hardware, set_server_model
from tests.bot.support import FakeBot, chat_cohort, who_in
from tests.db_support import NOW

OLLAMA = "d02.num.ollama-writing"
LLAMACPP = "d02.num.llamacpp-writing"
MLX = "d02.num.mlx-writing"


@pytest.fixture
def cohort(db: Session, day2: None) -> m.Cohort:
    return chat_cohort(db)


def _entered(db: Session) -> dict[str, float]:
    rows = db.scalars(select(m.Number).where(m.Number.source == "entered")).all()
    return {n.server: n.value for n in rows}


def test_the_form_asks_what_day_2_asks_with_sample_hints(db: Session, cohort: m.Cohort) -> None:
    form = numbers.numbers_form(db, who_in(cohort), NOW)
    assert form.day == 2
    assert [f.server for f in form.fields] == ["ollama", "llamacpp", "mlx"]
    assert [f.placeholder for f in form.fields] == [
        "e.g. 44.6 tokens/s",  # Day 1's sample Ollama row
        "tokens per second, such as 44.6",  # its hint is longer than Discord allows
        "Often the fastest of your three.",
    ]
    assert all(len(f.label) <= 45 and len(f.placeholder) <= 100 for f in form.fields)
    modal = NumbersModal(form)
    assert len(modal.children) == 3


def test_good_values_are_recorded(db: Session, cohort: m.Cohort) -> None:
    text = numbers.enter_numbers(
        db, who_in(cohort), {OLLAMA: "44.6", LLAMACPP: "22.4 ms/token", MLX: ""}, NOW
    )
    assert _entered(db) == {"ollama": 44.6, "llamacpp": pytest.approx(1000 / 22.4)}
    assert "recorded 44.6 tok/s" in text and "ms per token" in text
    assert "do not count" in text


@pytest.mark.parametrize(
    ("typed", "why"),
    [
        ("fast", "could not read"),
        ("-3", "more than zero"),
        ("0", "more than zero"),
        ("5000000", "beyond any single conversation"),
        ("30 words/s", "not words"),
    ],
)
def test_bad_input_is_refused_clearly_and_the_good_kept(
    db: Session, cohort: m.Cohort, typed: str, why: str
) -> None:
    text = numbers.enter_numbers(db, who_in(cohort), {OLLAMA: "44.6", MLX: typed}, NOW)
    assert _entered(db) == {"ollama": 44.6}
    assert f"`{typed}` was not recorded" in text and why in text
    assert "type them again" in text


def test_an_impossible_value_is_kept_but_flagged(db: Session, cohort: m.Cohort) -> None:
    who = who_in(cohort)
    numbers.numbers_form(db, who, NOW)  # joins the cohort
    member = find_member(db, cohort.id, str(who.user_id))
    assert member is not None
    set_hardware(db, member, chip="M4 Pro")
    set_server_model(db, member, "mlx", "llama-3.1-8b-4bit", model_bytes="4.9GB")
    text = numbers.enter_numbers(db, who, {MLX: "90"}, NOW)
    assert _entered(db) == {"mlx": 90.0}
    assert "Kept, but flagged" in text

    shown = numbers.show_numbers(db, who, NOW)
    assert "Day 2: your numbers" in shown and "```" in shown
    assert "mlx: entered: above the speed limit" in shown
    assert "Not yet:" in shown and "still to measure" in shown


def test_show_with_nothing_yet(db: Session, cohort: m.Cohort) -> None:
    shown = numbers.show_numbers(db, who_in(cohort), NOW)
    lines = shown.splitlines()
    assert any(line.startswith("ollama") and "-" in line for line in lines)
    assert "- ollama: Day 1's sample Ollama row measured 44.6" in shown
    assert len(shown) <= 2000


def test_a_prefilled_form_shows_the_last_typed_figure(db: Session, cohort: m.Cohort) -> None:
    numbers.enter_numbers(db, who_in(cohort), {OLLAMA: "44.6"}, NOW)
    form = numbers.numbers_form(db, who_in(cohort), NOW)
    assert form.fields[0].current == "44.6" and form.fields[1].current == ""


def test_a_resubmitted_form_records_only_what_changed_and_never_drifts(
    db: Session, cohort: m.Cohort
) -> None:
    who = who_in(cohort)
    first = numbers.enter_numbers(db, who, {OLLAMA: "44.6", LLAMACPP: "22.4 ms/token"}, NOW)
    assert "recorded 22.4 ms/token (44.6 tok/s)" in first
    for _ in range(5):  # open the form and send it back as it came, five times
        form = numbers.numbers_form(db, who, NOW)
        sent = {f.key: f.current for f in form.fields}
        assert sent == {OLLAMA: "44.6", LLAMACPP: "22.4 ms/token", MLX: ""}
        again = numbers.enter_numbers(db, who, sent, NOW)
        assert again.startswith("Nothing changed, so nothing new was recorded")
    rows = db.scalars(select(m.Number).where(m.Number.source == "entered")).all()
    assert len(rows) == 2
    llama = next(r for r in rows if r.server == "llamacpp")
    assert (llama.typed_value, llama.typed_unit) == ("22.4", "ms/token")
    shown = numbers.show_numbers(db, who, NOW)
    assert "- llamacpp: typed as 22.4 ms/token (44.6 tok/s)" in shown
    # Only the changed field is recorded; 22.40 is the same figure as 22.4.
    changed = numbers.enter_numbers(
        db, who, {OLLAMA: "45.1", LLAMACPP: "22.40 ms/token", MLX: ""}, NOW
    )
    assert "recorded 45.1 tok/s" in changed and "Unchanged, so not recorded again" in changed
    assert len(db.scalars(select(m.Number).where(m.Number.source == "entered")).all()) == 3


class _Response:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    async def send_message(self, text: str, **kw: Any) -> None:
        self.calls.append(("send_message", text))

    async def defer(self, **kw: Any) -> None:
        self.calls.append(("defer", None))


async def test_submitting_the_modal_records_through_the_service(
    db: Session, cohort: m.Cohort
) -> None:
    form = numbers.numbers_form(db, who_in(cohort), NOW)
    modal = NumbersModal(form)
    modal.inputs[OLLAMA]._value = "44.6"  # what Discord sends back on submit
    modal.inputs[MLX]._value = "lots"
    who = who_in(cohort)
    response = _Response()
    interaction: Any = type(
        "I",
        (),
        {
            "client": FakeBot(db),
            "guild_id": who.guild_id,
            "channel_id": who.channel_id,
            "user": type("U", (), {"id": who.user_id, "display_name": "Ada"})(),
            "response": response,
        },
    )()
    await modal.on_submit(interaction)
    [(kind, text)] = response.calls
    assert kind == "send_message" and "recorded 44.6" in text and "`lots` was not" in text
    assert _entered(db) == {"ollama": 44.6}
