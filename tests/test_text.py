"""Names members type read as typed in chat: no mention, no markup, no escape from a code block."""

from __future__ import annotations

import re

from felab_core.text import echo_of, in_code, literal

MENTION = re.compile(r"<@[!&]?[0-9]+>|@(everyone|here)")


def test_a_name_is_never_a_mention_or_markup() -> None:
    for name in ("<@&1> x", "<@123456789012345678>", "@everyone hi", "**bold** _it_ `code`"):
        shown = literal(name)
        assert not MENTION.search(shown)
        # What Discord renders: escapes and the zero-width space gone, the name as typed.
        assert re.sub(r"\\(.)", r"\1", shown).replace("\u200b", "") == name
    assert literal("Ada") == "Ada"


def test_in_a_code_block_no_backtick_closes_it() -> None:
    assert "`" not in in_code("```x```") and not MENTION.search(in_code("<@&1> @here"))


def test_an_echo_is_short_escaped_and_names_bytes_that_were_not_text() -> None:
    assert echo_of("Maybe") == "'Maybe'"
    assert echo_of("a\x1b[2J") == "'a\\x1b[2J'"  # an escape code is shown, not run
    assert echo_of("x" * 50) == repr("x" * 40) + "..."
    assert echo_of("ok\udcff") == "'ok\\xff' (bytes that are not UTF-8)"
    assert echo_of("\\udcff") == repr("\\udcff")  # typed backslashes stay as typed
