"""A running vLLM's own account of its KV cache: /metrics' cache_config_info and /v1/models.

The same VllmReading as a startup log gives (vllm_log.py), read over HTTP; a server's figures
are held to the flags' own limits, so a broken or hostile server is said, never believed.
"""

from __future__ import annotations

from fractions import Fraction

import httpx

from felab_core.bounded_get import Deadline, direct_client, get_bounded
from felab_core.engine.request_errors import connect_failure, credentials_refused, has_login
from felab_core.redact import url_password_masked
from felab_core.sizing import cache_figures
from felab_core.sizing.capacity import MAX_BLOCK_SIZE
from felab_core.sizing.errors import BadAnswer, SizingError, Unreachable, answer_cut_off
from felab_core.sizing.metrics_scrape import VLLM, parse_metrics
from felab_core.sizing.units import MAX_TOKENS, as_fraction
from felab_core.sizing.vllm_log import VllmReading

#: The most a live vLLM's cache_config_info can say for each figure (the flags' own limits):
#: past these a server is broken or hostile, and its figures are not believed.
_MOST_FROM_SERVER = {
    "num_gpu_blocks": MAX_TOKENS,
    "num_cpu_blocks": MAX_TOKENS,
    "block_size": MAX_BLOCK_SIZE,  # what felab sizes: a larger one is the server's fault
    "kv_cache_size_tokens": 10 * MAX_TOKENS,
    "kv_cache_memory_bytes": 100 * 10**12,
}


def reading_from_metrics(
    metrics_text: str, max_len: int | None = None, source: str = "/metrics"
) -> VllmReading:
    """The cache facts in vLLM's `vllm:cache_config_info` labels (blocks, block size, dtype ...)."""
    snap = parse_metrics(metrics_text, source=source)
    if snap.engine != VLLM:
        raise SizingError(f"{source} is not vLLM's (it has {snap.engine} metrics)")
    info = snap.info
    if not info:
        raise SizingError(f"{source} has no vllm:cache_config_info; is this vLLM 0.4 or newer?")

    def label_int(name: str) -> int | None:
        raw = info.get(name)
        if raw is None or raw.strip() in ("", "None"):  # vLLM prints None for an unset figure
            return None
        if (
            not raw.isascii() or not raw.replace(".", "", 1).isdigit() or len(raw) > 30
        ):  # -5, NaN, 1e400, and 5,000 digits (past what Python reads as a number)
            raise BadAnswer(
                f"{source} reports {name} = {raw[:40]!r}: not a count any vLLM prints; check "
                "the server, or give the figures with --blocks/--tokens"
            )
        exact = Fraction(raw)
        if exact.denominator != 1:  # 10.5 blocks: counted, so never a fraction
            raise BadAnswer(
                f"{source} reports {name} = {raw[:40]}: a count, so a whole number in any "
                "vLLM; check the server, or give the figures with --blocks/--tokens"
            )
        value = int(exact)
        if value == 0 and name in ("num_gpu_blocks", "block_size", "kv_cache_size_tokens"):
            raise BadAnswer(
                f"{source} reports {name} = 0: a vLLM that is serving has a cache; check the "
                "server, or give the figures with --blocks/--tokens"
            )
        most = _MOST_FROM_SERVER.get(name, MAX_TOKENS)
        if value > most:
            raise BadAnswer(
                f"{source} reports {name} = {raw[:40]}: no vLLM has that (at most {most:,}); "
                "check the server, or give the figures with --blocks/--tokens"
            )
        return value

    tokens = label_int("kv_cache_size_tokens")
    conc_raw = info.get("kv_cache_max_concurrency")
    printed = None
    if conc_raw and conc_raw not in ("None", ""):
        try:
            printed = as_fraction(conc_raw)
        except SizingError:
            printed = None
        if printed is None or printed <= 0:
            raise BadAnswer(
                f"{source} reports kv_cache_max_concurrency = {conc_raw[:40]!r}: no vLLM "
                "prints that; check the server, or give --max-len and the cache size"
            )
    length = max_len
    if length is None and tokens and printed:
        implied = Fraction(tokens) / printed
        if not 1 <= implied <= MAX_TOKENS:  # kv_cache_max_concurrency of 1e-300
            raise BadAnswer(
                f"{source} reports kv_cache_max_concurrency = {conc_raw!r} for "
                f"{tokens:,} tokens: that is no model length; check the server, or give "
                "--max-len"
            )
        # vLLM rounds the figure it prints: the length is worked back only where that rounding
        # leaves one whole number (16.08x of 131,744 tokens is 8,190 to 8,195, and 8,193 had
        # been shown as what vLLM reported); otherwise capacity() asks for --max-len.
        decimals = len(conc_raw.partition(".")[2]) if conc_raw else 0
        spread = Fraction(tokens) * Fraction(1, 2 * 10**decimals) / (printed * printed)
        if spread < Fraction(1, 4):
            length = round(implied)
    gpu_blocks = label_int("num_gpu_blocks")
    if printed is not None:  # the blocks where given: they are what capacity() uses
        count, what = (gpu_blocks, "blocks") if gpu_blocks is not None else (tokens, "tokens")
        if count is not None and printed > count:  # 9,999 requests in 8,234 blocks
            raise BadAnswer(
                f"{source} reports kv_cache_max_concurrency = {str(conc_raw)[:40]} beside "
                f"{count:,} cache {what}, and each request holds at least one: the server's "
                "figures contradict each other; check the server, or size from the figures "
                "you trust: --tokens (or --blocks) with --max-len"
            )
    memory = label_int("kv_cache_memory_bytes")
    _figures_agree(source, tokens, gpu_blocks, label_int("block_size"), (printed, length))
    return VllmReading(
        format="metrics",
        gpu_blocks=gpu_blocks,
        cpu_blocks=label_int("num_cpu_blocks"),
        block_size=label_int("block_size"),
        block_size_from="log" if label_int("block_size") else None,
        tokens=tokens,
        max_len=length,
        printed_concurrency=printed,
        kv_cache_dtype=info.get("cache_dtype"),
        kv_memory_bytes=Fraction(memory) if memory else None,
        source=source,
    )


def _figures_agree(
    source: str,
    tokens: int | None,
    blocks: int | None,
    block_size: int | None,
    printed: tuple[Fraction | None, int | None],
) -> None:
    """Hold the server's figures for one cache to each other, as a log's are (cache_figures)."""
    fix = "the server's figures contradict each other; check the server, or give the figures "
    fix += "you trust with --tokens (or --blocks) and --max-len"
    try:
        if tokens is not None and blocks is not None:
            cache_figures.tokens_beside_blocks(
                (tokens, f"{source} (kv_cache_size_tokens)"),
                (blocks, "num_gpu_blocks ="),
                block_size,
                fix=fix,
            )
        if tokens is None and blocks is not None and block_size is not None:
            tokens = blocks * block_size
        conc, length = printed
        if conc is not None and length is not None and tokens is not None:
            cache_figures.concurrency_beside_tokens(
                (conc, f"{source} (kv_cache_max_concurrency)"),
                (tokens, "its blocks" if blocks is not None else "kv_cache_size_tokens"),
                length,
                block_size,
                fix=fix,
            )
    except SizingError as exc:
        raise BadAnswer(str(exc)) from None


def read_live_vllm(
    base_url: str, client: httpx.Client | None = None, timeout: float = 5.0
) -> VllmReading:
    """Ask a running vLLM: /metrics for the cache, /v1/models for the max model length."""
    base = base_url.rstrip("/")
    own = client is None
    http = client or direct_client(timeout)
    try:
        try:
            deadline = Deadline()  # both questions together, not 10 s each
            metrics = get_bounded(http, f"{base}/metrics", deadline_s=deadline.left())
            models = get_bounded(http, f"{base}/v1/models", deadline_s=deadline.left())
        except httpx.HTTPError as exc:
            raise Unreachable(connect_failure(exc, base)) from None
    finally:
        if own:
            http.close()
    shown = url_password_masked(base)
    if metrics.status_code >= 500:  # the server's own failure: exit 3, as a server fault
        raise BadAnswer(
            f"{shown}/metrics answered HTTP {metrics.status_code} (a server error): check the "
            "server's log"
        )
    if metrics.status_code == 200 and metrics.cut:  # the part read is no whole answer
        raise answer_cut_off(f"{shown}/metrics", metrics)  # (a cut /v1/models: no length)
    if metrics.status_code in (401, 403):  # a key or a login in front: not "is this vLLM?"
        why = (
            credentials_refused(base, " to read its cache")
            if has_login(base)
            else "wants an API key or a login, and felab sends none to read its cache"
        )
        raise BadAnswer(
            f"{shown}/metrics answered HTTP {metrics.status_code}: the server (or a proxy in front "
            f"of it) {why}; give its startup log with --vllm-log FILE, or the figures with "
            "--tokens N --max-len L"
        )
    if metrics.status_code != 200:
        raise SizingError(
            f"{url_password_masked(base)}/metrics answered HTTP {metrics.status_code}; is this "
            "a vLLM server?"
        )
    max_len = None
    if models.status_code == 200:
        try:
            data = models.json().get("data") or []  # type: ignore[attr-defined]
        except (ValueError, AttributeError):
            data = []
        if not isinstance(data, list):  # {"data": 5}: not a model list; the length is asked
            data = []
        for item in data:
            said = item.get("max_model_len") if isinstance(item, dict) else None
            if isinstance(said, int) and not isinstance(said, bool):
                if not 1 <= said <= MAX_TOKENS:
                    raise BadAnswer(
                        f"{url_password_masked(base)}/v1/models reports max_model_len = {said}: "
                        f"no model has that (1 to {MAX_TOKENS:,}); give --max-len"
                    )
                max_len = said
                break
    source = f"{url_password_masked(base)}/metrics"
    return reading_from_metrics(metrics.text, max_len=max_len, source=source)
