"""Incremental framing of streamed response bodies: Server-Sent Events and NDJSON.

Bytes arrive in arbitrary pieces (one network read may hold half an event or ten of them). The
parsers here turn pieces into whole events and never raise on bad input: timing depends on
stamping each event with the read that completed it, and a fuzzed body must not crash a run.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Frame:
    """One complete message from the stream: an SSE event's data or one NDJSON line."""

    data: str
    event: str | None = None


def _split_lines(buf: bytes) -> tuple[list[bytes], bytes]:
    """Split on LF, CRLF or lone CR; return complete lines and the unfinished rest.

    A trailing CR is kept back: the LF that may complete a CRLF can arrive in the next read.
    """
    if b"\r" in buf:
        if buf.endswith(b"\r"):
            head, tail = buf[:-1], b"\r"
        else:
            head, tail = buf, b""
        head = head.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        parts = head.split(b"\n")
        rest = parts.pop() + tail
        return parts, rest
    parts = buf.split(b"\n")
    rest = parts.pop()
    return parts, rest


class SSEDecoder:
    """Server-Sent Events per the WHATWG rules that matter to LLM servers.

    Comment lines (": keepalive") are counted but yield nothing; `data:` lines of one event are
    joined with newlines; an event is dispatched on a blank line.
    """

    __slots__ = ("_buf", "_data", "_event", "comments")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[str] = []
        self._event: str | None = None
        self.comments = 0

    def feed(self, chunk: bytes) -> list[Frame]:
        lines, self._buf = _split_lines(self._buf + chunk)
        frames: list[Frame] = []
        for raw in lines:
            if not raw:
                if self._data:
                    frames.append(Frame("\n".join(self._data), self._event))
                self._data = []
                self._event = None
                continue
            line = raw.decode("utf-8", errors="replace")
            if line[0] == ":":
                self.comments += 1
                continue
            field, sep, value = line.partition(":")
            if sep and value.startswith(" "):
                value = value[1:]
            if field == "data":
                self._data.append(value)
            elif field == "event":
                self._event = value
            # id and retry carry nothing a benchmark needs.
        return frames

    def close(self) -> Frame | None:
        """Return an event left without its closing blank line, if any (a truncated stream)."""
        if self._buf:
            self.feed(b"\n")
        if self._data:
            frame = Frame("\n".join(self._data), self._event)
            self._data = []
            return frame
        return None


class NDJSONDecoder:
    """Newline-delimited JSON (Ollama's native API): one object per non-empty line."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, chunk: bytes) -> list[Frame]:
        lines, self._buf = _split_lines(self._buf + chunk)
        return [Frame(line.decode("utf-8", errors="replace")) for line in lines if line.strip()]

    def close(self) -> Frame | None:
        rest, self._buf = self._buf, b""
        if rest.strip():
            return Frame(rest.decode("utf-8", errors="replace"))
        return None
