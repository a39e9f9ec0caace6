"""A command line felab suggests quotes the text a person gave as a POSIX shell would read it:
`size capacity --model "a'b $(id)"` had suggested `felab size kv --model "a'b $(id)"` (repr's
double quotes), which, pasted, runs `id`. Likewise `felab bench KIND --url URL` after a server of
another kind, and the memo's `rerun felab bench TARGET`. Text a reader cannot see, too long or
empty, is not repeated: a placeholder stands in."""

from __future__ import annotations

import re
import shlex

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.engine.probe import IdentityError, ServerIdentity, check_identity
from felab_core.engine.server_kinds import ServerKind
from felab_core.engine.targets import DEFAULT_TARGETS, resolve_target
from felab_core.reports.memo import build_memo, render_markdown
from felab_core.text import shell_word
from tests.reports.conftest import MAC_INPUTS, blank_row

HOSTILE = ["a'b $(id)", 'x"; rm -rf ~', "`id`", "a b", "it's", "$HOME", "!!"]


@pytest.mark.parametrize("text", [*HOSTILE, "llama-3.1-8b", "./models/foo", "a.gguf"])
def test_a_word_reads_back_as_typed(text: str) -> None:
    assert shlex.split(shell_word(text, "NAME")) == [text]


@pytest.mark.parametrize("text", ["", "  ", "a\nb", "a\x1b[31mb", "x" * 81, "a\u202eb"])
def test_text_that_cannot_be_repeated_is_a_placeholder(text: str) -> None:
    assert shell_word(text, "NAME") == "NAME"


def _suggested(out: str, start: str) -> list[str]:
    found = re.search(rf"`({re.escape(start)}[^`]*)`", " ".join(out.split()))
    assert found, out
    return shlex.split(found.group(1))


@pytest.mark.parametrize("text", [t for t in HOSTILE if "`" not in t])  # ` ends the quote
def test_size_capacity_suggests_size_kv_shell_quoted(text: str) -> None:
    result = CliRunner().invoke(app, ["size", "capacity", "--model", text], env={"COLUMNS": "250"})
    assert result.exit_code == 2, result.output
    assert _suggested(result.output, "felab size kv") == ["felab", "size", "kv", "--model", text]
    # shlex reads "a'b $(id)" back too; a shell expands $(id) inside double quotes: only '...'
    assert f"`felab size kv --model {shlex.quote(text)}`" in " ".join(result.output.split())


def test_size_capacity_with_an_empty_model_suggests_a_placeholder() -> None:
    result = CliRunner().invoke(app, ["size", "capacity", "--model="], env={"COLUMNS": "250"})
    assert result.exit_code == 2, result.output
    assert "`felab size kv --model NAME`" in result.output


def test_bench_of_another_kind_suggests_a_quoted_url() -> None:
    url = "http://127.0.0.1:8080/v1/$(id)"
    target = resolve_target("mlx", targets=DEFAULT_TARGETS, url=url)
    with pytest.raises(IdentityError) as caught:
        check_identity(target, ServerIdentity(kind=ServerKind.VLLM, evidence="its /version"))
    words = _suggested(str(caught.value), "felab bench")
    assert words[:4] == ["felab", "bench", "vllm", "--url"] and "$(id)" in words[4]
    assert len(words) == 5
    assert f"--url '{url}'`" in str(caught.value)  # in '...': a shell runs no $(id)


def test_the_memo_suggests_a_quoted_target() -> None:
    target = "box; rm -rf ~"
    row = blank_row(
        timestamp="2025-06-09T10:05:00+00:00",
        host="mac",
        target=target,
        server="llamacpp",
        model="llama3.1:8b",
        preset="day2",
        concurrency="1",
        requests="8",
        ok="0",
        failed="8",
        writing_tps_p50="",
    )
    text = render_markdown(build_memo([row], MAC_INPUTS))
    assert _suggested(text, "felab bench") == ["felab", "bench", target]
