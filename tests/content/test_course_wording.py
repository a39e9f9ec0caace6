"""The course's words kept: each key sentence of the course page (quoted, with its source, in
fixtures/course_day02.yaml) against the Day 2 pack, so wording and numbers cannot drift again.

A `verbatim` sentence must stand word for word in its field (the kit's own question and answer,
the answer students learn to say); any other must keep every number of the course's sentence
and each of its `keep` phrases. Quotes, dashes and the multiplication sign are compared as
the same character whichever way they are typed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from felab_core.drills.speaking import ADVICE
from tests.db_support import CONTENT

FIXTURE = Path(__file__).parent / "fixtures" / "course_day02.yaml"
SEED = yaml.safe_load(FIXTURE.read_text(encoding="utf-8"))
PACK = yaml.safe_load((CONTENT / "day-02.yaml").read_text(encoding="utf-8"))
NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_SAME = str.maketrans({"’": "'", "‘": "'", "“": '"', "”": '"', "×": "x"})


def plain(text: str) -> str:
    return " ".join(text.translate(_SAME).split())


def items() -> dict[str, dict[str, Any]]:
    out = {}
    for kind in ("cards", "prompts", "whiteboards"):
        for item in PACK.get(kind) or []:
            out[item["id"]] = item
    return out


def field(item: dict[str, Any], path: str) -> str:
    value: Any = item
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return plain(str(value))


@pytest.mark.parametrize("entry", SEED["sentences"], ids=lambda e: f"{e['id']}:{e['field']}")
def test_each_key_sentence_of_the_course_is_kept(entry: dict[str, Any]) -> None:
    ours = field(items()[entry["id"]], entry["field"])
    course = plain(entry["course"])
    if entry.get("verbatim"):
        assert course in ours, f"word for word, the course says:\n  {course}\nthe pack:\n  {ours}"
        return
    missing = [n for n in NUMBER.findall(course) if n not in NUMBER.findall(ours)]
    missing += [k for k in entry.get("keep") or [] if plain(k) not in ours]
    assert not missing, f"{missing} of the course's\n  {course}\nare not in\n  {ours}"


def test_every_item_of_the_pack_is_checked() -> None:
    checked = {e["id"] for e in SEED["sentences"]}
    assert checked == set(items())


def test_say_it_aloud_keeps_the_course_s_advice_and_time() -> None:
    # "Under 20 seconds each. Record yourself once and listen back." (the page's "Say it out loud")
    assert ADVICE == "Record yourself once and listen back."
    assert [p["seconds"] for p in PACK["prompts"]] == [20]
