"""A GET that reads at most so many bytes and stops within its deadline.

The identity and sizing endpoints (/v1/models, /props, /slots, /metrics) answer in kilobytes.
A server that answers with an endless body instead (a misconfigured proxy, a hostile peer)
would otherwise be read whole: memory grows until the process is killed, and httpx's timeouts
never fire while bytes keep coming.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass

import httpx

#: More than any identity or metrics answer (a /metrics page is tens of kilobytes).
MAX_ANSWER_BYTES = 8 * 1024 * 1024


def direct_client(timeout: float) -> httpx.Client:
    """A client for a server the person named: straight to it, never through HTTP_PROXY or
    HTTPS_PROXY (as the timing client goes). A proxy in between had been sent the URL's user
    and password as Basic auth, and its own 403 was blamed on the server."""
    return httpx.Client(timeout=timeout, trust_env=False)


@dataclass(frozen=True)
class Answer:
    status_code: int
    headers: httpx.Headers
    content: bytes
    cut: bool  # the body was longer than the limit, or outlasted the deadline: not read whole

    def json(self) -> object:
        """The body as JSON; ValueError when it is not, or was not read whole."""
        if self.cut:
            raise ValueError("the answer was too long to be what was asked for")
        import json

        try:
            return json.loads(self.content)
        except RecursionError:  # [[[[...: a hostile server's answer, no identity or metrics
            raise ValueError("the answer is nested too deeply to be what was asked for") from None

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


def get_bounded(
    client: httpx.Client, url: str, *, limit: int = MAX_ANSWER_BYTES, deadline_s: float = 10.0
) -> Answer:
    """GET `url`; httpx errors pass through (the callers say them in words).

    The deadline holds for the headers too: a server that drips them a byte a second never
    trips httpx's read timeout (it times each read). The GET runs on a helper thread, which is
    left behind, reading on its own timeouts, when the deadline passes first."""
    done: list[Answer | BaseException] = []

    def fetch() -> None:
        end = time.monotonic() + deadline_s
        try:
            with client.stream("GET", url) as resp:
                body = bytearray()
                cut = False
                for piece in resp.iter_bytes():
                    body += piece
                    if len(body) > limit or time.monotonic() > end:
                        cut = True
                        break
                done.append(Answer(resp.status_code, resp.headers, bytes(body[:limit]), cut))
        except BaseException as exc:  # handed to the caller's thread as it is
            done.append(exc)

    worker = threading.Thread(target=fetch, name="felab-bounded-get", daemon=True)
    worker.start()
    worker.join(deadline_s + 1.0)  # the body's own deadline, and a second to close it
    if not done:
        raise httpx.ReadTimeout(f"no whole answer from {url} within {deadline_s:g} s")
    if isinstance(done[0], BaseException):
        raise done[0]
    return done[0]


#: The most one command's questions to a server take together: three answers dripped one
#: after another had each had 10 s (`size slots --url` ran past 30 s).
WHOLE_ASK_S = 15.0


class Deadline:
    """One deadline for several GETs of one command: each gets what is left of it."""

    def __init__(self, seconds: float | None = None) -> None:
        self.end = time.monotonic() + (WHOLE_ASK_S if seconds is None else seconds)

    def left(self) -> float:
        return max(0.05, self.end - time.monotonic())


async def aget_bounded(
    client: httpx.AsyncClient,
    url: str,
    *,
    limit: int = MAX_ANSWER_BYTES,
    deadline_s: float = 10.0,
) -> Answer:
    """The asynchronous `get_bounded`: the deadline covers the headers and the body."""
    body = bytearray()
    cut = False
    status: int | None = None
    headers: httpx.Headers | None = None
    connected = False

    async def trace(event: str, _info: object) -> None:
        nonlocal connected
        # a new connection's TCP handshake done, or a pooled one's request on its way
        connected = connected or event.startswith(
            ("connection.connect_tcp.complete", "http11.", "http2.")
        )

    try:
        async with asyncio.timeout(deadline_s):
            async with client.stream("GET", url, extensions={"trace": trace}) as resp:
                status, headers = resp.status_code, resp.headers
                async for piece in resp.aiter_bytes():
                    body += piece
                    if len(body) > limit:
                        cut = True
                        break
    except TimeoutError:
        if not connected:  # not even the TCP connection was made: no server said anything
            raise httpx.ConnectTimeout(f"no connection to {url} within {deadline_s:g} s") from None
        if status is None or headers is None:  # not even the headers came whole in time
            raise httpx.ReadTimeout(f"no answer from {url} within {deadline_s:g} s") from None
        cut = True
    assert status is not None and headers is not None
    return Answer(status, headers, bytes(body[:limit]), cut)


async def first_bytes(resp: httpx.Response, most: int) -> bytes:
    """At most `most` bytes of a streamed response's body; the rest is not read (the
    connection closes with the response): a server's 100 MB error page is not ours to hold."""
    body = b""
    async for piece in resp.aiter_bytes():
        body += piece[: most - len(body)]
        if len(body) >= most:
            break
    return body
