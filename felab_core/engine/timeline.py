"""What happened to one request, stamped on one monotonic nanosecond clock.

Every metric felab reports is derived from these stamps afterwards (see metrics.py), so a
timeline can be built by hand in a test and the arithmetic checked exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NS = 1e9  # the stamps' nanoseconds in a second


@dataclass(slots=True)
class Chunk:
    """One streamed message: when its last byte was read, its size, the text it generated."""

    t_ns: int
    nbytes: int
    text: str = ""
    tokens: int | None = None  # when the server says how many tokens this message carried


@dataclass(slots=True)
class RequestTimeline:
    index: int
    turn: int | None = None  # a multi-turn session's turn, from 1
    # Open loop: when the schedule said to send. Closed loop: None.
    scheduled_ns: int | None = None
    # When the request's task began (open loop: late here means the client fell behind).
    started_ns: int | None = None
    # When the client was ready to send (after any concurrency-cap wait).
    dispatched_ns: int | None = None
    connect_start_ns: int | None = None
    connect_end_ns: int | None = None
    # When the request headers started to go out on the wire: "actual send".
    sent_ns: int | None = None
    headers_ns: int | None = None
    status: int | None = None
    chunks: list[Chunk] = field(default_factory=list)
    end_ns: int | None = None
    done: bool = False
    error: str | None = None
    usage: dict[str, int] | None = None
    server_timings: dict[str, float] | None = None
    finish_reason: str | None = None
    sse_comments: int = 0
    usage_tokens_seen: int = 0  # running completion_tokens from per-chunk usage
    request_bytes: int = 0  # the body sent: a prompt's tokens are at most its bytes
    prompt_bytes: int = 0  # the UTF-8 bytes of the newest prompt text: its tokens' least
    asked_tokens: int | None = None  # the most output tokens the request asked for
    # Per read: how long after the kernel got the bytes felab's loop got to them (0 without
    # kernel stamps). The client's own lag, kept out of the arrival times but reported.
    stamp_lag_ns: list[int] = field(default_factory=list)
    warmup: bool = False
    retries: int = 0  # resent once because a reused keep-alive connection was already closed
    tool_call: bool = False  # the answer held a tool call (a --tools run asks for one)

    def reset_for_retry(self) -> None:
        """Forget the attempt that never reached the server; the retry is timed from scratch."""
        self.retries += 1
        self.sent_ns = self.headers_ns = self.end_ns = None
        self.chunks.clear()
        self.error = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def content_chunks(self) -> list[Chunk]:
        return [c for c in self.chunks if c.text]

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "scheduled_ns": self.scheduled_ns,
            "started_ns": self.started_ns,
            "dispatched_ns": self.dispatched_ns,
            "connect_start_ns": self.connect_start_ns,
            "connect_end_ns": self.connect_end_ns,
            "sent_ns": self.sent_ns,
            "headers_ns": self.headers_ns,
            "status": self.status,
            "end_ns": self.end_ns,
            "error": self.error,
            "usage": self.usage,
            "server_timings": self.server_timings,
            "finish_reason": self.finish_reason,
            "retries": self.retries,
        }
