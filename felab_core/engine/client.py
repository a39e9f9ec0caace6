"""The streaming HTTP client: one request in, one fully stamped timeline out, never an exception.

Built on httpx with a pool sized to the run's concurrency (no 100-stream cap) and keep-alive.
Stamps come from httpcore's trace hooks (connect, request headers on the wire, response headers)
and from each network read, on `time.monotonic_ns`, the clock a server on the same machine can
stamp with too.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import json
import re
import ssl
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from felab_core.bounded_get import first_bytes
from felab_core.engine.apis import ApiAdapter, StreamProtocolError
from felab_core.engine.framing import FrameTooLarge
from felab_core.engine.netbackend import RX_STAMP_INFO, LeanTransport
from felab_core.engine.stream_shape import (
    HEAD_BYTES,
    asked_tokens,
    most_messages,
    not_a_stream,
    shown_text,
)
from felab_core.engine.timeline import Chunk, RequestTimeline
from felab_core.engine.token_counts import UNSHOWN_TOKENS
from felab_core.redact import redact, url_without_credentials

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


#: What a status usually means for a benchmark, after the server's own words.
_STATUS_ADVICE = {
    401: "the server wants an API key (vLLM and SGLang --api-key); felab sends none: time a "
    "server started without one",
    403: "the server refused this client (an API key, or an address it does not allow)",
    429: "the server (or a gateway) limits requests: lower -c or --rate",
    503: "the server is not ready (still loading the model?) or overloaded: wait, then again",
}


#: A 401 when the URL held a user and password: httpx sent them as Basic auth.
_REFUSED_LOGIN = (
    "the server refused the user and password in the URL (sent as Basic auth): check them, or "
    "drop them if the server wants an API key instead (vLLM and SGLang --api-key)"
)


def server_error_message(
    status: int, body: bytes, retry_after: str | None = None, *, sent_login: bool = False
) -> str:
    """The server's own words for a 4xx/5xx, whatever shape it wraps them in, and what the
    status usually means (and how long the server asked to be left alone, if it said)."""
    text = body.decode("utf-8", errors="replace").strip()
    message = text
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        obj = None
    if isinstance(obj, dict):
        err = obj.get("error", obj.get("detail", obj.get("message")))
        if isinstance(err, dict):
            err = err.get("message") or err.get("msg") or err
        if isinstance(err, list) and err and isinstance(err[0], dict):  # FastAPI validation
            err = "; ".join(str(e.get("msg", e)) for e in err)
        if err is not None:
            message = str(err)
    said = f"HTTP {status}: {shown_text(message) or '(empty body)'}"
    advice = _REFUSED_LOGIN if status == 401 and sent_login else _STATUS_ADVICE.get(status)
    wait = shown_text(retry_after or "", 40)
    # seconds up to a day, or an HTTP date: anything else (-5, twenty digits) is not repeated
    seconds_ok = wait.isdigit() and int(wait) <= 86_400
    if not seconds_ok and "GMT" not in wait:
        wait = ""
    if wait:
        wait_text = f"it asked to wait {wait}" + (" s" if wait.isdigit() else "")
        advice = f"{advice}; {wait_text}" if advice else wait_text
    return f"{said}; {advice}" if advice else said


#: How much of an error's body is read (a 100 MB body took 1.4 GB of memory).
_ERROR_BODY_BYTES = 64 * 1024


def _root_cause(exc: BaseException) -> BaseException:
    seen = exc
    while seen.__cause__ is not None or seen.__context__ is not None:
        nxt = seen.__cause__ or seen.__context__
        assert nxt is not None
        seen = nxt
    return seen


def connect_failure(exc: BaseException, host: str) -> str:
    """Name the usual connect failures plainly: refused, unresolvable, TLS to plain HTTP, or
    something else. `host` is shown without any credentials it holds."""
    host = url_without_credentials(host)
    if "@" in host and "://" not in host:
        host = host.rsplit("@", 1)[1]
    cause = _root_cause(exc)
    text = str(exc) or str(cause)
    lowered = f"{text} {cause}".lower()
    code = getattr(cause, "errno", None)
    if (
        "wrong_version_number" in lowered
        or "record layer" in lowered
        or ("ssl" in lowered and "unexpected eof" in lowered)
    ):
        return (
            f"TLS failed: {host} does not answer https:// (it speaks plain HTTP?): use http:// "
            "in the URL"
        )
    if "handshake" in lowered and "timed out" in lowered:
        return (
            f"TLS failed: {host} took the connection but never finished the TLS handshake (it "
            "speaks plain HTTP, or is not listening for TLS?): use http:// in the URL, or check "
            "the port"
        )
    if "certificate verify failed" in lowered:
        return (
            f"TLS failed: the certificate of {host} is not trusted (self-signed?): use a "
            "certificate from a known authority, or http:// on a trusted network"
        )
    if code == errno.ECONNREFUSED or "refused" in lowered or "all connection attempts" in lowered:
        return (
            f"connection refused: nothing listens at {host}; start the server "
            "(for example `felab serve llamacpp --model ...`) or check the port"
        )
    unresolved = "name" in lowered and ("resolution" in lowered or "known" in lowered)
    if unresolved or "nodename" in lowered:
        return f"DNS failure: cannot resolve the host in {host}; check the URL"
    if isinstance(exc, httpx.ReadTimeout):
        return (
            f"no answer: {host} took the connection but sent nothing back in time; is it the "
            "server you meant, and has it finished starting?"
        )
    if isinstance(exc, httpx.RemoteProtocolError | httpx.LocalProtocolError):
        return f"not HTTP: {host} answered with something other than HTTP ({text}); check the port"
    return f"connect error: {host}: {text}"


def protocol_error_text(exc: BaseException) -> str:
    """What the HTTP parser refused, in one short ASCII line (not a Python bytearray's repr)."""
    shown = re.sub(r"bytearray\(b('.*?')\)", r"\1", str(exc))[:160]
    return shown.encode("ascii", "backslashreplace").decode()


def describe_error(exc: BaseException, url: str, tl: RequestTimeline, limits: ClientLimits) -> str:
    """One line a person can act on. The text before the first colon is the error's kind."""
    host = urlsplit(url_without_credentials(url)).netloc or url_without_credentials(url)
    got = len(tl.content_chunks())
    if isinstance(exc, httpx.ConnectTimeout):
        if url.startswith("https://"):
            return (
                f"connect timeout: no TLS connection to {host} within {limits.connect:g} s; if "
                "the server speaks plain HTTP, use http:// instead of https://"
            )
        return f"connect timeout: no connection to {host} within {limits.connect:g} s"
    if isinstance(exc, httpx.ConnectError):
        return connect_failure(exc, host)
    if isinstance(exc, httpx.ReadTimeout):
        if tl.done:  # the stream said it was over, then the body never ended
            return (
                f"stalled: the server ended the stream ([DONE] after {got} content chunks) but "
                f"not its HTTP body, and sent nothing for {limits.stall:g} s (a Content-Length "
                "longer than what it sent, or a proxy holding the body open?): check the server"
            )
        return (
            f"stalled: no bytes for {limits.stall:g} s after {got} content chunks "
            "(raise --stall-timeout if the server is just slow)"
        )
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return f"timeout: the request took longer than --timeout {limits.total:g} s"
    if isinstance(exc, httpx.TimeoutException):
        return f"timeout: {type(exc).__name__} talking to {host}"
    if isinstance(exc, httpx.RemoteProtocolError):
        text = str(exc)
        if tl.status is None and "disconnected" not in text.lower():
            # No response came: h11 refused what came instead (a status line of "abc").
            return (
                f"not HTTP: {host} did not answer with an HTTP response "
                f"({protocol_error_text(exc)}); check the port"
            )
        return (
            f"disconnected: the server closed the connection mid-stream after {got} content "
            f"chunks ({exc})"
        )
    if isinstance(exc, httpx.ReadError | httpx.WriteError):
        return f"connection lost: {type(exc).__name__} after {got} content chunks ({exc})"
    if isinstance(exc, StreamProtocolError):
        return f"malformed stream: message {len(tl.chunks) + 1}: {exc}"
    if isinstance(exc, httpx.HTTPError):
        return f"http error: {type(exc).__name__}: {exc}"
    return f"client error: {type(exc).__name__}: {exc}"


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
    if tl.end_ns is None:
        tl.end_ns = now_ns()
    if tl.sent_ns is None:
        tl.sent_ns = tl.dispatched_ns
    return tl


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
    most = most_messages(payload)
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
                sent_login="authorization" in resp.request.headers,
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
        last_message_ns = now_ns()  # bytes that hold no message (keep-alive comments) are no
        try:  # progress: a queue that only pings stalls like a silent one
            async for piece in resp.aiter_raw():
                seen = now_ns()
                # The kernel's arrival stamp of the read that completed this piece, if any.
                t = net.get_extra_info(RX_STAMP_INFO) if net is not None and kernel_stamps else seen
                tl.stamp_lag_ns.append(seen - t)
                if len(head) < HEAD_BYTES:
                    head += piece[: HEAD_BYTES - len(head)]
                messages = 0
                for frame in decoder.feed(piece):
                    messages += 1
                    _record(adapter, tl, frame.data, t, adapter.interpret(frame))
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
                else:  # counted now: a request that then times out still says what came
                    tl.sse_comments = getattr(decoder, "comments", 0)
                    if seen - last_message_ns > stall_s * 1e9:
                        tl.end_ns = seen
                        tl.error = (
                            f"stalled: only keep-alive bytes, no message, for {stall_s:g} s "
                            f"after {len(tl.content_chunks())} content chunks (raise "
                            "--stall-timeout if the server is just slow)"
                        )
                        return
        except FrameTooLarge as exc:
            tl.end_ns = now_ns()
            tl.error = not_a_stream(head, resp.headers.get("content-type", "")) or str(exc)
            return
        except StreamProtocolError:
            if not tl.chunks and not_a_stream(head, resp.headers.get("content-type", "")):
                tl.end_ns = now_ns()
                tl.error = not_a_stream(head, resp.headers.get("content-type", ""))
                return
            raise
        tl.end_ns = now_ns()
        if not tl.chunks:
            wrong = not_a_stream(head, resp.headers.get("content-type", ""))
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


def _record(adapter: ApiAdapter, tl: RequestTimeline, data: str, t: int, info: Any) -> None:
    if info.error:
        tl.error = f"server error in stream: {shown_text(str(info.error))}"
    chunk = Chunk(t_ns=t, nbytes=len(data), text=info.text)
    tl.chunks.append(chunk)
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
