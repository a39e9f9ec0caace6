"""One rule for text a person or a row gives: no control characters (Cc) and no invisible format
characters (Cf: U+202E turns what follows around, U+200B is a space no one sees), everywhere
felab refused control characters."""

from __future__ import annotations

import re
import sys
import unicodedata
from pathlib import Path

import pytest
import yaml
from sqlalchemy.orm import Session

from felab_core.content.loader import parse_pack
from felab_core.db import models as m
from felab_core.engine.stream_shape import shown_text
from felab_core.engine.targets import (
    TargetError,
    check_model_name,
    load_targets,
    normalize_base_url,
)
from felab_core.errors import Invalid
from felab_core.people.members import set_server_model
from felab_core.text import holds_hidden, is_hidden, with_hidden_shown
from tests.db_support import CONTENT

HIDDEN = ["\x1b", "\x00", "\n", "\u202e", "\u200b", "\u2066", "\ufeff", "\u00ad", "\u200d"]


@pytest.mark.parametrize("char", HIDDEN)
def test_control_and_format_characters_are_hidden(char: str) -> None:
    assert is_hidden(char)
    assert holds_hidden(f"llama{char}3")


@pytest.mark.parametrize("text", ["m\ud800", "\udcffhf", "a\udfffb"])
def test_lone_surrogates_are_hidden_and_shown_as_question_marks(text: str) -> None:
    """Eighteenth sweep (a H2, c H1/H2): JSON's "\ud800" in a model id or a config name, and a
    file name's byte that is not UTF-8, passed every name check and stopped the printing or
    the saving of a run, a size or a memo with UnicodeEncodeError (exit 70)."""
    assert holds_hidden(text)
    shown = with_hidden_shown(text)
    assert "?" in shown and shown.encode("utf-8")


@pytest.mark.parametrize("text", ["llama3.1:8b", "Llama-3.1-8B-Instruct-4bit", "café ß 模型", ""])
def test_plain_text_holds_nothing_hidden(text: str) -> None:
    assert not holds_hidden(text)


def test_every_control_and_format_character_is_found() -> None:
    """holds_hidden passes printable text at once (str.isprintable): no Cc or Cf is printable."""
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        if unicodedata.category(char) in ("Cc", "Cf"):
            assert holds_hidden(f"a{char}b"), hex(code)


def test_allowed_characters_are_left_out() -> None:
    assert not holds_hidden("line one\n\tline two", allowed="\n\t")
    assert holds_hidden("line one\n\u202eowt enil", allowed="\n\t")


@pytest.mark.parametrize(
    ("model", "label", "said"),
    [
        ("llama\u202e", None, "model name .*: type it as the server shows it"),
        ("m", "l8b\u200b", "label .*: type it in plain characters"),  # not "as the server shows it"
    ],
)
def test_a_model_name_or_label_with_an_invisible_character_is_refused(
    db: Session, student: m.Member, model: str, label: str | None, said: str
) -> None:
    with pytest.raises(Invalid, match="holds invisible or control characters") as caught:
        set_server_model(db, student, "ollama", model, model_label=label)
    assert re.search(said, str(caught.value))


def test_bench_refuses_a_model_address_or_targets_entry_holding_one(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="--model holds invisible or control characters"):
        check_model_name("lla\u200bma", "--model")
    with pytest.raises(TargetError, match="invisible or control characters"):
        normalize_base_url("http://127.0.0.1:8080\u202e")
    targets = tmp_path / "targets.toml"
    targets.write_text('[targets.mine]\nurl = "http://127.0.0.1:8080"\nmodel = "m\u200b"\n')
    with pytest.raises(TargetError, match="invisible or control characters"):
        load_targets(targets)


def test_a_servers_words_are_shown_without_them() -> None:
    assert shown_text("bad \u202emodel\u200b name\x1b[0m") == "bad ?model? name?[0m"


def test_a_content_pack_holding_one_is_refused(tmp_path: Path) -> None:
    data = yaml.safe_load((CONTENT / "day-02.yaml").read_text(encoding="utf-8"))
    data["title"] = "Day 2 \u202ereversed"
    path = tmp_path / "day-02.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    pack, problems = parse_pack(path)
    assert pack is None
    assert any("invisible or control characters" in p.message for p in problems), problems


@pytest.mark.parametrize("name", ["@SUM(1)", "@cmd|' /C calc'!A0", "@A1+A2", "@x=1"])
def test_a_model_name_that_is_an_at_formula_is_refused(name: str) -> None:
    """Eighteenth sweep (a) M4: '@' is allowed at the start of a model's name (Cloudflare's are
    @cf/...), and "@SUM(1)" was written into the results CSV, where a spreadsheet runs it."""
    with pytest.raises(TargetError, match="begins with '@'"):
        check_model_name(name, "--model")
    assert check_model_name("@cf/meta/llama-3.1-8b", "--model") == "@cf/meta/llama-3.1-8b"
