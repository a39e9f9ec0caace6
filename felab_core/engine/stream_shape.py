"""What a response turned out to be, when it is not the token stream asked for: an HTML page,
one JSON answer, or a stream that does not stop where `max_tokens` says."""

from __future__ import annotations

from typing import Any

from felab_core.engine.workloads import MAX_TOKENS
from felab_core.redact import redact
from felab_core.text import with_hidden_shown

#: How much of a server's text is read to be shown: a 100 kB error page was redacted whole
#: before being cut to 300 characters (tens of seconds).
SHOWN_BYTES = 8 * 1024


def shown_text(text: str, most: int = 300) -> str:
    """A server's words as felab shows them: one line, no control or invisible characters (an
    escape code or a U+202E would reach the terminal, the record and chat), at most `most`
    characters, and no secret it repeats (`api_key=...`: felab_core.redact). Only the start is
    read: a secret cut in two past what is shown is never shown."""
    plain = with_hidden_shown(" ".join(redact(text[: max(most * 4, SHOWN_BYTES)]).split()))
    return plain if len(plain) <= most else plain[: most - 1] + "…"


def asked_tokens(payload: dict[str, Any]) -> int | None:
    """The most tokens the request asks for, in any API's words."""
    options = payload.get("options")
    for said in (
        payload.get("max_tokens"),
        payload.get("max_completion_tokens"),
        payload.get("n_predict"),
        options.get("num_predict") if isinstance(options, dict) else None,
    ):
        if isinstance(said, int) and not isinstance(said, bool) and said > 0:
            return said
    return None


def prompt_bytes(payload: dict[str, Any]) -> int:
    """The UTF-8 bytes of the newest prompt text the request sends (the last message of a
    chat, or a completion's prompt): text every server reads anew, cache or not."""
    said: Any = payload.get("prompt")
    messages = payload.get("messages")
    if isinstance(messages, list) and messages and isinstance(messages[-1], dict):
        said = messages[-1].get("content")
    return len(said.encode("utf-8", "surrogatepass")) if isinstance(said, str) else 0


def most_messages(payload: dict[str, Any]) -> int:
    """Messages a stream may send before it counts as one that never ends: four a token asked
    (a role, usage and empty deltas come too), and room for the rest."""
    return 4 * (asked_tokens(payload) or MAX_TOKENS) + 256


def most_text_chars(payload: dict[str, Any]) -> int:
    """Characters of answer a stream may send: a token is at most a few dozen characters
    (1,024 leaves room for any vocabulary's longest), and 64 Ki more for the rest."""
    return 1024 * (asked_tokens(payload) or MAX_TOKENS) + 65_536


#: Bytes of a response kept to say what it was when it was not a stream.
HEAD_BYTES = 512


def not_a_stream(head: bytes, content_type: str, *, ndjson: bool = False) -> str | None:
    """What came back instead of a token stream, in words (None: nothing recognisable).
    `ndjson`: the API reads NDJSON itself (Ollama's), so an NDJSON body is no wrong --api (two
    objects on a line had been told "use --api ollama", which was given)."""
    text = head.lstrip().decode("utf-8", "replace")
    lowered = text[:100].lower()
    if "html" in content_type.lower() or lowered.startswith(("<!doctype", "<html", "<")):
        return (
            "not an LLM server: the URL answered with an HTML page, not a token stream; check "
            "the address and port (a web server or a dashboard answered)"
        )
    first_line, _, rest = text.partition("\n")
    if (
        not ndjson
        and text.startswith("{")
        and (
            "ndjson" in content_type.lower()
            or (first_line.rstrip().endswith("}") and rest.startswith("{"))
        )
    ):  # one JSON object a line, streamed: had been called "one JSON answer"
        return (
            "an NDJSON stream (one JSON object a line, as Ollama's own API sends), not the "
            "server-sent events this --api reads: use --api ollama for Ollama's /api/chat"
        )
    if not ndjson and text.startswith("{") and ("json" in content_type.lower() or not content_type):
        return (
            "not streaming: the server sent one JSON answer instead of a stream; check that "
            f"this address speaks the API asked for (--api), and that it streams: "
            f"{shown_text(text, 120)!r}"
        )
    return None
