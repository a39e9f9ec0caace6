"""The content file format (`felab.content/1`): one YAML file per course day.

content/README.md documents it for the people who write packs; these models are the checkable
version of that page. Unknown fields are refused (a misspelt `anwser` must not vanish silently),
and every item carries a stable `id` written in the file: it is what ties a member's review
history to a card, so editing a card's text keeps its history, and changing its id starts a new
card.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, Field, create_model, field_validator

from felab_core.content.fields import ID_PATTERN, EngineerVersion, ItemId, Strict, Text, Word
from felab_core.drills.kinds import KINDS
from felab_core.engine.server_kinds import ServerKind, kind_names

__all__ = ["FORMAT", "ID_PATTERN", "METRICS", "EngineerVersion", "Pack", "Word"]

FORMAT = "felab.content/1"

# Metrics a "your numbers" field may ask for, with the unit each is recorded in.
METRICS: dict[str, str] = {
    "writing_tps": "tokens/s",
    "ttft_s": "s",
    "output_tps": "tokens/s",
}
Metric = Literal["writing_tps", "ttft_s", "output_tps"]


def _known_server(value: str) -> str:
    if value not in {k.value for k in ServerKind}:
        raise ValueError(f"expected one of {kind_names()}, got {value!r}")
    return value


# A server kind's name (felab_core.engine.server_kinds), checked as the pack is read.
Server = Annotated[str, AfterValidator(_known_server)]


class RealNumbers(Strict):
    """The answer worked with real figures, one line per step."""

    source: Text | None = None
    lines: list[Text] = Field(min_length=1)


class Step(Strict):
    id: ItemId
    title: Text


class DoneWhen(Strict):
    """The day's "done when", in words, and the check felab runs for it.

    `measured` lists the servers that must each have a writing speed measured by felab (not typed
    in), all with the same preset and the same model.
    """

    text: Text
    measured: list[Server] = Field(default_factory=list)
    metric: Metric = "writing_tps"

    @field_validator("measured")
    @classmethod
    def _each_once(cls, servers: list[str]) -> list[str]:
        twice = sorted({s for s in servers if servers.count(s) > 1})
        if twice:
            raise ValueError(f"{', '.join(twice)} listed more than once")
        return servers


class NumberField(Strict):
    """A "your numbers" field: what to record, and the course's sample figure as a hint."""

    id: ItemId
    step: ItemId | None = None
    server: Server
    metric: Metric = "writing_tps"
    label: Text
    help: Text | None = None
    hint: Text | None = None
    # strict: a quoted "44.6" is text in YAML, not the number it looks like
    example: float | None = Field(
        default=None, gt=0, le=1_000_000, allow_inf_nan=False, strict=True
    )


class CardSpec(Strict):
    """A drill card: the question, then what the reveal shows."""

    id: ItemId
    step: ItemId | None = None
    question: Text
    answer: Text
    picture: Text | None = None
    real_numbers: RealNumbers | None = None
    words: list[Word] = Field(default_factory=list)
    engineer: EngineerVersion | None = None


class Phrase(Strict):
    """One piece of a spoken answer and what it means."""

    phrase: Text
    means: Text


class PromptSpec(Strict):
    """Say it out loud: a customer's question and one clear answer to give in under `seconds`."""

    id: ItemId
    step: ItemId | None = None
    question: Text
    answer: Text
    seconds: int = Field(default=20, ge=5, le=120, strict=True)  # strict: `on` is not 1
    meaning: list[Phrase] = Field(default_factory=list)


class PackBase(Strict):
    """One day's content file: its own fields; each drill kind adds its list (see Pack)."""

    format: Literal["felab.content/1"]
    id: ItemId
    day: int = Field(ge=1, le=366, strict=True)  # strict: `day: true` is not day 1
    title: Text
    summary: Text | None = None
    minutes: int | None = Field(default=None, ge=1, le=600, strict=True)  # `yes` is not 1
    done_when: DoneWhen | None = None
    steps: list[Step] = Field(default_factory=list)
    numbers: list[NumberField] = Field(default_factory=list)
    cards: list[CardSpec] = Field(default_factory=list)
    prompts: list[PromptSpec] = Field(default_factory=list)

    def items_of(self, section: str) -> list[Any]:
        """A section's items (a drill kind's too), in file order."""
        return list(getattr(self, section, None) or [])

    def all_items(self) -> list[tuple[str, int, str, str | None]]:
        """Every item as (section, index, id, step id), in file order."""
        out: list[tuple[str, int, str, str | None]] = []
        for section in SECTIONS:
            for i, item in enumerate(self.items_of(section)):
                out.append((section, i, item.id, getattr(item, "step", None)))
        return out


SECTIONS = (
    "steps",
    "numbers",
    "cards",
    "prompts",
    *(kind.section for kind in KINDS.values()),
)

if TYPE_CHECKING:
    Pack = PackBase
else:
    # Each drill kind's section (felab_core/drills/kinds/) is a field like the others: checked
    # the same way, its problems reported at their line.
    Pack = create_model(
        "Pack",
        __base__=PackBase,
        __doc__=PackBase.__doc__,
        **{kind.section: (list[kind.spec], Field(default_factory=list)) for kind in KINDS.values()},
    )
