"""A streaming LLM server with a known schedule: felab's calibration source and test double.

It speaks the three APIs felab times (OpenAI chat, OpenAI completions, Ollama's NDJSON), sends
chunks on an absolute schedule (first chunk `ttft_s` after the request, then one every `itl_s`),
and stamps every send on `time.monotonic_ns`, the clock felab's client stamps with. Comparing
the two stamps measures the client's own error. It can also play a named server's identity
endpoints (persona) and misbehave on purpose (fault), which is how the error paths are tested
for servers that cannot run here (Ollama, SGLang).

Run it alone: `python -m felab_core.lab.scripted_server --port 9000 --itl-ms 20 --stamp`.

Long because it is the three wire protocols, the personas and the faults it plays, one server on
purpose: the tests and the calibration benchmark need every behaviour on one schedule and one
clock.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

now_ns = time.monotonic_ns

FAULTS = (
    "none",
    "http500",  # answer 500 with an OpenAI-style error body
    "http404",  # answer 404 with a plain-text body
    "malformed",  # a chunk that is not JSON
    "truncate",  # end the stream without [DONE] / done:true
    "disconnect",  # close the socket mid-stream, no terminating chunk
    "stall",  # stop sending mid-stream and keep the connection open
    "error_event",  # an {"error": ...} message inside the stream
)
PERSONAS = ("none", "llamacpp", "ollama", "vllm", "sglang", "mlx")


#: Connections the listening socket queues (the kernel caps it at net.core.somaxconn).
CONNECT_BACKLOG = 4096


@dataclass(slots=True)
class Script:
    """What the server does for every request."""

    ttft_s: float = 0.02
    itl_s: float = 0.01
    tokens_per_chunk: int = 1
    first_chunk_tokens: int | None = None  # a first chunk that carries more (or fewer) tokens
    default_max_tokens: int = 16
    role_chunk: bool = True  # OpenAI chat: first chunk is {role: assistant} with no content
    keepalive_comments: int = 0  # SSE ": keepalive" lines before the first token
    finish_on_last_content: bool = True  # finish_reason rides on the last content chunk
    usage_when_asked: bool = True  # usage chunk only if stream_options.include_usage
    stamp: bool = False  # put "@<send ns>@" at the start of each content chunk's text
    persona: str = "none"
    fault: str = "none"
    fault_after: int = 2  # content chunks sent before the fault
    fault_every: int = 1  # the fault hits every Nth streamed request (2: every other one)
    # Drop any second request on a connection unanswered: the keep-alive race, where a server
    # closes an idle connection just as the client sends on it.
    one_request_per_connection: bool = False
    cold_load_s: float = 0.0  # Ollama persona: load_duration reported on the first request
    model: str = "felab-scripted"
    version: str = "0.0-scripted"
    # A known prefill cost and prefix cache: each prompt word (one "token") not already cached
    # adds `prefill_s_per_token` to TTFT; a prompt's leading words shared with an earlier one
    # are cached in whole blocks of `cache_block` words and reported as cached_tokens.
    prefill_s_per_token: float = 0.0
    prefix_cache: bool = False
    ignores_tools: bool = False  # answers in prose even where a tool call is required
    cache_block: int = 16
    # A server still filling up: requests arriving in the first `ramp_s` after its first request
    # wait `ramp_extra_ttft_s` more for their first token (a steady-state window leaves them out).
    ramp_s: float = 0.0
    ramp_extra_ttft_s: float = 0.0
    # A server of limited capacity: at most `slots` streams at once, the rest wait their turn
    # (the wait shows in TTFT), as a batch-size-limited engine does. 0: no limit.
    slots: int = 0
    # The generation paths it serves (("/completion",): an old llama.cpp-style server that
    # speaks none of felab's APIs); None: the persona's own (PERSONA_PATHS). Another path is
    # answered with the persona's own 404.
    paths: tuple[str, ...] | None = None


#: Every generation path the scripted server can serve.
ALL_PATHS = ("/v1/chat/completions", "/v1/completions", "/api/chat")
#: The generation paths each persona serves, as the real server does: vLLM, SGLang and MLX
#: speak the OpenAI API only (a persona not named here serves all three).
PERSONA_PATHS = {
    "vllm": ALL_PATHS[:2],
    "sglang": ALL_PATHS[:2],
    "mlx": ALL_PATHS[:2],
}
#: The 404 each persona answers a path it does not serve with, as the real server words it.
PERSONA_404 = {
    "vllm": (b'{"detail":"Not Found"}', "application/json"),  # FastAPI's
    "sglang": (b'{"detail":"Not Found"}', "application/json"),
    "mlx": (b"Not Found", "text/plain"),  # mlx_lm.server's http.server handler
    "ollama": (b"404 page not found", "text/plain"),  # Go's gin
    "llamacpp": (
        b'{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}',
        "application/json",
    ),
}


@dataclass(slots=True)
class RequestLog:
    path: str
    received_ns: int
    body: dict[str, Any]
    sends_ns: list[int] = field(default_factory=list)  # every content chunk's send stamp
    faulty: bool = False  # the script's fault plays on this request


def _chunked(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


class ScriptedServer:
    def __init__(
        self,
        script: Script | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        reuse_port: bool = False,
    ):
        self.script = script or Script()
        self.host = host
        self.port = port
        # Several server processes on one port (SO_REUSEPORT: the kernel spreads connections),
        # so a benchmark of many client processes is not held back by one server process.
        self.reuse_port = reuse_port
        self.log: list[RequestLog] = []
        self._server: asyncio.Server | None = None
        self._served = 0
        self._streamed = 0
        self.active_streams = 0
        self.max_active_streams = 0
        self._writers: set[asyncio.StreamWriter] = set()
        self._seen_prompts: list[list[str]] = []
        self._first_request_ns: int | None = None
        self._slots: asyncio.Semaphore | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> ScriptedServer:
        # A backlog for a thousand streams connecting at once (asyncio's default of 100 made
        # the kernel reset connections past it: benchmarks/timing_accuracy.py --processes).
        self._server = await asyncio.start_server(
            self._handle,
            self.host,
            self.port,
            backlog=CONNECT_BACKLOG,
            reuse_port=self.reuse_port or None,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for w in list(self._writers):
                w.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None

    async def __aenter__(self) -> ScriptedServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- a server on its own thread, for synchronous callers (CLI tests, the demo) ---
    def start_in_thread(self) -> ScriptedServer:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            loop.run_until_complete(self.start())
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.stop())
            loop.close()

        self._thread = threading.Thread(target=run, name="scripted-server", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop_thread(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._thread = None

    # --- HTTP ---
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        answered = 0
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                received = now_ns()
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = [*lines[0].split(" ", 2), "", ""][:3]
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                length = int(headers.get("content-length", "0") or 0)
                raw = await reader.readexactly(length) if length else b""
                if answered and self.script.one_request_per_connection:
                    return  # closes without a response
                answered += 1
                keep_going = await self._route(method, path, raw, received, writer)
                if not keep_going:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()

    def _server_header(self) -> bytes:
        if self.script.persona == "mlx":
            return b"Server: BaseHTTP/0.6 Python/3.11\r\n"
        return b"Server: felab-scripted\r\n"

    async def _send_whole(
        self, writer: asyncio.StreamWriter, status: int, body: bytes, ctype: str
    ) -> None:
        reason = {200: "OK", 404: "Not Found", 500: "Internal Server Error"}.get(status, "X")
        writer.write(
            b"HTTP/1.1 %d %s\r\n%sContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s"
            % (status, reason.encode(), self._server_header(), ctype.encode(), len(body), body)
        )
        await writer.drain()

    async def _json(self, writer: asyncio.StreamWriter, obj: Any, status: int = 200) -> None:
        await self._send_whole(writer, status, json.dumps(obj).encode(), "application/json")

    async def _route(
        self, method: str, path: str, raw: bytes, received: int, writer: asyncio.StreamWriter
    ) -> bool:
        s = self.script
        path = path.split("?", 1)[0]
        if method == "GET":
            ident = self._identity(path)
            if ident is not None:
                await self._json(writer, ident)
            elif path in ("/health", "/"):
                await self._send_whole(writer, 200, b"ok", "text/plain")
            else:
                await self._send_whole(writer, 404, b"404 page not found", "text/plain")
            return True
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        log = RequestLog(path, received, body)
        self.log.append(log)
        if s.fault == "http500":
            err = {"error": {"message": "scripted failure: out of memory", "code": 500}}
            await self._json(writer, err, status=500)
            return True
        if s.fault == "http404":
            body404 = b"model 'x' not found, try pulling it first"
            await self._send_whole(writer, 404, body404, "text/plain")
            return True
        served = s.paths if s.paths is not None else PERSONA_PATHS.get(s.persona, ALL_PATHS)
        if path not in served or path not in ALL_PATHS:
            body404, ctype = PERSONA_404.get(s.persona, (b"no such route", "text/plain"))
            await self._send_whole(writer, 404, body404, ctype)
            return True
        if s.slots > 0:
            if self._slots is None:
                self._slots = asyncio.Semaphore(s.slots)
            async with self._slots:  # queued: the first token's clock starts when a slot frees
                return await self._stream(path, body, now_ns(), writer, log)
        return await self._stream(path, body, received, writer, log)

    async def _stream(
        self, path: str, body: dict[str, Any], start: int, writer: Any, log: RequestLog
    ) -> bool:
        self._streamed += 1
        log.faulty = self.script.fault != "none" and self._streamed % self.script.fault_every == 0
        self.active_streams += 1
        self.max_active_streams = max(self.max_active_streams, self.active_streams)
        try:
            if path == "/api/chat":
                return await self._stream_ollama(body, start, writer, log)
            return await self._stream_openai(path, body, start, writer, log)
        finally:
            self.active_streams -= 1

    def _identity(self, path: str) -> Any:
        s = self.script
        p = s.persona
        if path == "/v1/models":
            entry: dict[str, Any] = {"id": s.model, "object": "model", "created": 0}
            owner = {"llamacpp": "llamacpp", "vllm": "vllm", "sglang": "sglang"}
            owner["ollama"] = "library"
            if p in owner:
                entry["owned_by"] = owner[p]
            return {"object": "list", "data": [entry]}
        if p == "llamacpp" and path == "/props":
            return {
                "total_slots": 4,
                "default_generation_settings": {"n_ctx": 512},
                "build_info": s.version,
            }
        if p == "ollama" and path == "/api/version":
            return {"version": s.version}
        if p in ("vllm", "sglang") and path == "/version":
            return {"version": s.version}
        if p == "sglang" and path == "/get_server_info":  # its server args, as SGLang's does
            return {"model_path": s.model, "tokenizer_path": s.model, "version": s.version}
        return None

    def _plan(self, body: dict[str, Any], key: str) -> Iterator[int]:
        """Tokens per content chunk, summing to the requested length."""
        total = body.get(key)
        if not isinstance(total, int) or total <= 0:
            total = self.script.default_max_tokens
        per = max(1, self.script.tokens_per_chunk)
        first = self.script.first_chunk_tokens
        if first is not None and total > 0:
            yield min(first, total)
            total -= first
        while total > 0:
            yield min(per, total)
            total -= per

    def _text(self, start: int, n: int) -> str:
        return "".join(f"w{start + j} " for j in range(n))

    async def _open_stream(self, writer: asyncio.StreamWriter, ctype: bytes) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\n%sContent-Type: %s\r\nTransfer-Encoding: chunked\r\n\r\n"
            % (self._server_header(), ctype)
        )

    async def _sleep_until(self, t_ns: int) -> None:
        delay = (t_ns - now_ns()) / 1e9
        if delay > 0:
            await asyncio.sleep(delay)

    async def _stream_openai(
        self,
        path: str,
        body: dict[str, Any],
        received: int,
        writer: asyncio.StreamWriter,
        log: RequestLog,
    ) -> bool:
        s = self.script
        chat = path.endswith("chat/completions")
        tool_mode = chat and bool(body.get("tools")) and not s.ignores_tools
        options = body.get("stream_options") or {}
        want_usage = bool(options.get("include_usage"))
        every_chunk = bool(options.get("continuous_usage_stats")) and s.persona == "vllm"
        await self._open_stream(writer, b"text/event-stream")

        def event(obj: Any) -> bytes:
            return _chunked(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")

        base = {"id": "cmpl-scripted", "model": s.model, "created": 0}
        base["object"] = "chat.completion.chunk" if chat else "text_completion"
        if chat and s.role_chunk:
            role = {"index": 0, "delta": {"role": "assistant", "content": None}}
            writer.write(event({**base, "choices": [role]}))
        for _ in range(s.keepalive_comments):
            writer.write(_chunked(b": keepalive\n\n"))
        await writer.drain()
        plan = list(self._plan(body, "max_tokens"))
        prompt_n, cached_n = self._prefill(body)
        prefill_s = s.prefill_s_per_token * (prompt_n - cached_n)
        if self._first_request_ns is None:
            self._first_request_ns = received
        if received - self._first_request_ns < s.ramp_s * 1e9:
            prefill_s += s.ramp_extra_ttft_s
        first = received + int((s.ttft_s + prefill_s) * 1e9)
        produced = 0
        for k, n in enumerate(plan):
            await self._sleep_until(first + int(k * s.itl_s * 1e9))
            if log.faulty and k == s.fault_after:
                return await self._fault(writer, event)
            stamp = now_ns()
            text = self._text(produced, n)
            if s.stamp:
                text = f"@{stamp}@{text}"
            last = k == len(plan) - 1
            reason = "length" if last and s.finish_on_last_content else None
            choice: dict[str, Any] = {"index": 0, "finish_reason": reason}
            if tool_mode:  # the answer is a function call: its arguments stream as deltas
                call: dict[str, Any] = {"index": 0, "function": {"arguments": text}}
                if k == 0:
                    call.update(id="call_0", type="function")
                    call["function"]["name"] = "get_weather"
                choice["delta"] = {"tool_calls": [call]}
                if last and s.finish_on_last_content:
                    choice["finish_reason"] = "tool_calls"
            elif chat:
                choice["delta"] = {"content": text}
            else:
                choice["text"] = text
            produced += n
            message: dict[str, Any] = {**base, "choices": [choice]}
            if every_chunk:  # vLLM's continuous_usage_stats: running totals on every chunk
                message["usage"] = {"prompt_tokens": 7, "completion_tokens": produced}
            writer.write(event(message))
            log.sends_ns.append(stamp)
        if not s.finish_on_last_content:
            empty: dict[str, Any] = {"index": 0, "finish_reason": "length"}
            empty["delta" if chat else "text"] = {} if chat else ""
            writer.write(event({**base, "choices": [empty]}))
        if want_usage or not s.usage_when_asked:
            final: dict[str, Any] = {
                **base,
                "choices": [],
                "usage": {
                    "prompt_tokens": prompt_n,
                    "completion_tokens": produced,
                    "total_tokens": prompt_n + produced,
                },
            }
            if s.prefix_cache:
                final["usage"]["prompt_tokens_details"] = {"cached_tokens": cached_n}
            if s.persona == "llamacpp":
                dur_ms = max(1e-3, (len(plan) - 1) * s.itl_s * 1e3)
                final["timings"] = {
                    "prompt_n": 7,
                    "prompt_ms": s.ttft_s * 1e3,
                    "predicted_n": produced,
                    "predicted_ms": dur_ms,
                    "predicted_per_second": produced / dur_ms * 1e3,
                }
            writer.write(event(final))
        writer.write(_chunked(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        await writer.drain()
        return True

    def _prefill(self, body: dict[str, Any]) -> tuple[int, int]:
        """(prompt tokens, of which cached): words stand for tokens. Without a prompt-length
        model (prefill_s_per_token 0 and no cache) the old fixed count of 7 is kept."""
        s = self.script
        if not s.prefix_cache and not s.prefill_s_per_token:
            return 7, 0
        messages = body.get("messages")
        if isinstance(messages, list):
            text = " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        else:
            text = str(body.get("prompt", ""))
        words = text.split()
        cached = 0
        if s.prefix_cache:
            for seen in self._seen_prompts:
                common = 0
                for a, b in zip(seen, words, strict=False):
                    if a != b:
                        break
                    common += 1
                cached = max(cached, common // s.cache_block * s.cache_block)
            self._seen_prompts.append(words)
        return len(words), min(cached, max(0, len(words) - 1))

    async def _fault(self, writer: asyncio.StreamWriter, event: Any) -> bool:
        s = self.script
        if s.fault == "malformed":
            writer.write(_chunked(b'data: {"choices": [{"delta": {"content": "x"\n\n'))
            writer.write(_chunked(b"data: [DONE]\n\n") + b"0\r\n\r\n")
            await writer.drain()
            return True
        if s.fault == "error_event":
            writer.write(event({"error": {"message": "scripted: the model crashed", "code": 500}}))
            writer.write(_chunked(b"data: [DONE]\n\n") + b"0\r\n\r\n")
            await writer.drain()
            return True
        if s.fault == "truncate":
            writer.write(b"0\r\n\r\n")  # a clean end of body, but no [DONE]
            await writer.drain()
            return True
        if s.fault == "disconnect":
            await writer.drain()
            writer.transport.abort()
            return False
        if s.fault == "stall":
            await writer.drain()
            await asyncio.sleep(3600)
        return False

    async def _stream_ollama(
        self, body: dict[str, Any], received: int, writer: asyncio.StreamWriter, log: RequestLog
    ) -> bool:
        s = self.script
        await self._open_stream(writer, b"application/x-ndjson")
        options = body.get("options") or {}
        plan = list(self._plan(options, "num_predict"))
        cold = s.cold_load_s if self._served == 0 else 0.0
        # A cold load happens inside the request, as Ollama's does: it delays the first token.
        first = received + int((cold + s.ttft_s) * 1e9)
        self._served += 1
        produced = 0
        model = body.get("model") or s.model

        def line(obj: Any) -> bytes:
            return _chunked(json.dumps(obj, separators=(",", ":")).encode() + b"\n")

        t_first_send = None
        for k, n in enumerate(plan):
            await self._sleep_until(first + int(k * s.itl_s * 1e9))
            if log.faulty and k == s.fault_after:
                if s.fault == "malformed":
                    writer.write(_chunked(b'{"message": {"content": "x"\n'))
                    writer.write(b"0\r\n\r\n")
                    await writer.drain()
                    return True
                if s.fault == "error_event":
                    writer.write(line({"error": "scripted: model runner stopped"}))
                    writer.write(b"0\r\n\r\n")
                    await writer.drain()
                    return True
                return await self._fault(writer, None)
            stamp = now_ns()
            t_first_send = t_first_send or stamp
            text = self._text(produced, n)
            if s.stamp:
                text = f"@{stamp}@{text}"
            msg = {"role": "assistant", "content": text}
            writer.write(line({"model": model, "created_at": "", "message": msg, "done": False}))
            log.sends_ns.append(stamp)
            produced += n
        end = now_ns()
        final: dict[str, Any] = {
            "model": model,
            "created_at": "",
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "length",
            "total_duration": end - received,
            "prompt_eval_count": 7,
            "prompt_eval_duration": int(s.ttft_s * 1e9),
            "eval_count": produced,
            "eval_duration": max(1, end - (t_first_send or end)),
        }
        if cold:
            final["load_duration"] = int(cold * 1e9)  # Ollama drops the field when it is zero
        writer.write(line(final) + b"0\r\n\r\n")
        await writer.drain()
        return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument("--ttft-ms", type=float, default=20.0)
    parser.add_argument("--itl-ms", type=float, default=10.0)
    parser.add_argument("--tokens-per-chunk", type=int, default=1)
    parser.add_argument("--stamp", action="store_true")
    parser.add_argument("--persona", choices=PERSONAS, default="none")
    parser.add_argument("--fault", choices=FAULTS, default="none")
    parser.add_argument("--uvloop", action="store_true", help="run on uvloop")
    parser.add_argument(
        "--reuse-port",
        action="store_true",
        help="share --port with other server processes (SO_REUSEPORT)",
    )
    args = parser.parse_args(argv)
    script = Script(
        ttft_s=args.ttft_ms / 1e3,
        itl_s=args.itl_ms / 1e3,
        tokens_per_chunk=args.tokens_per_chunk,
        stamp=args.stamp,
        persona=args.persona,
        fault=args.fault,
    )

    async def serve() -> None:
        server = await ScriptedServer(
            script, args.host, args.port, reuse_port=args.reuse_port
        ).start()
        print(f"READY {server.base_url}", flush=True)
        await asyncio.Event().wait()

    if args.uvloop:
        import uvloop

        uvloop.run(serve())
    else:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve())


if __name__ == "__main__":
    main()
