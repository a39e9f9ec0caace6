"""Text a member typed (a display name, a cohort or machine name), shown as typed in chat.

Chat messages are Markdown with mentions: a name such as `<@&123> Bob` or `**x**` would
otherwise become a role mention or bold type in every post that quotes it. `literal` keeps such
text inert in running text; `in_code` does the same inside a code block, where Markdown escapes
do not work. (The bot also sends every message with mentions disabled: this keeps names from
even looking like a mention.)
"""

from __future__ import annotations

import re

_MARKDOWN = re.compile(r"([\\*_~`|>#\[\]])")
ZERO_WIDTH_SPACE = "\u200b"


def literal(text: str) -> str:
    """`text` as it reads, for Markdown running text: markup escaped, no mention possible."""
    return _MARKDOWN.sub(r"\\\1", text).replace("@", "@" + ZERO_WIDTH_SPACE)


def in_code(text: str) -> str:
    """`text` for a code block: no backtick to close the block early, no mention."""
    return text.replace("`", "'").replace("@", "@" + ZERO_WIDTH_SPACE)
