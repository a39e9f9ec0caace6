"""Drill kinds: the items a day's post shows with a "reveal" button (the whiteboard is one).

Each kind is one module in this package that sets `KIND`: the section it reads from a content
pack, the schema of one item there, and what the post and the reveal say. Everything else is
shared: the pack format lists the kind's section (format.py), loading stores its items in one
table (`drill_items`, no migration per kind), the daily post shows each with its button, and
the reveal answers from the same module. Adding a kind is its module, its test and the packs
that use it (docs/contributor.md).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel


@dataclass(frozen=True)
class Item:
    """One stored item as a kind sees it: its question and answer, and the rest of its fields."""

    key: str
    question: str
    answer: str
    body: dict[str, Any]


@dataclass(frozen=True)
class DrillKind:
    """What makes a drill kind: where it lives in a pack and what it says."""

    name: str  # one item's name, in the post's heading: "whiteboard 1 of 2"
    section: str  # the pack's list of these items: "whiteboards"
    spec: type[BaseModel]  # one item in the pack (with `id`, `question`, `answer`, opt. `step`)
    front: Callable[[Item], list[str]]  # what the post shows, a part a paragraph
    back: Callable[[Item], list[str]]  # what the reveal shows (long parts share the room)
    instruction: str  # under the post, before the button: "Work it on paper"
    source: Callable[[Item], str | None] = lambda item: None  # beside the heading, if any


def _discover() -> dict[str, DrillKind]:
    found: dict[str, DrillKind] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        kind = getattr(importlib.import_module(f"{__name__}.{info.name}"), "KIND", None)
        if isinstance(kind, DrillKind):
            found[kind.name] = kind
    return found


#: Every kind, by name, in a stable order (the modules' names).
KINDS: dict[str, DrillKind] = _discover()


def kind_named(name: str) -> DrillKind:
    return KINDS[name]
