"""Sweep 22 (c) C4, C15, C17, C22: a log of several startups is read as its last startup alone,
and one startup's two max lengths are held to each other."""

from __future__ import annotations

import pytest

from felab_core.sizing import vllm_log
from felab_core.sizing.errors import SizingError

FIRST = (
    "INFO Initializing a V1 LLM engine (v0.9.1) with config: max_seq_len=8192, "
    "kv_cache_dtype=fp8\n"
    "INFO Model loading took 14.99 GiB\n"
    "INFO Available KV cache memory: 20.50 GiB\n"
    "INFO GPU KV cache size: 335,872 tokens\n"
    "INFO Maximum concurrency for 8,192 tokens per request: 41.00x\n"
)


def test_a_restart_is_read_alone_not_mixed_with_the_first_startup() -> None:
    """C4: the restart's 16,000 tokens had been shown beside the first startup's 20.50x, 8,192
    and 20.50 GiB; the restart runs at 131,072 and cannot hold one conversation."""
    restart = (
        "INFO Initializing a V1 LLM engine (v0.9.1) with config: max_seq_len=131072\n"
        "INFO GPU KV cache size: 16,000 tokens\n"
    )
    reading = vllm_log.parse_log(FIRST + restart)
    assert (reading.tokens, reading.max_len, reading.printed_concurrency) == (16_000, 131_072, None)
    assert reading.kv_memory_bytes is None and reading.weights_bytes is None
    assert "1 earlier startup in the log was skipped" in reading.explanation
    with pytest.raises(SizingError, match="cannot hold one conversation"):
        reading.capacity()


def test_the_first_startups_cache_type_is_not_carried_into_a_restart() -> None:
    """C15: kv_cache_dtype=fp8 of the first startup was carried into a restart naming none, and
    --kv-dtype bf16 to correct it refused."""
    restart = (
        "INFO Model loading took 14.99 GiB\n"
        "INFO GPU KV cache size: 520,000 tokens\n"
        "INFO Maximum concurrency for 8,192 tokens per request: 63.48x\n"
    )
    reading = vllm_log.parse_log(FIRST + restart)
    assert reading.kv_cache_dtype is None and reading.tokens == 520_000
    assert reading.capacity(kv_dtype="bf16").tokens == 520_000


def test_a_block_size_after_the_cache_is_not_applied_to_it() -> None:
    """C17: block_size=32 after "# GPU blocks: 10496" (of 16) showed 5,248 blocks x 32."""
    log = (
        "INFO # GPU blocks: 10496, # CPU blocks: 2048\n"
        "INFO GPU KV cache size: 167,936 tokens\n"
        "INFO Maximum concurrency for 8,192 tokens per request: 20.50x\n"
        "INFO block_size=32\n"
    )
    reading = vllm_log.parse_log(log)
    assert reading.block_size is None and reading.capacity().tokens == 167_936
    assert "from line 4 begin another startup that printed no cache" in reading.explanation


def test_one_startups_max_seq_len_and_concurrency_length_are_held_together() -> None:
    """C22: max_seq_len=131072 beside 'for 8,192 tokens' in one startup was read as 8,192."""
    log = FIRST.replace("max_seq_len=8192", "max_seq_len=131072")
    with pytest.raises(SizingError, match=r"max model length disagrees: 8,192 tokens .*131,072"):
        vllm_log.parse_log(log)
    assert vllm_log.parse_log(FIRST).max_len == 8192
