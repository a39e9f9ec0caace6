"""A GET that reads at most so many bytes and stops within its deadline.

The identity and sizing endpoints (/v1/models, /props, /slots, /metrics) answer in kilobytes.
A server that answers with an endless body instead (a misconfigured proxy, a hostile peer)
would otherwise be read whole: memory grows until the process is killed, and httpx's timeouts
never fire while bytes keep coming.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import httpx

#: More than any identity or metrics answer (a /metrics page is tens of kilobytes).
MAX_ANSWER_BYTES = 8 * 1024 * 1024


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

        return json.loads(self.content)

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


def get_bounded(
    client: httpx.Client, url: str, *, limit: int = MAX_ANSWER_BYTES, deadline_s: float = 10.0
) -> Answer:
    """GET `url`; httpx errors pass through (the callers say them in words)."""
    end = time.monotonic() + deadline_s
    with client.stream("GET", url) as resp:
        body = bytearray()
        cut = False
        for piece in resp.iter_bytes():
            body += piece
            if len(body) > limit or time.monotonic() > end:
                cut = True
                break
        return Answer(resp.status_code, resp.headers, bytes(body[:limit]), cut)


async def aget_bounded(
    client: httpx.AsyncClient,
    url: str,
    *,
    limit: int = MAX_ANSWER_BYTES,
    deadline_s: float = 10.0,
) -> Answer:
    """The asynchronous `get_bounded`."""
    body = bytearray()
    cut = False
    async with client.stream("GET", url) as resp:
        try:
            async with asyncio.timeout(deadline_s):
                async for piece in resp.aiter_bytes():
                    body += piece
                    if len(body) > limit:
                        cut = True
                        break
        except TimeoutError:
            cut = True
        return Answer(resp.status_code, resp.headers, bytes(body[:limit]), cut)
