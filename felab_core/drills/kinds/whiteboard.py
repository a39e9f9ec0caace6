"""The whiteboard: a worked example to do on paper. The post gives the question and what is
given; the reveal the answer, the working step by step and a careful note."""

from __future__ import annotations

from pydantic import Field

from felab_core.content.fields import EngineerVersion, ItemId, Strict, Text, Word
from felab_core.drills.kinds import DrillKind, Item


class WhiteboardSpec(Strict):
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


def _front(item: Item) -> list[str]:
    return [item.question, f"**Given**\n{item.body.get('given') or ''}"]


def _back(item: Item) -> list[str]:
    steps = [str(w) for w in item.body.get("working") or []]
    working = "\n".join(f"{i}. {step}" for i, step in enumerate(steps, 1))
    parts = [f"**The answer**\n{item.answer}"]
    if working:
        parts.append(f"**Working, step by step**\n{working}")
    if item.body.get("careful"):
        parts.append(f"**Careful**\n{item.body['careful']}")
    return parts


KIND = DrillKind(
    name="whiteboard",
    section="whiteboards",
    spec=WhiteboardSpec,
    front=_front,
    back=_back,
    instruction="Work it on paper",
    source=lambda item: item.body.get("source"),
)
