"""The three wire protocols felab times: what to send, and what each streamed message means.

Each adapter turns one framed message into a `FrameInfo`: the generated text it carries (empty
for role-only, usage-only and keep-alive messages, which are not tokens), usage, server timings,
the end marker or an error the server put in the stream.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from felab_core.engine.framing import Frame, NDJSONDecoder, SSEDecoder
from felab_core.engine.stream_shape import shown_text
from felab_core.redact import redact
from felab_core.sizing.units import MAX_TOKENS
from felab_core.text import holds_hidden


class Api(StrEnum):
    OPENAI_CHAT = "openai-chat"
    OPENAI_COMPLETIONS = "openai-completions"
    OLLAMA = "ollama"


class StreamProtocolError(Exception):
    """The server sent something the protocol does not allow (bad JSON, wrong shape)."""


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """What to ask for, independent of the wire format."""

    prompt: str
    max_tokens: int | None = None
    model: str | None = None
    temperature: float | None = 0.0
    seed: int | None = None
    # Server-specific knobs that force the reply to run to max_tokens (ignore_eos, min_tokens).
    extra: dict[str, Any] = field(default_factory=dict)
    # Earlier turns of a conversation, (role, content), sent before this prompt.
    history: tuple[tuple[str, str], ...] = ()

    def messages(self) -> list[dict[str, str]]:
        """The chat messages: the history, then this turn's user prompt."""
        earlier = [{"role": role, "content": content} for role, content in self.history]
        return [*earlier, {"role": "user", "content": self.prompt}]

    def flat_prompt(self) -> str:
        """For a completions API: the history's text, then this prompt."""
        return "\n".join([*(content for _, content in self.history), self.prompt])


@dataclass(slots=True)
class FrameInfo:
    text: str = ""
    done: bool = False
    usage: dict[str, int] | None = None
    timings: dict[str, float] | None = None
    finish_reason: str | None = None
    error: str | None = None
    tool_call: bool = False  # the message carried a tool call (what --tools asks for)
    #: The message's choice said no index (True), said index 0 (False), or there was none.
    unindexed: bool | None = None


class Decoder(Protocol):
    def feed(self, chunk: bytes) -> list[Frame]: ...
    def close(self) -> Frame | None: ...


class ApiAdapter(Protocol):
    api: Api
    path: str
    end_marker: str

    def payload(self, req: GenerationRequest) -> dict[str, Any]: ...
    def decoder(self) -> Decoder: ...
    def interpret(self, frame: Frame) -> FrameInfo: ...


def _loads(data: str) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except ValueError as exc:
        raise StreamProtocolError(f"not JSON ({exc.args[0]}): {data[:80]!r}") from None
    except RecursionError:  # [[[[... thousands deep: no server's chunk is
        raise StreamProtocolError(
            f"a chunk nested too deeply to be a token: {data[:40]!r}..."
        ) from None
    if not isinstance(obj, dict):
        kind = type(obj).__name__
        raise StreamProtocolError(f"expected a JSON object, got {kind}: {data[:80]!r}")
    return obj


def _error_text(err: Any) -> str:
    if isinstance(err, dict):
        msg = err.get("message") or err.get("msg") or json.dumps(err)[:300]
        return str(msg)
    return str(err)


#: What a server's impossible output-token count is kept as: below any text's count.
UNBELIEVABLE_COUNT = -1


def _usage(obj: dict[str, Any]) -> dict[str, int] | None:
    usage = obj.get("usage")
    if not isinstance(usage, dict):
        return None
    out: dict[str, int] = {}
    details = usage.get("prompt_tokens_details")  # OpenAI, vLLM, SGLang: the prefix cache's hits
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    for key, value in (
        ("prompt_tokens", usage.get("prompt_tokens")),
        ("completion_tokens", usage.get("completion_tokens")),
        ("cached_tokens", cached),
    ):
        # A count past any context (10^30 prompt tokens) is a broken server's, not believed.
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS:
            out[key] = value
        elif key == "completion_tokens" and value is not None:
            # Sent but impossible (-5, 10^12, "three", NaN): kept as a count no text can
            # hold, so the record says the server's count was not believed, not just "chunks".
            out[key] = UNBELIEVABLE_COUNT
    return out or None


#: The most a server's own timing figure can be (milliseconds, counts, tokens a second): past
#: it, or below zero, or not finite, the figure is a broken server's and is not kept.
_MOST_TIMING = 1e12
#: llama.cpp's `timings` has about a dozen figures, Ollama's final line six: a server's object
#: of 100,000 keys was kept whole for every request (2.3 GB and a 151 MB record for 60).
_MOST_TIMING_KEYS = 32


#: A per-second figure a server may say of itself (prompt reading is far faster than writing,
#: on the largest GPUs hundreds of thousands a second): past these it is no reading.
_MOST_PER_SECOND = 10_000_000.0
_LEAST_PER_SECOND = 1e-3


def _a_figure(key: str, value: float) -> bool:
    """Whether one timing figure can be true of one request: a speed within reach, a count of
    tokens whole (cache_n 5.7 had been kept), 1e12 or 1e-300 tokens a second not kept."""
    if key.endswith("_per_second"):
        return _LEAST_PER_SECOND <= value <= _MOST_PER_SECOND
    if key.endswith(("_n", "_count")):
        return value.is_integer()
    return True


def _number_fields(obj: Any) -> dict[str, float] | None:
    """A server's timing figures that can be true (llama.cpp's `timings`, Ollama's counts):
    the record keeps them as sent, so -1e308 tokens a second never reaches it."""
    if not isinstance(obj, dict):
        return None
    out = {
        str(k)[:64]: float(v)
        for k, v in itertools.islice(obj.items(), _MOST_TIMING_KEYS)
        if isinstance(v, int | float)
        and not isinstance(v, bool)
        and (isinstance(v, float) or abs(v) <= _MOST_TIMING)  # float() of 10**400 raises
        and math.isfinite(v)
        and 0 <= v <= _MOST_TIMING
        and not holds_hidden(str(k)[:64])  # a key with an escape code is no figure's name
        and redact(str(k)[:64]) == str(k)[:64]  # nor one repeating the URL's password
        and _a_figure(str(k)[:64], float(v))
    }
    return out or None


#: finish_reason values that say the server cut the answer (vLLM's "abort" for a request its
#: engine aborted, "error" from gateways): not the model's own end, so no answer to time.
_CUT_SHORT_REASONS = frozenset({"abort", "error"})


def _stream_error(obj: dict[str, Any]) -> str | None:
    """The server's error, in its words, in the shapes servers put in a stream: {"error": ...}
    (OpenAI, vLLM, llama.cpp), {"object": "error", "message": ...} (SGLang's ErrorResponse,
    vLLM before it nested one), {"detail": ...} alone (FastAPI's)."""
    if obj.get("error") not in (None, "", {}):  # "error": null beside a token is no error
        return _error_text(obj["error"])
    if obj.get("object") == "error":
        said = obj.get("message")
        return _error_text(said) if said not in (None, "") else json.dumps(obj)[:300]
    if "choices" not in obj and obj.get("detail") not in (None, "", {}):
        return _error_text(obj["detail"])
    return None


def _first_choice(choices: list[Any]) -> dict[str, Any] | None:
    """Choice 0, the one felab asks for (n=1): a server that streams others (index 1, ...)
    would have its choices counted as one answer of twice the tokens. Only the integer 0 is
    the first answer: 1.0, "1", null or a bool is no index felab can read as it (each had been
    timed as the first). vLLM, SGLang, llama.cpp, MLX and Ollama's OpenAI API send index 0 on
    every choice; one with none is taken only alone in its message, as an n=1 stream has it."""
    if len(choices) > 1:
        raise StreamProtocolError(
            f"the server streamed {len(choices)} choices in one message, and felab asks for "
            "one choice (index 0): they would be counted as one answer; check the server's n "
            "or best_of settings"
        )
    for choice in choices:
        if not isinstance(choice, dict):
            raise StreamProtocolError("a choice is not an object")
        if "index" not in choice:
            continue  # alone in its message: the one answer asked for
        index = choice["index"]
        if not (type(index) is int and index == 0):
            raise StreamProtocolError(
                f"the server streamed choice index {shown_text(json.dumps(index), 40)}, and "
                "felab asks for one choice (index 0, a whole number): its choices would be "
                "counted as one answer; check the server's n or best_of settings"
            )
    return choices[0] if choices else None


def _openai_common(obj: dict[str, Any], text_of: Any) -> FrameInfo:
    info = FrameInfo()
    if (error := _stream_error(obj)) is not None:
        info.error = error
        return info
    choices = obj.get("choices")
    if choices is not None and not isinstance(choices, list):
        raise StreamProtocolError(f"'choices' is not a list: {str(choices)[:80]!r}")
    choice = _first_choice(choices) if choices else None
    if choice is not None:
        info.unindexed = "index" not in choice
        info.text = text_of(choice)
        delta = choice.get("delta")
        info.tool_call = isinstance(delta, dict) and bool(_tool_call_text(delta.get("tool_calls")))
        reason = choice.get("finish_reason")
        if isinstance(reason, str):
            info.finish_reason = reason
            if reason in _CUT_SHORT_REASONS:
                info.error = (
                    f"the answer ended with finish_reason {reason!r}: the server cut it short "
                    "(an aborted or failed request), so it is not timed as an answer; check "
                    "the server's log"
                )
    info.usage = _usage(obj)
    info.timings = _number_fields(obj.get("timings"))  # llama.cpp's own decode timings
    return info


def _openai_extra(req: GenerationRequest, body: dict[str, Any]) -> dict[str, Any]:
    if req.model:
        body["model"] = req.model
    if req.max_tokens is not None:
        body["max_tokens"] = req.max_tokens
    if req.temperature is not None:
        body["temperature"] = req.temperature
    if req.seed is not None:
        body["seed"] = req.seed
    body["stream"] = True
    # Always ask: several servers send usage only when asked, and N must come from the server.
    body["stream_options"] = {"include_usage": True}
    body.update(req.extra)
    return body


def _chat_text(choice: dict[str, Any]) -> str:
    delta = choice.get("delta")
    if delta is None:
        if isinstance(choice.get("text"), str) and choice["text"]:  # A14: was "empty answer"
            raise StreamProtocolError(
                "the server streams 'text' (the completions API), and --api openai-chat reads "
                "delta.content: use --api openai-completions"
            )
        return ""
    if not isinstance(delta, dict):
        raise StreamProtocolError("'delta' is not an object")
    parts = []
    # Reasoning models stream their thinking first; those are generated tokens too.
    for key in ("reasoning_content", "reasoning", "content"):
        value = delta.get(key)
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, list):  # content as a list of parts, [{"type": "text", ...}]
            parts += [
                v["text"] for v in value if isinstance(v, dict) and isinstance(v.get("text"), str)
            ]
    parts.extend(_tool_call_text(delta.get("tool_calls")))
    return "".join(parts)


def _tool_call_text(calls: object) -> list[str]:
    """What a model generated for its tool calls: each function's name (when it first comes)
    and its argument text, streamed as deltas. An agentic turn is all of this and no content,
    so without it a tool call would read as zero tokens."""
    if not isinstance(calls, list):
        return []
    out = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            continue
        for key in ("name", "arguments"):
            value = function.get(key)
            if isinstance(value, str):
                out.append(value)
            elif isinstance(value, dict):  # Ollama sends the arguments whole, as an object
                out.append(json.dumps(value, separators=(",", ":")))
    return out


def _completion_text(choice: dict[str, Any]) -> str:
    text = choice.get("text")
    delta = choice.get("delta")
    if text is None and isinstance(delta, dict) and delta.get("content"):  # A14
        raise StreamProtocolError(
            "the server streams delta.content (the chat API), and --api openai-completions "
            "reads 'text': use --api openai-chat"
        )
    return text if isinstance(text, str) else ""


#: The event names of streaming APIs felab does not time (A14: they read as "truncated").
_OTHER_STREAMS = {
    "message_start": "Anthropic's Messages API",
    "content_block_delta": "Anthropic's Messages API",
    "response.created": "OpenAI's Responses API",
    "response.output_text.delta": "OpenAI's Responses API",
}


def _other_stream(frame: Frame) -> None:
    """Refuse a stream of another API, by its event names, in words."""
    if frame.event in _OTHER_STREAMS:
        raise StreamProtocolError(
            f"this is {_OTHER_STREAMS[frame.event]} stream (event: {frame.event}), which felab "
            "does not time: point --url at the server's OpenAI-compatible /v1 endpoint"
        )


class _OpenAIBase:
    end_marker = "[DONE]"

    def decoder(self) -> Decoder:
        return SSEDecoder()


def _error_event(frame: Frame) -> FrameInfo | None:
    """An SSE `event: error` (Anthropic-style gateways, some proxies) as the server's error, in
    its own words: its data need not hold an "error" key, and was read as an empty chunk."""
    if frame.event != "error":
        return None
    try:
        obj: Any = json.loads(frame.data)
    except (ValueError, RecursionError):
        obj = None
    if isinstance(obj, dict):
        said = obj.get("error", obj.get("message", obj))
        return FrameInfo(error=_error_text(said) or "(no words)")
    return FrameInfo(error=frame.data.strip() or "(no words)")


class OpenAIChat(_OpenAIBase):
    api = Api.OPENAI_CHAT
    path = "/v1/chat/completions"

    def payload(self, req: GenerationRequest) -> dict[str, Any]:
        return _openai_extra(req, {"messages": req.messages()})

    def interpret(self, frame: Frame) -> FrameInfo:
        if frame.data.strip() == "[DONE]":
            return FrameInfo(done=True)
        if (error := _error_event(frame)) is not None:
            return error
        _other_stream(frame)
        return _openai_common(_loads(frame.data), _chat_text)


class OpenAICompletions(_OpenAIBase):
    api = Api.OPENAI_COMPLETIONS
    path = "/v1/completions"

    def payload(self, req: GenerationRequest) -> dict[str, Any]:
        return _openai_extra(req, {"prompt": req.flat_prompt()})

    def interpret(self, frame: Frame) -> FrameInfo:
        if frame.data.strip() == "[DONE]":
            return FrameInfo(done=True)
        if (error := _error_event(frame)) is not None:
            return error
        _other_stream(frame)
        return _openai_common(_loads(frame.data), _completion_text)


OLLAMA_TIMING_FIELDS = (
    "total_duration",
    "load_duration",
    "prompt_eval_count",
    "prompt_eval_duration",
    "eval_count",
    "eval_duration",
)


class Ollama:
    """Ollama's native /api/chat: NDJSON, the last object has `done: true` and the timings."""

    api = Api.OLLAMA
    path = "/api/chat"
    end_marker = '{"done": true}'

    def payload(self, req: GenerationRequest) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if req.max_tokens is not None:
            options["num_predict"] = req.max_tokens
        if req.temperature is not None:
            options["temperature"] = req.temperature
        if req.seed is not None:
            options["seed"] = req.seed
        options.update(req.extra.get("options", {}))
        body: dict[str, Any] = {
            "model": req.model or "",
            "messages": req.messages(),
            "stream": True,
        }
        if options:
            body["options"] = options
        return body

    def decoder(self) -> Decoder:
        return NDJSONDecoder()

    def interpret(self, frame: Frame) -> FrameInfo:
        if frame.data.startswith(("data:", "event:")):  # an OpenAI-style server's event stream
            raise StreamProtocolError(
                f"an OpenAI-style event stream (lines of 'data: ...'), not Ollama's /api/chat: "
                # Ollama's API comes from --api ollama, --kind ollama or the ollama target:
                # which one is not known here, so the advice names only the way out
                f"this server speaks the OpenAI API; use --api openai-chat: {frame.data[:60]!r}"
            )
        obj = _loads(frame.data)
        info = FrameInfo()
        if obj.get("error") not in (None, "", {}):
            info.error = _error_text(obj["error"])
            return info
        message = obj.get("message")
        if isinstance(message, dict):
            parts = [message.get(k) for k in ("thinking", "content")]
            texts = [p for p in parts if isinstance(p, str)]
            calls = _tool_call_text(message.get("tool_calls"))
            info.text = "".join([*texts, *calls])
            info.tool_call = bool(calls)
        if obj.get("done") is True:
            info.done = True
            reason = obj.get("done_reason")
            info.finish_reason = reason if isinstance(reason, str) else None
            # Ollama omits a field when it is zero (prompt_eval_count vanishes on a cache hit).
            # Its counts and durations face the checks OpenAI usage and llama.cpp timings do:
            # `eval_count: true` was read as 1 token, 10**400 ns failed the request.
            info.timings = _number_fields({k: obj[k] for k in OLLAMA_TIMING_FIELDS if k in obj})
            counts = {"completion_tokens": obj.get("eval_count")}
            counts["prompt_tokens"] = obj.get("prompt_eval_count")
            info.usage = _usage({"usage": counts})
        return info


ADAPTERS: dict[Api, ApiAdapter] = {
    Api.OPENAI_CHAT: OpenAIChat(),
    Api.OPENAI_COMPLETIONS: OpenAICompletions(),
    Api.OLLAMA: Ollama(),
}


def adapter_for(api: Api | str) -> ApiAdapter:
    return ADAPTERS[Api(api)]
