"""What a server says it counted, believed only where the stream it sent could hold it.

A server's usage and timings arrive beside the text felab timed itself: a count its own text
contradicts (10^9 tokens after 6 chunks, 1 token beside 256 chunks, a prompt of a billion
tokens for a 40-token prompt) is no measurement, and felab counts what it saw instead.
"""

from __future__ import annotations

import math

from felab_core.engine.timeline import NS, Chunk, RequestTimeline

#: Tokens a server may count without sending their text (the end of the turn, a stop string).
UNSHOWN_TOKENS = 16


#: Where a run's token counts came from, as the results CSV's token_source column says it
#: ("mixed" when requests differ; empty when nothing was counted).
COUNT_FROM_SERVER, COUNT_FROM_OLLAMA = "usage", "eval_count"
COUNT_FROM_CHUNKS = "chunks"
COUNT_FROM_CHUNKS_DISBELIEVED = "chunks (the server's count did not fit its text)"
COUNT_MIXED = "mixed"
TOKEN_SOURCES = frozenset(
    {
        COUNT_FROM_SERVER,
        COUNT_FROM_OLLAMA,
        COUNT_FROM_CHUNKS,
        COUNT_FROM_CHUNKS_DISBELIEVED,
        COUNT_MIXED,
    }
)


def output_tokens(tl: RequestTimeline, api_is_ollama: bool) -> tuple[int | None, str | None]:
    """N and where it came from: server count first, counted messages last.

    A server's count is believed when the text it sent could hold it: every token is at least
    one byte of text (a character of 4 bytes is at most 4 tokens), plus a few the server counts
    but does not show (the end, a stop string); and at least one token for every two messages
    of text; and no more than the request asked for (max_tokens), and one. A count past that
    (10^9 tokens after 6 chunks; 144 beside 32 bytes, when four tokens a byte were allowed; 17
    for --max-tokens 1), or below it (0 after text, 1 after 256 messages), is no
    measurement; the chunks are counted instead, and the source says so."""
    if tl.usage and "completion_tokens" in tl.usage:
        said = tl.usage["completion_tokens"]
        least, most = _output_bounds(tl)
        if isinstance(said, int) and least <= said <= most:
            return said, (COUNT_FROM_OLLAMA if api_is_ollama else COUNT_FROM_SERVER)
        counted = len(tl.content_chunks())
        return (counted or None), COUNT_FROM_CHUNKS_DISBELIEVED
    counted = len(tl.content_chunks())
    if counted:
        return counted, COUNT_FROM_CHUNKS
    return None, None


def _output_bounds(tl: RequestTimeline) -> tuple[int, int]:
    """The fewest and the most output tokens the stream felab read can hold."""
    # "surrogatepass": JSON's "\ud800" from a broken server is a character, not a crash
    shown = sum(len(c.text.encode("utf-8", "surrogatepass")) for c in tl.content_chunks())
    # Text on the wire is at least one token: a count of 0 beside it is no count either;
    # and a server steps a token or more a message, so 1 beside 256 messages is none (half
    # a token a message leaves room for a character split over two).
    least = max(1 if shown else 0, -(-len(tl.content_chunks()) // 2))
    most = shown + UNSHOWN_TOKENS
    if tl.asked_tokens is not None:  # a server stops at max_tokens (the end token aside)
        most = min(most, tl.asked_tokens + 1)
    return least, most


#: The fastest one stream a server could report writing (speculative decoding on the largest
#: GPUs reaches thousands of tokens a second): past this a server's own figure is not believed.
MAX_SERVER_TPS = 100_000.0


def server_writing_tps(timings: dict[str, float] | None) -> float | None:
    """The server's own decode speed: llama.cpp's predicted_per_second or Ollama's eval rate."""
    if not timings:
        return None
    if "predicted_per_second" in timings:
        said = timings["predicted_per_second"]
    elif timings.get("eval_duration") and "eval_count" in timings:
        said = timings["eval_count"] / timings["eval_duration"] * NS
    else:
        return None
    # Negative, zero or past any one stream's speed (10^21 from eval_duration 1): not a
    # figure to show or save beside the client's own.
    return said if math.isfinite(said) and 0 < said <= MAX_SERVER_TPS else None


#: Tokens a chat template may add around the prompt felab sent (roles, a system prompt).
TEMPLATE_TOKENS = 4096


#: The most bytes of a request one prompt token may stand for: no tokenizer's longest token
#: comes near (the same allowance a stream's text gets, stream_shape.most_text_chars).
MOST_BYTES_A_TOKEN = 1024


#: The most bytes of prompt text one token stands for, on average over a prompt: text
#: tokenizes at about 4 bytes a token, felab's own words at about 5 (one token each), and
#: even long runs of spaces or code leave a prompt far below 16 bytes a token.
MOST_PROMPT_BYTES_A_TOKEN = 16


def least_prompt_tokens(tl: RequestTimeline) -> int:
    """The fewest tokens the prompt felab sent can be: its newest prompt text at 16 bytes a
    token at most (10 tokens for a prompt of 2,000, 9.9 kB, had been stored), else the whole
    request at 1,024 bytes a token."""
    if tl.prompt_bytes:
        return max(1, tl.prompt_bytes // MOST_PROMPT_BYTES_A_TOKEN)
    return max(1, tl.request_bytes // MOST_BYTES_A_TOKEN) if tl.request_bytes else 1


def prompt_counts(tl: RequestTimeline) -> tuple[int | None, int | None]:
    """The prompt's tokens and how many of them the server's cache served, where they can be
    true of the request felab sent: a token is at least one byte of it (999,999,999 for a
    short prompt had been stored, and printed as "100 % cached"), and at most 16 bytes of its
    prompt text (least_prompt_tokens)."""
    most = tl.request_bytes + TEMPLATE_TOKENS if tl.request_bytes else None
    least = least_prompt_tokens(tl)
    prompt = cached = None
    if tl.usage:
        prompt, cached = tl.usage.get("prompt_tokens"), tl.usage.get("cached_tokens")
    if cached is None and tl.server_timings and "cache_n" in tl.server_timings:
        said = tl.server_timings["cache_n"]  # llama.cpp's own count: 3.7 is no count (was 3)
        cached = int(said) if float(said).is_integer() else None
    if not isinstance(prompt, int) or not least <= prompt <= (most or prompt):
        if prompt is not None:
            cached = None  # the same answer's cache count, beside a count that cannot be true
        prompt = None
    ceiling = prompt if prompt is not None else most
    if not isinstance(cached, int) or not 0 <= cached <= (ceiling or cached):
        cached = None  # 99 cached of a 10-token prompt: no count of anything
    return prompt, cached


def first_chunk_tokens(content: list[Chunk], total: int) -> float:
    """The tokens of the first content chunk: the server's running count where it agrees with
    the rest of the stream (each later chunk holds a token at least, and none holds more than
    the total), else the total shared evenly. A running count of 200,000 on the first chunk
    of 256, or 1,000 falling to 3, had been kept and lost the writing speed."""
    first = content[0].tokens
    said = [c.tokens for c in content if c.tokens is not None]
    if first is not None and first <= total - (len(content) - 1) and sum(said) <= total:
        return float(first)
    return total / len(content) if content else 0.0


def server_speed_fits(tps: float | None, tokens: int | None, e2e_s: float | None) -> bool:
    """Whether a server's own decode speed could be true of the request felab timed: its
    tokens, written at that speed, fit inside the request (twice over, for clocks and the
    first token). 1e-300 tok/s for a 0.3 s answer had been shown as 0.0 and saved."""
    if tps is None or not tokens or tokens < 2 or not e2e_s:
        return True
    return (tokens - 1) / tps <= 2 * e2e_s


#: A server's own counts of a request's prompt (llama.cpp's timings, Ollama's final line) and
#: of its answer: each faces the bounds the same answer's usage does.
_PROMPT_COUNTS = ("prompt_n", "prompt_eval_count", "cache_n")
_OUTPUT_COUNTS = ("predicted_n", "eval_count")


def believable_timings(tl: RequestTimeline) -> dict[str, float] | None:
    """The server's timing figures that can be true of the request felab sent and the answer
    it read: a prompt count past the request's bytes (prompt_n 10^11 for 100 bytes) or past
    the same answer's believed usage (5,000 beside 40), an output count the text cannot hold
    (predicted_n 250 beside 4 chunks), or one stream's speed past any (10^7 tokens a second)
    is left out; the record had kept each as sent. So is a speed its own counts contradict
    (speed_disagreement)."""
    kept = _fitting_timings(tl)
    if kept and tl.server_timings and _speed_disagreement(tl.server_timings, kept):
        kept.pop("predicted_per_second", None)
    return kept or None


def _fitting_timings(tl: RequestTimeline) -> dict[str, float] | None:
    timings = tl.server_timings
    if not timings:
        return timings
    least_out, most_out = _output_bounds(tl)
    most_prompt = tl.request_bytes + TEMPLATE_TOKENS if tl.request_bytes else None
    believed, _ = prompt_counts(tl)
    if believed is not None:
        most_prompt = believed
    kept = {}
    for key, value in timings.items():
        if key in _PROMPT_COUNTS and most_prompt is not None and value > most_prompt:
            continue
        if key in _OUTPUT_COUNTS and not least_out <= value <= most_out:
            continue
        if key == "predicted_per_second" and value > MAX_SERVER_TPS:
            continue
        kept[key] = value
    return kept


#: How far llama.cpp's predicted_per_second may stray from its own predicted_n / predicted_ms
#: (it computes one from the others; a server that rounds its figures strays by less). The
#: llama-server felab builds counts the first token in predicted_n but not its time: 96 tokens
#: in 3,535.64 ms said 26.8693 tok/s, which is 95 / 3,535.64 s.
_SPEED_ROUNDING = 0.01


def _speed_disagreement(sent: dict[str, float], kept: dict[str, float]) -> str | None:
    """Why llama.cpp's own decode speed cannot be taken, held to its own counts of the same
    answer, or None: 99,999 tok/s beside predicted_n 20 in predicted_ms 200 (100 tok/s), or a
    speed beside a predicted_n felab threw out, had been saved as the server's speed."""
    rate = kept.get("predicted_per_second")
    if rate is None:
        return None
    if "predicted_n" in sent and "predicted_n" not in kept:
        return (
            f"predicted_per_second {rate:,.6g} comes with a predicted_n "
            f"({sent['predicted_n']:,.6g}) the answer felab read cannot hold"
        )
    n, ms = kept.get("predicted_n"), kept.get("predicted_ms")
    if n is None or ms is None:
        return None
    own = n / ms * 1000 if ms > 0 else math.inf
    least = max(n - 1, 0) / ms * 1000 if ms > 0 else math.inf
    if least * (1 - _SPEED_ROUNDING) - 0.01 <= rate <= own * (1 + _SPEED_ROUNDING) + 0.01:
        return None
    return (
        f"predicted_per_second {rate:,.6g} is not its own predicted_n {n:,.6g} / "
        f"predicted_ms {ms:,.6g} ({own:,.6g} tokens a second)"
    )


def speed_disagreement(tl: RequestTimeline) -> str | None:
    """Why this answer's llama.cpp decode speed was left out (believable_timings), or None."""
    kept = _fitting_timings(tl)
    if not kept or not tl.server_timings:
        return None
    return _speed_disagreement(tl.server_timings, kept)


def speed_disagreement_note(timelines: list[RequestTimeline]) -> str | None:
    """A run's word on the server's own speeds that were left out (speed_disagreement)."""
    why = [w for tl in timelines if not tl.warmup and (w := speed_disagreement(tl))]
    if not why:
        return None
    return (
        f"the server's own decode speed was left out of {len(why)} answer(s): {why[0]}; "
        "felab's own writing speed stands (check the server's timings)"
    )
