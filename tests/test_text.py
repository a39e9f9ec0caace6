"""Names members type read as typed in chat: no mention, no markup, no escape from a code block."""

from __future__ import annotations

import re

from felab_core.text import in_code, literal

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
