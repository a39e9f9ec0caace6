"""The content file format (`felab.content/1`): one YAML file per course day.

content/README.md documents it for the people who write packs; these models are the checkable
version of that page. Unknown fields are refused (a misspelt `anwser` must not vanish silently),
and every item carries a stable `id` written in the file: it is what ties a member's review
history to a card, so editing a card's text keeps its history, and changing its id starts a new
card.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from felab_core.engine.server_kinds import ServerKind

FORMAT = "felab.content/1"

ID_PATTERN = r"^[a-z0-9][a-z0-9._-]{1,99}$"
ItemId = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]

# Metrics a "your numbers" field may ask for, with the unit each is recorded in.
METRICS: dict[str, str] = {
    "writing_tps": "tokens/s",
    "ttft_s": "s",
    "output_tps": "tokens/s",
}
Metric = Literal["writing_tps", "ttft_s", "output_tps"]


def _known_server(value: str) -> str:
    if value not in {k.value for k in ServerKind}:
        names = ", ".join(k.value for k in ServerKind)
        raise ValueError(f"expected one of {names}, got {value!r}")
    return value


# A server kind's name (felab_core.engine.server_kinds), checked as the pack is read.
Server = Annotated[str, AfterValidator(_known_server)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Word(_Strict):
    """A term in "words to know"."""

    term: Text
    meaning: Text
    example: Text | None = None


class EngineerVersion(_Strict):
    """The kit's own question and answer, and the fuller detail behind them."""

    question: Text
    answer: Text
    detail: Text | None = None


class RealNumbers(_Strict):
    """The answer worked with real figures, one line per step."""

    source: Text | None = None
    lines: list[Text] = Field(min_length=1)


class Step(_Strict):
    id: ItemId
    title: Text


class DoneWhen(_Strict):
    """The day's "done when", in words, and the check felab runs for it.

    `measured` lists the servers that must each have a writing speed measured by felab (not typed
    in), all with the same preset and the same model.
    """

    text: Text
    measured: list[Server] = Field(default_factory=list)
    metric: Metric = "writing_tps"


class NumberField(_Strict):
    """A "your numbers" field: what to record, and the course's sample figure as a hint."""

    id: ItemId
    step: ItemId | None = None
    server: Server
    metric: Metric = "writing_tps"
    label: Text
    help: Text | None = None
    hint: Text | None = None
    example: float | None = Field(default=None, gt=0, allow_inf_nan=False)


class CardSpec(_Strict):
    """A drill card: the question, then what the reveal shows."""

    id: ItemId
    step: ItemId | None = None
    question: Text
    answer: Text
    picture: Text | None = None
    real_numbers: RealNumbers | None = None
    words: list[Word] = Field(default_factory=list)
    engineer: EngineerVersion | None = None


class Phrase(_Strict):
    """One piece of a spoken answer and what it means."""

    phrase: Text
    means: Text


class PromptSpec(_Strict):
    """Say it out loud: a customer's question and one clear answer to give in under `seconds`."""

    id: ItemId
    step: ItemId | None = None
    question: Text
    answer: Text
    seconds: int = Field(default=20, ge=5, le=120)
    meaning: list[Phrase] = Field(default_factory=list)


class WhiteboardSpec(_Strict):
    """A worked example to do on paper: given, answer, the working, and a careful note."""

    id: ItemId
    step: ItemId | None = None
    source: Text | None = None
    question: Text
    given: Text
    answer: Text
    picture: Text | None = None
    careful: Text
    working: list[Text] = Field(min_length=1)
    engineer: EngineerVersion | None = None
    words: list[Word] = Field(default_factory=list)


class Pack(_Strict):
    """One day's content file."""

    format: Literal["felab.content/1"]
    id: ItemId
    day: int = Field(ge=1, le=366)
    title: Text
    summary: Text | None = None
    minutes: int | None = Field(default=None, ge=1, le=600)
    done_when: DoneWhen | None = None
    steps: list[Step] = Field(default_factory=list)
    numbers: list[NumberField] = Field(default_factory=list)
    cards: list[CardSpec] = Field(default_factory=list)
    prompts: list[PromptSpec] = Field(default_factory=list)
    whiteboards: list[WhiteboardSpec] = Field(default_factory=list)

    def all_items(self) -> list[tuple[str, int, str, str | None]]:
        """Every item as (section, index, id, step id), in file order."""
        out: list[tuple[str, int, str, str | None]] = []
        for section in SECTIONS:
            for i, item in enumerate(getattr(self, section)):
                out.append((section, i, item.id, getattr(item, "step", None)))
        return out


SECTIONS = ("steps", "numbers", "cards", "prompts", "whiteboards")
