"""Incremental framing of streamed response bodies: Server-Sent Events and NDJSON.

Bytes arrive in arbitrary pieces (one network read may hold half an event or ten of them). The
parsers here turn pieces into whole events and never raise on bad input, but one: a line or
an event longer than MAX_FRAME_BYTES (no LLM server sends one; a body that never ends a line
would otherwise fill memory). Timing depends on stamping each event with the read that
completed it, and a fuzzed body must not crash a run. Pieces without a line break are kept
aside, not joined, so a long line costs linear time.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The longest line or event a stream may send (a token chunk is tens to hundreds of bytes).
MAX_FRAME_BYTES = 16 * 1024 * 1024


class FrameTooLarge(Exception):
    """The body sent more than MAX_FRAME_BYTES without ending a line or an event."""


_BOM = "\ufeff".encode()


class _Lines:
    """Complete lines from pieces; the unfinished rest kept as a list until a break arrives."""

    __slots__ = ("_after_cr", "_held", "_size")

    def __init__(self) -> None:
        self._held: list[bytes] = []
        self._size = 0
        self._after_cr = False  # the last line ended with CR: an LF next is its CRLF's end

    def feed(self, chunk: bytes) -> list[bytes]:
        if self._after_cr and chunk:
            self._after_cr = False
            chunk = chunk.removeprefix(b"\n")
        if b"\n" not in chunk and b"\r" not in chunk:
            self._held.append(chunk)
            self._size += len(chunk)
            if self._size > MAX_FRAME_BYTES:
                raise FrameTooLarge(
                    f"not a token stream: the server sent {self._size:,} bytes without ending a "
                    "line"
                )
            return []
        lines, rest, self._after_cr = _split_lines(b"".join(self._held) + chunk)
        self._held = [rest] if rest else []
        self._size = len(rest)
        return lines

    def rest(self) -> bytes:
        held, self._held, self._size = b"".join(self._held), [], 0
        return held


@dataclass(frozen=True, slots=True)
class Frame:
    """One complete message from the stream: an SSE event's data or one NDJSON line."""

    data: str
    event: str | None = None


def _split_lines(buf: bytes) -> tuple[list[bytes], bytes, bool]:
    """Split on LF, CRLF or lone CR (the SSE rules' three line ends); return complete lines,
    the unfinished rest, and whether the last line ended with CR.

    A CR ends its line at once: a "\r\r" event is whole when it arrives (holding the last CR
    back for a possible LF had read such events one chunk late, the gap added to TTFT); an LF
    that then opens the next read is the rest of a CRLF, and the caller skips it.
    """
    if b"\r" in buf:
        after_cr = buf.endswith(b"\r")
        parts = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        return parts, parts.pop(), after_cr
    parts = buf.split(b"\n")
    rest = parts.pop()
    return parts, rest, False


class SSEDecoder:
    """Server-Sent Events per the WHATWG rules that matter to LLM servers.

    Comment lines (": keepalive") are counted but yield nothing; `data:` lines of one event are
    joined with newlines; an event is dispatched on a blank line.
    """

    __slots__ = ("_data", "_data_size", "_event", "_lines", "_started", "comments")

    def __init__(self) -> None:
        self._lines = _Lines()
        self._data: list[str] = []
        self._data_size = 0
        self._event: str | None = None
        self._started = False
        self.comments = 0

    def feed(self, chunk: bytes) -> list[Frame]:
        frames: list[Frame] = []
        for raw in self._lines.feed(chunk):
            if not self._started:
                # The stream's one leading byte-order mark is no part of its first field (the
                # SSE rules strip it): "\ufeffdata" had lost the first event, and its token.
                self._started = True
                raw = raw.removeprefix(_BOM)
            if not raw:
                if self._data:
                    frames.append(Frame("\n".join(self._data), self._event))
                self._data = []
                self._data_size = 0
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
                self._data_size += len(raw)
                if self._data_size > MAX_FRAME_BYTES:
                    raise FrameTooLarge(
                        f"not a token stream: the server sent an event of over "
                        f"{MAX_FRAME_BYTES:,} bytes"
                    )
            elif field == "event":
                self._event = value
            # id and retry carry nothing a benchmark needs.
        return frames

    def close(self) -> Frame | None:
        """Return an event left without its closing blank line, if any (a truncated stream)."""
        rest = self._lines.rest()
        if rest:  # a last line without its end may complete the event
            frames = self.feed(rest + b"\n")
            if frames:
                return frames[-1]
        if self._data:
            frame = Frame("\n".join(self._data), self._event)
            self._data = []
            return frame
        return None


class NDJSONDecoder:
    """Newline-delimited JSON (Ollama's native API): one object per non-empty line."""

    __slots__ = ("_lines",)

    def __init__(self) -> None:
        self._lines = _Lines()

    def feed(self, chunk: bytes) -> list[Frame]:
        lines = self._lines.feed(chunk)
        return [Frame(line.decode("utf-8", errors="replace")) for line in lines if line.strip()]

    def close(self) -> Frame | None:
        rest = self._lines.rest()
        if rest.strip():
            return Frame(rest.decode("utf-8", errors="replace"))
        return None
