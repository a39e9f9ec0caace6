"""What a card shows, as plain data: the bot and the terminal each lay it out their own way."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from felab_core.db import models as m


@dataclass(frozen=True)
class Engineer:
    question: str
    answer: str
    detail: str | None = None


@dataclass(frozen=True)
class CardView:
    """A card's front (question) and back (everything the reveal shows)."""

    key: str
    question: str
    answer: str
    picture: str | None = None
    numbers_source: str | None = None
    numbers: list[str] = field(default_factory=list)
    words: list[tuple[str, str, str | None]] = field(default_factory=list)
    engineer: Engineer | None = None


def card_view(card: m.Card) -> CardView:
    body: dict[str, Any] = card.body or {}
    real = body.get("real_numbers") or {}
    eng = body.get("engineer")
    return CardView(
        key=card.key,
        question=card.question,
        answer=card.answer,
        picture=body.get("picture"),
        numbers_source=real.get("source"),
        numbers=list(real.get("lines") or []),
        words=[(w["term"], w["meaning"], w.get("example")) for w in body.get("words") or []],
        engineer=Engineer(eng["question"], eng["answer"], eng.get("detail")) if eng else None,
    )
