"""The streaming HTTP client: one request in, one fully stamped timeline out, never an exception.

Built on httpx with a pool sized to the run's concurrency (no 100-stream cap) and keep-alive.
Stamps come from httpcore's trace hooks (connect, request headers on the wire, response headers)
and from each network read, on `time.monotonic_ns`, the clock a server on the same machine can
stamp with too.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
from dataclasses import dataclass
from typing import Any

import httpx

from felab_core.bounded_get import first_bytes
from felab_core.engine.apis import ApiAdapter, StreamProtocolError
from felab_core.engine.framing import FrameTooLarge, NDJSONDecoder
from felab_core.engine.netbackend import RX_STAMP_INFO, LeanTransport
from felab_core.engine.request_errors import (
    describe_error,
    login_sent,
    server_error_message,
)
from felab_core.engine.stream_shape import (
    HEAD_BYTES,
    asked_tokens,
    most_messages,
    most_text_chars,
    not_a_stream,
    prompt_bytes,
    shown_text,
)
from felab_core.engine.timeline import Chunk, RequestTimeline
from felab_core.engine.token_counts import UNSHOWN_TOKENS
from felab_core.redact import redact

now_ns = time.monotonic_ns


#: The longest any one request may be allowed (a day).
MAX_LIMIT_S = 86_400.0
#: Below this a limit is a typo: no server answers, nor sends its next bytes, in microseconds.
MIN_LIMIT_S = 0.01


@dataclass(frozen=True, slots=True)
class ClientLimits:
    """Time limits for one request, in seconds."""

    total: float = 600.0  # the whole request (--timeout)
    stall: float = 60.0  # longest silence between two reads before the stream counts as stalled
    connect: float = 10.0

    def validate(self) -> None:
        """Each limit from MIN_LIMIT_S to a day: NaN, infinity, -1 or 1e-300 are typos, not
        limits (a stall timeout of 1e-300 s called every server stalled)."""
        for flag, value in (("--timeout", self.total), ("--stall-timeout", self.stall)):
            if not MIN_LIMIT_S <= value <= MAX_LIMIT_S:
                raise ValueError(
                    f"{flag} must be from {MIN_LIMIT_S:g} s to {MAX_LIMIT_S:,.0f} s (a day)"
                )


@functools.cache
def _tls_context() -> ssl.SSLContext:
    # One context for every client: building one loads the CA bundle, milliseconds each.
    return ssl.create_default_context()


def make_client(concurrency: int | None, limits: ClientLimits) -> httpx.AsyncClient:
    """A pool with one keep-alive connection per in-flight stream; None means no cap at all."""
    pool = httpx.Limits(
        max_connections=concurrency,
        max_keepalive_connections=concurrency,
        keepalive_expiry=30.0,
    )
    timeout = httpx.Timeout(limits.total, connect=limits.connect, read=limits.stall, pool=None)
    return httpx.AsyncClient(
        transport=LeanTransport(limits=pool, ssl_context=_tls_context()),
        timeout=timeout,
        trust_env=False,
        # Each chunk is timed as its bytes arrive: a compressed stream hides its chunks until a
        # block of them decompresses (httpx asks for gzip unless told otherwise).
        headers={"Accept-Encoding": "identity"},
    )


class Lanes:
    """Keep-alive connections handed out one per in-flight stream.

    Each lane is a one-connection client. A single shared httpx pool would do the same job, but
    httpcore rescans every pooled connection whenever a request starts or ends, which at 256
    streams cost more CPU than reading the streams and delayed every timestamp.
    """

    def __init__(self, limits: ClientLimits) -> None:
        self._limits = limits
        self._free: list[httpx.AsyncClient] = []
        self._all: list[httpx.AsyncClient] = []

    def acquire(self) -> httpx.AsyncClient:
        if self._free:
            return self._free.pop()
        client = make_client(1, self._limits)
        self._all.append(client)
        return client

    def release(self, client: httpx.AsyncClient) -> None:
        self._free.append(client)

    async def aclose(self) -> None:
        await asyncio.gather(*(c.aclose() for c in self._all), return_exceptions=True)
        self._all.clear()
        self._free.clear()

    async def __aenter__(self) -> Lanes:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


ANSWERED_EARLY = (
    "answered early: the server answered before felab finished sending the request (a cache, "
    "a proxy or a replay, not a model generating): there is no time to first token to read; "
    "time the model server itself"
)

#: How much of an error's body is read (a 100 MB body took 1.4 GB of memory).
_ERROR_BODY_BYTES = 64 * 1024


async def stream_request(
    client: httpx.AsyncClient,
    url: str,
    adapter: ApiAdapter,
    payload: dict[str, Any],
    tl: RequestTimeline,
    limits: ClientLimits,
) -> RequestTimeline:
    """Send one streaming request and fill `tl` in place; errors land in `tl.error`."""

    async def trace(event: str, info: dict[str, Any]) -> None:
        t = now_ns()
        if event == "connection.connect_tcp.started":
            tl.connect_start_ns = t
        elif event == "connection.connect_tcp.complete":
            tl.connect_end_ns = t
        elif event == "http11.send_request_headers.started":
            tl.sent_ns = t
        elif event == "http11.receive_response_headers.complete":
            tl.headers_ns = t

    if tl.dispatched_ns is None:
        tl.dispatched_ns = now_ns()
    try:
        async with asyncio.timeout(limits.total):
            try:
                await _stream(client, url, adapter, payload, tl, trace, limits.stall)
            except httpx.RemoteProtocolError:
                if not _unanswered_on_reused_connection(tl):
                    raise
                # The server closed an idle keep-alive connection just as this request went out
                # on it; it never saw the request. Send it once more, on a fresh connection.
                tl.reset_for_retry()
                await _stream(client, url, adapter, payload, tl, trace, limits.stall)
    except BaseException as exc:
        if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
            tl.error = "cancelled: the run was stopped before this request finished"
            tl.end_ns = tl.end_ns or now_ns()
            raise
        tl.error = tl.error or describe_error(exc, url, tl, limits)
    if answered_early(tl):  # before a lost connection: a server that writes on connect may
        # close it before the request is read, and the chunks it left are not a TTFT either
        tl.error = ANSWERED_EARLY + (f" (then {tl.error})" if tl.error else "")
        tl.chunks.clear()
    if tl.end_ns is None:
        tl.end_ns = now_ns()
    if tl.sent_ns is None:
        tl.sent_ns = tl.dispatched_ns
    return tl


def answered_early(tl: RequestTimeline) -> bool:
    """Whether the kernel had the answer before felab began to send the request (a server
    that writes on connect: a cache, a proxy, a replay): its times would be negative, not a
    TTFT. The first chunk's stamp is the kernel's, the send's is taken in Python after the
    write: an honest answer on a busy machine may be stamped before the body's write returns
    (14 of 60 scripted requests were), never before the request's first byte was sent."""
    return bool(tl.chunks) and tl.sent_ns is not None and tl.chunks[0].t_ns < tl.sent_ns


def _unanswered_on_reused_connection(tl: RequestTimeline) -> bool:
    return tl.retries == 0 and tl.connect_start_ns is None and tl.status is None


async def _stream(
    client: httpx.AsyncClient,
    url: str,
    adapter: ApiAdapter,
    payload: dict[str, Any],
    tl: RequestTimeline,
    trace: Any,
    stall_s: float,
) -> None:
    decoder = adapter.decoder()
    ndjson = isinstance(decoder, NDJSONDecoder)
    most = most_messages(payload)
    most_text = most_text_chars(payload)
    text_chars = 0
    tl.asked_tokens = asked_tokens(payload)
    tl.prompt_bytes = prompt_bytes(payload)
    async with client.stream("POST", url, json=payload, extensions={"trace": trace}) as resp:
        tl.status = resp.status_code
        tl.request_bytes = int(resp.request.headers.get("content-length") or 0)
        if tl.headers_ns is None:
            tl.headers_ns = now_ns()
        if 300 <= resp.status_code < 400:
            tl.end_ns = now_ns()
            where = shown_text(redact(resp.headers.get("location", "") or "(no Location)"), 200)
            where = where[:200]
            tl.error = (
                f"redirect: the server answered HTTP {resp.status_code} pointing to {where}; "
                "felab does not follow redirects: give the server's own address"
            )
            return
        if resp.status_code >= 400:
            body = await first_bytes(resp, _ERROR_BODY_BYTES)
            tl.end_ns = now_ns()
            tl.error = server_error_message(
                resp.status_code,
                body,
                resp.headers.get("retry-after"),
                sent_login=login_sent(resp.request.headers),
                asked=(adapter.api, resp.request.url.path),
            )
            return
        encoding = resp.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            tl.end_ns = now_ns()
            tl.error = (
                f"compressed: the server sent the stream {shown_text(encoding, 40)}-compressed "
                "although felab asked for none (a proxy in between?); a compressed stream hides "
                "when each token arrived: time the server directly, or turn compression off"
            )
            return
        net = resp.extensions.get("network_stream")
        kernel_stamps = net is not None and net.get_extra_info(RX_STAMP_INFO) is not None
        head = b""
        indexed: set[bool] = set()  # whether the stream's choices said index 0, or none
        # Bytes that hold no message (keep-alive comments), and messages that carry nothing
        # (`data: {}`, empty deltas, role-only chunks, `event: ping`), are no progress: a queue
        # that only pings stalls like a silent one.
        last_message_ns = now_ns()
        empty_messages = 0
        try:
            async for piece in resp.aiter_raw():
                seen = now_ns()
                # The kernel's arrival stamp of the read that completed this piece, if any.
                t = net.get_extra_info(RX_STAMP_INFO) if net is not None and kernel_stamps else seen
                tl.stamp_lag_ns.append(seen - t)
                if len(head) < HEAD_BYTES:
                    head += piece[: HEAD_BYTES - len(head)]
                messages = 0
                for frame in decoder.feed(piece):
                    if tl.done:  # 3,000 chunks after [DONE] had read as "did not stop"
                        tl.error = (
                            f"malformed stream: the server kept sending after its end marker "
                            f"([DONE], or done: true) at message {len(tl.chunks)}: check the server"
                        )
                        tl.end_ns = t
                        return
                    info = adapter.interpret(frame)
                    if (two := _two_answers(info, tl, indexed)) is not None:
                        tl.error, tl.end_ns = two, t
                        return
                    if _carries_something(info):
                        messages += 1
                    else:
                        empty_messages += 1
                    _record(adapter, tl, frame.data, t, info)
                    text_chars += len(info.text)
                    if text_chars > most_text:  # 60 "tokens" of 15 MB each took 2.7 GB
                        tl.error = (
                            f"malformed stream: the server sent over {most_text:,} characters "
                            f"of text for {asked_tokens(payload) or 'the'} tokens asked; no "
                            "token is that long: check the server"
                        )
                    if len(tl.chunks) > most:  # an endless stream grew to GBs
                        tl.error = (
                            f"the server did not stop: over {most:,} messages for "
                            f"{asked_tokens(payload) or 'the'} tokens asked, and no end of "
                            "the stream; is it ignoring max_tokens?"
                        )
                    if tl.error:
                        tl.end_ns = t
                        return
                if messages:
                    last_message_ns = seen
                    empty_messages = 0
                else:  # counted now: a request that then times out still says what came
                    tl.sse_comments = getattr(decoder, "comments", 0)
                    if seen - last_message_ns > stall_s * 1e9:
                        tl.end_ns = seen
                        what = (  # comments, or parts of a message that never ends
                            f"only messages that carry nothing ({empty_messages:,} empty "
                            "chunks or pings: no text, usage or end),"
                            if empty_messages
                            else "only keep-alive comments, no message,"
                            if tl.sse_comments
                            else "bytes but no whole message (a line dripped a piece at a time?)"
                        )
                        tl.error = (
                            f"stalled: {what} for {stall_s:g} s after "
                            f"{len(tl.content_chunks())} content chunks (raise "
                            "--stall-timeout if the server is just slow)"
                        )
                        return
        except FrameTooLarge as exc:
            tl.end_ns = now_ns()
            tl.error = not_a_stream(
                head, resp.headers.get("content-type", ""), ndjson=ndjson
            ) or str(exc)
            return
        except StreamProtocolError:
            if not tl.chunks and not_a_stream(
                head, resp.headers.get("content-type", ""), ndjson=ndjson
            ):
                tl.end_ns = now_ns()
                tl.error = not_a_stream(head, resp.headers.get("content-type", ""), ndjson=ndjson)
                return
            raise
        tl.end_ns = now_ns()
        if not tl.chunks:
            wrong = not_a_stream(head, resp.headers.get("content-type", ""), ndjson=ndjson)
            if wrong:
                tl.error = wrong
                return
    leftover = decoder.close()
    if leftover is not None and not tl.done:
        # A last message without its terminator: keep it, but the stream was cut short.
        _record(adapter, tl, leftover.data, tl.end_ns, adapter.interpret(leftover))
    tl.sse_comments = getattr(decoder, "comments", 0)
    if not tl.done and tl.error is None and not tl.chunks and head.strip():
        # Bytes came, but not one message: binary or other text, not a cut-short stream.
        tl.error = (
            f"not a token stream: the server sent {head[:40]!r}... and not one message felab "
            "reads (SSE data: lines or JSON lines); check the URL and --api"
        )
    if not tl.done and tl.error is None:
        tl.error = (
            f"truncated: the stream ended without its final message ({adapter.end_marker}) "
            f"after {len(tl.content_chunks())} content chunks"
        )
    if tl.error is None and not tl.content_chunks():
        counted = (tl.usage or {}).get("completion_tokens")
        if isinstance(counted, int) and counted > UNSHOWN_TOKENS:
            # Tokens counted past what a server keeps unshown (an end of turn, a stop string)
            # but no text read: most often the wrong --api for this stream.
            tl.error = (
                f"no text: the server counted {counted} generated tokens but sent none felab "
                f"reads as --api {adapter.api.value}; check --api (openai-chat streams "
                "choices[].delta.content, openai-completions choices[].text)"
            )
        else:
            tl.error = (
                "empty answer: the stream ended without a single token, so there is nothing to "
                "time (a model that stops at once, or a server that generates nothing)"
            )


def _two_answers(info: Any, tl: RequestTimeline, indexed: set[bool]) -> str | None:
    """Why a stream holds more than the one answer asked (n>1), where its choices say no
    index: some said index 0 and others none (two answers, one numbered), or text came after
    an answer without an index had ended (finish_reason). Both had been timed as one answer."""
    if info.unindexed is None:
        return None
    indexed.add(not info.unindexed)
    if len(indexed) == 2:
        return (
            "malformed stream: some choices say index 0 and others no index, so the stream "
            "holds more than the one answer asked (n=1): check the server's n or best_of settings"
        )
    if info.unindexed and info.text and tl.finish_reason is not None:
        return (
            f"malformed stream: text came after the answer ended (finish_reason "
            f"{shown_text(tl.finish_reason, 40)!r}) in choices that say no index: a second "
            "answer (n>1) would be counted with the first; check the server's n or best_of "
            "settings"
        )
    return None


def _carries_something(info: Any) -> bool:
    """Whether a message moves the answer on: text, a tool call, usage, timings, an end or an
    error. `data: {}`, an empty delta, a role-only chunk or a ping carries none of them."""
    return bool(
        info.text
        or info.tool_call
        or info.usage
        or info.timings
        or info.finish_reason
        or info.error
        or info.done
    )


def _record(adapter: ApiAdapter, tl: RequestTimeline, data: str, t: int, info: Any) -> None:
    if info.error:
        tl.error = f"server error in stream: {shown_text(str(info.error))}"
    chunk = Chunk(t_ns=t, nbytes=len(data), text=info.text)
    tl.chunks.append(chunk)
    tl.tool_call = tl.tool_call or info.tool_call
    if info.usage:
        tl.usage = {**(tl.usage or {}), **info.usage}
        running = info.usage.get("completion_tokens")
        if info.text and running is not None and running > tl.usage_tokens_seen:
            # Usage on every chunk (vLLM's continuous_usage_stats): this chunk's exact count.
            chunk.tokens = running - tl.usage_tokens_seen
        if running is not None:
            tl.usage_tokens_seen = max(tl.usage_tokens_seen, running)
    if info.timings:
        tl.server_timings = {**(tl.server_timings or {}), **info.timings}
    if info.finish_reason:
        tl.finish_reason = info.finish_reason
    if info.done:
        tl.done = True
