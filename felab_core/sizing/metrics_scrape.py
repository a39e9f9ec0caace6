"""Prometheus `/metrics` from llama.cpp and vLLM: snapshots, and the server's own rates between two.

A client measures what reaches it; the server counts what it did. Taking one snapshot before a
`felab bench` run and one after, the difference gives the server-side figures (tokens written and
read, time spent writing, time to first token) to set beside the client's. Parsing uses
prometheus-client's own text parser; the counters are mapped to one vocabulary for both engines.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction

import httpx
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from felab_core.bounded_get import direct_client, get_bounded
from felab_core.engine.request_errors import connect_failure, credentials_refused
from felab_core.redact import url_password_masked
from felab_core.sizing.errors import BadAnswer, SizingError, Unreachable
from felab_core.sizing.units import decimal_text, whole_text
from felab_core.text import with_hidden_shown

LLAMA_CPP = "llama.cpp"
VLLM = "vllm"

# Sample name -> felab's name. Several vLLM names are the old and new spelling of one counter.
_LLAMA_NAMES: dict[str, str] = {
    "llamacpp:prompt_tokens_total": "prompt_tokens",
    "llamacpp:prompt_seconds_total": "prompt_seconds",
    "llamacpp:tokens_predicted_total": "generation_tokens",
    "llamacpp:tokens_predicted_seconds_total": "generation_seconds",
    "llamacpp:n_decode_total": "decode_calls",
    "llamacpp:prompt_tokens_cached_total": "prompt_tokens_cached",
    "llamacpp:requests_processing": "requests_running",
    "llamacpp:requests_deferred": "requests_waiting",
    "llamacpp:kv_cache_usage_ratio": "kv_cache_usage",
    "llamacpp:kv_cache_tokens": "kv_cache_tokens",
    "llamacpp:n_tokens_max": "tokens_max",
}
_VLLM_NAMES: dict[str, str] = {
    "vllm:prompt_tokens_total": "prompt_tokens",
    "vllm:generation_tokens_total": "generation_tokens",
    "vllm:request_success_total": "requests_finished",
    "vllm:num_requests_running": "requests_running",
    "vllm:num_requests_waiting": "requests_waiting",
    "vllm:kv_cache_usage_perc": "kv_cache_usage",
    "vllm:gpu_cache_usage_perc": "kv_cache_usage",
    "vllm:prefix_cache_queries_total": "prefix_cache_queries",
    "vllm:gpu_prefix_cache_queries_total": "prefix_cache_queries",
    "vllm:prefix_cache_hits_total": "prefix_cache_hits",
    "vllm:gpu_prefix_cache_hits_total": "prefix_cache_hits",
    "vllm:time_to_first_token_seconds_sum": "ttft_sum",
    "vllm:time_to_first_token_seconds_count": "ttft_count",
    "vllm:inter_token_latency_seconds_sum": "itl_sum",
    "vllm:inter_token_latency_seconds_count": "itl_count",
    "vllm:time_per_output_token_seconds_sum": "itl_sum",
    "vllm:time_per_output_token_seconds_count": "itl_count",
    "vllm:e2e_request_latency_seconds_sum": "e2e_sum",
    "vllm:e2e_request_latency_seconds_count": "e2e_count",
    "vllm:request_decode_time_seconds_sum": "decode_seconds",
    "vllm:request_prefill_time_seconds_sum": "prefill_seconds",
}
# Values that describe "now" rather than count since start: never subtracted.
_GAUGES = {
    "requests_running",
    "requests_waiting",
    "kv_cache_usage",
    "kv_cache_tokens",
    "tokens_max",
}


@dataclass(frozen=True)
class Snapshot:
    """The counters that matter, summed over label sets, at one moment."""

    engine: str
    taken_at: float
    values: dict[str, float]
    info: dict[str, str] = field(default_factory=dict)

    def get(self, name: str) -> float | None:
        return self.values.get(name)


def parse_metrics(
    text: str, taken_at: float | None = None, source: str = "/metrics", model: str | None = None
) -> Snapshot:
    """Parse Prometheus text from llama-server or vLLM into a snapshot of felab's counters
    (`source`: the address it came from, for a message; `model`: the model timed, whose
    series alone are read where the counters carry a model_name label)."""
    text = text.removeprefix("\ufeff")  # a byte-order mark is no part of the first line
    if text.lstrip()[:1] == "<":
        raise Unreachable(
            "/metrics answered with an HTML page, not Prometheus text: check the address"
        )
    if "\x00" in text or text.count("\ufffd") > 8:  # bytes that decode to no text
        raise BadAnswer(
            "/metrics answered with binary bytes, not Prometheus text: check the address"
        )
    if text.lstrip()[:1] in ("{", "["):  # an OpenAI-style server's JSON (a 404 body, a list)
        raise SizingError(
            "/metrics answered with JSON, not Prometheus text: this server does not look like "
            "vLLM or llama-server (which needs --metrics); check the address"
        )
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, TypeError):  # the server's fault, as a NaN counter is (exit 3)
        raise BadAnswer(
            f"{source} answered text that is not Prometheus text (the metrics format vLLM and "
            "llama-server write): the server's answer is broken; check the address and the "
            "server"
        ) from None
    samples = [s for fam in families for s in fam.samples]
    names = {s.name for s in samples}
    if any(n.startswith("llamacpp:") for n in names):
        engine, table = LLAMA_CPP, _LLAMA_NAMES
    elif any(n.startswith("vllm:") for n in names):
        engine, table = VLLM, _VLLM_NAMES
    else:
        raise SizingError(
            "no llama.cpp (llamacpp:...) or vLLM (vllm:...) metrics in this text; felab reads "
            "/metrics from those two servers (llama-server needs --metrics)"
        )
    samples = _the_models_series(samples, table, model, source)
    values: dict[str, float] = {}
    seen_source: dict[str, str] = {}
    info: dict[str, str] = {}
    for sample in samples:
        if sample.name == "vllm:cache_config_info":
            labels = dict(sample.labels)
            # One cache per server: two that disagree (not the same engine's line twice) leave
            # no figure felab could believe.
            if info and labels != info:
                raise BadAnswer(
                    "/metrics gives two different vllm:cache_config_info lines (block_size "
                    f"{with_hidden_shown(info.get('block_size', '?'))[:20]} and "
                    f"{with_hidden_shown(labels.get('block_size', '?'))[:20]}, num_gpu_blocks "
                    f"{with_hidden_shown(info.get('num_gpu_blocks', '?'))[:20]} and "
                    f"{with_hidden_shown(labels.get('num_gpu_blocks', '?'))[:20]}): time one "
                    "engine, or give the figures with --blocks/--tokens"
                )
            info = labels
            continue
        ours = table.get(sample.name)
        if ours is None:
            continue
        # When both spellings of one counter appear, keep the first one met.
        if seen_source.setdefault(ours, sample.name) != sample.name:
            continue
        value = float(sample.value)
        if not math.isfinite(value) or value < 0:
            # A counter of NaN, infinity or below zero is no count of anything a server did.
            raise BadAnswer(
                f"/metrics gave {sample.name} = {sample.value}: no server counts that; felab "
                "reads its counters only when each is a finite number from zero up"
            )
        values[ours] = values.get(ours, 0.0) + value
    return Snapshot(
        engine=engine,
        taken_at=time.monotonic() if taken_at is None else taken_at,
        values=values,
        info=info,
    )


def _the_models_series(
    samples: list[Sample], table: dict[str, str], model: str | None, source: str
) -> list[Sample]:
    """The counters of the model timed: a server serving several models labels each series
    with model_name, and another model's tokens had been added into this run's (sweep 22 a
    A12). Unlabelled counters are read only where no counter is labelled."""
    named = {
        s.labels["model_name"] for s in samples if s.name in table and "model_name" in s.labels
    }
    if not named or (model is None and len(named) == 1):
        return samples
    shown = ", ".join(sorted(with_hidden_shown(n)[:60] for n in named)[:5])
    if model is None:
        raise SizingError(
            f"{source} counts for several models ({shown}) and felab does not know which one "
            "it timed: name it with --model to have the server's own figures"
        )
    ours = {n for n in named if n.strip().casefold() == model.strip().casefold()}
    if not ours:
        raise SizingError(
            f"{source} counts only for other models ({shown}), not "
            f"{with_hidden_shown(model)[:60]}: those counters are not this model's, so they "
            "are not used; check --model"
        )
    return [s for s in samples if s.name not in table or s.labels.get("model_name") in ours]


#: A server kind's name (server_kinds.ServerKind) -> the engine whose counters it serves.
_KIND_ENGINES = {"llamacpp": LLAMA_CPP, "vllm": VLLM}


def scrape(
    base_url: str,
    client: httpx.Client | None = None,
    timeout: float = 5.0,
    *,
    kind: str | None = None,
    model: str | None = None,
) -> Snapshot:
    """GET {base_url}/metrics and parse it; say plainly when the endpoint is off. With `kind`
    (the server's kind, as ServerKind names it), counters of another engine are refused; with
    `model`, only that model's series are read (parse_metrics)."""
    url = base_url.rstrip("/") + "/metrics"
    own = client is None
    http = client or direct_client(timeout)
    try:
        try:
            response = get_bounded(http, url)
        except httpx.HTTPError as exc:
            raise Unreachable(connect_failure(exc, url)) from None
        taken = time.monotonic()
    finally:
        if own:
            http.close()
    if response.status_code in (401, 403):  # behind a key or a login: not switched off
        raise SizingError(
            f"{url_password_masked(url)} answered HTTP {response.status_code}: the server "
            f"{credentials_refused(url, ' for its /metrics')}; its own figures are left out"
        )
    if response.status_code != 200:
        raise SizingError(
            f"{url_password_masked(url)} answered HTTP {response.status_code}: no Prometheus "
            "figures there (llama-server needs --metrics, SGLang --enable-metrics; vLLM serves "
            "them by default, so for vLLM check that this is the server's own address)"
        )
    snap = parse_metrics(
        response.text, taken_at=taken, source=url_password_masked(url), model=model
    )
    expected = _KIND_ENGINES.get(kind or "")
    if expected is not None and snap.engine != expected:
        raise SizingError(  # one record would say llama.cpp and keep "the vllm server" figures
            f"{url_password_masked(url)} serves {snap.engine}'s counters, but the server is "
            f"{expected} by its answers or --kind: two servers behind one address (a proxy?), "
            "so its figures are not used; time the server directly"
        )
    return snap


#: Past these a server's /metrics say nothing true of a run: one stream (as engine.token_counts'
#: MAX_SERVER_TPS), every stream of a machine together, and tokens counted between two looks.
MOST_STREAM_TPS = 100_000.0
MOST_ALL_STREAMS_TPS = 10_000_000.0
MOST_COUNTED = 1e12
#: Prompt tokens a server reads in a second, all requests together: prefill on the largest
#: GPUs is hundreds of thousands; past this a count is not a reading (10^12 in 0.14 s had been).
MOST_PROMPT_TPS = 10_000_000.0


@dataclass(frozen=True)
class ServerRates:
    """What the server itself counted between two snapshots."""

    engine: str
    seconds: float
    deltas: dict[str, float]

    def delta(self, name: str) -> float | None:
        return self.deltas.get(name)

    @property
    def prompt_tokens(self) -> float | None:
        return self.delta("prompt_tokens")

    @property
    def generation_tokens(self) -> float | None:
        return self.delta("generation_tokens")

    @property
    def generation_tokens_per_second(self) -> float | None:
        """All streams together over the wall time between snapshots (throughput)."""
        gen = self.generation_tokens
        if gen is None or self.seconds <= 0:
            return None
        return gen / self.seconds

    @property
    def stream_tokens_per_second(self) -> float | None:
        """One stream's writing speed as the server timed it.

        llama.cpp: tokens written ÷ time spent writing them (summed over seats). vLLM: 1 ÷ mean
        inter-token latency.
        """
        if self.engine == LLAMA_CPP:
            gen, secs = self.delta("generation_tokens"), self.delta("generation_seconds")
            if gen and secs:
                return gen / secs
            return None
        total, count = self.delta("itl_sum"), self.delta("itl_count")
        if total and count:
            return count / total
        return None

    @property
    def prompt_tokens_per_second(self) -> float | None:
        """llama.cpp's prompt reading speed (tokens ÷ time spent reading prompts)."""
        tokens, secs = self.delta("prompt_tokens"), self.delta("prompt_seconds")
        if tokens and secs:
            return tokens / secs
        return None

    @property
    def mean_ttft_seconds(self) -> float | None:
        """vLLM's mean time to first token over the requests finished between snapshots."""
        total, count = self.delta("ttft_sum"), self.delta("ttft_count")
        if total is not None and count:
            return total / count
        return None

    def past_reason(self) -> str | None:
        """What no server's own counters can say of one benchmark run, in words, or None: a
        stream faster than any (10^27 tokens a second had been printed and saved), all streams
        past any machine, a first token in no time, a count of more tokens than a day holds."""
        checks = (
            (self.stream_tokens_per_second, 0.0, MOST_STREAM_TPS, "one stream's speed"),
            (self.generation_tokens_per_second, 0.0, MOST_ALL_STREAMS_TPS, "all streams' speed"),
            (self.mean_ttft_seconds, 1e-6, 86_400.0, "the mean time to first token"),
            (self.generation_tokens, 0.0, MOST_COUNTED, "the tokens written"),
            (self.prompt_tokens, 0.0, MOST_COUNTED, "the prompt tokens read"),
        )
        for value, least, most, what in checks:
            if value is not None and not (math.isfinite(value) and least <= value <= most):
                return f"{what} would be {value:.3g}"
        prompt = self.prompt_tokens
        if prompt is not None and prompt > MOST_PROMPT_TPS * max(self.seconds, 1.0):
            return f"{prompt:.3g} prompt tokens read in {self.seconds:.3g} s"
        return None

    @property
    def explanation(self) -> str:
        parts = [
            f"Between the two snapshots ({decimal_text(Fraction(self.seconds), 1)} s) "
            f"the {self.engine} server"
        ]
        gen, prompt = self.generation_tokens, self.prompt_tokens
        counted = []
        if prompt is not None:
            counted.append(f"read {whole_text(Fraction(prompt))} prompt tokens")
        if gen is not None:
            counted.append(f"wrote {whole_text(Fraction(gen))} tokens")
        parts.append(" and ".join(counted) if counted else "counted nothing felab reads")
        text = " ".join(parts) + "."
        stream = self.stream_tokens_per_second
        if stream is not None:
            speed = decimal_text(Fraction(stream), 1)
            text += f" By its own clock one stream wrote {speed} tokens per second."
        ttft = self.mean_ttft_seconds
        if ttft is not None:
            text += f" Mean time to first token: {decimal_text(Fraction(ttft) * 1000, 0)} ms."
        tput = self.generation_tokens_per_second
        if tput is not None:
            rate = decimal_text(Fraction(tput), 1)
            text += f" All streams together: {rate} tokens per second of wall time."
        return text


def diff(before: Snapshot, after: Snapshot) -> ServerRates:
    """Server-side rates between two snapshots of the same server."""
    if before.engine != after.engine:
        raise SizingError(
            f"the two snapshots come from different servers ({before.engine} and {after.engine})"
        )
    seconds = after.taken_at - before.taken_at
    if seconds < 0:
        raise SizingError("the 'after' snapshot was taken before the 'before' one; swap them")
    deltas: dict[str, float] = {}
    for name, value in after.values.items():
        if name in _GAUGES:
            continue
        old = before.values.get(name, 0.0)
        if value < old:
            raise SizingError(
                f"{name} went down between the snapshots ({old:g} to {value:g}): the server "
                "restarted in between, so the difference means nothing; run the measurement again"
            )
        deltas[name] = value - old
    return ServerRates(engine=after.engine, seconds=seconds, deltas=deltas)
