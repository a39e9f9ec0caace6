"""The pieces every item of a content pack is made of (ids, text, words, the engineer version),
shared by the pack's format (format.py) and the drill kinds (felab_core/drills/kinds/), which
declare their own items from them.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints

ID_PATTERN = r"^[a-z0-9][a-z0-9._-]{1,99}$"
ItemId = Annotated[str, StringConstraints(pattern=ID_PATTERN)]
Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class Strict(BaseModel):
    """Unknown fields are refused (a misspelt `anwser` must not vanish silently)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Word(Strict):
    """A term in "words to know"."""

    term: Text
    meaning: Text
    example: Text | None = None


class EngineerVersion(Strict):
    """The kit's own question and answer, and the fuller detail behind them."""

    question: Text
    answer: Text
    detail: Text | None = None
