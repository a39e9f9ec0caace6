"""Sweep 21 (c): two of vLLM's figures for one cache are held to each other (cache_figures)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.sizing import SizingError, vllm_log

CONC = "INFO Maximum concurrency for {n} tokens per request: {x}x\n"


def test_a_cache_in_tokens_its_blocks_cannot_give_is_refused() -> None:
    """1: 100,000 tokens beside 2,232 blocks of 16 (35,712; 2.8x apart) was read unsaid."""
    log = (
        "INFO config block_size=16\nINFO # GPU blocks: 2,232\n"
        "INFO GPU KV cache size: 100,000 tokens\n" + CONC.format(n="8,192", x="12.21")
    )
    with pytest.raises(SizingError, match="line 3, gives a cache of 100,000 tokens, and line 2"):
        vllm_log.parse_log(log)


def test_blocks_a_model_mixing_kinds_of_layers_prints_still_read() -> None:
    """Two cache groups: vLLM prints (blocks // 2) x 16 tokens."""
    log = (
        "INFO config block_size=16\nINFO # GPU blocks: 4,464\n"
        "INFO GPU KV cache size: 35,712 tokens\n" + CONC.format(n="8,192", x="4.36")
    )
    assert vllm_log.parse_log(log).tokens == 35_712


def test_a_printed_concurrency_below_its_tokens_is_refused() -> None:
    """1: 2.8x below the cache in tokens at the max length was only a note, "the one to trust"."""
    log = "INFO GPU KV cache size: 100,000 tokens\n" + CONC.format(n="8,192", x="4.36")
    with pytest.raises(SizingError, match=r"line 2, gives a maximum concurrency of 4\.36x"):
        vllm_log.parse_log(log)
    blocks = "INFO block_size=16\n# GPU blocks: 6,250\n" + CONC.format(n="8,192", x="4.36")
    with pytest.raises(SizingError, match=r"at least 12\.18x"):
        vllm_log.parse_log(blocks)
    above = "INFO GPU KV cache size: 100,000 tokens\n" + CONC.format(n="8,192", x="40.00")
    assert vllm_log.parse_log(above).printed_concurrency == 40  # sliding windows: a note


def test_a_restart_holds_each_startups_own_pairs() -> None:
    first = "INFO # GPU blocks: 6,250\nINFO GPU KV cache size: 100,000 tokens\n"
    first += CONC.format(n="8,192", x="12.21")
    second = "INFO GPU KV cache size: 50,000 tokens\n" + CONC.format(n="8,192", x="6.10")
    assert vllm_log.parse_log(first + second).tokens == 50_000


@pytest.mark.parametrize("memory", ["0.001", "0.00"])
def test_cache_memory_too_small_for_its_tokens_is_refused(memory: str) -> None:
    """3: 0.001 GiB beside 100,000 tokens (10.7 bytes a token) was bounded only by the largest
    GPU; every model takes at least 64 bytes a token on one GPU."""
    log = f"INFO Available KV cache memory: {memory} GiB\nINFO GPU KV cache size: 100,000 tokens\n"
    reading = vllm_log.parse_log(log + CONC.format(n="8,192", x="12.21"))
    with pytest.raises(SizingError, match=r"cache memory beside a cache of 100,000 tokens"):
        reading.memory_holds_tokens()


def test_cache_memory_that_holds_its_tokens_still_reads() -> None:
    log = "INFO Available KV cache memory: 0.01 GiB\nINFO GPU KV cache size: 100,000 tokens\n"
    vllm_log.parse_log(log + CONC.format(n="8,192", x="12.21")).memory_holds_tokens()


def test_size_capacity_refuses_a_tiny_memory_beside_a_huge_cache(tmp_path: Path) -> None:
    """3 at the terminal: `size capacity --vllm-log` without a model, exit 2, one line."""
    log = tmp_path / "vllm.log"
    log.write_text(
        "INFO Available KV cache memory: 0.001 GiB\nINFO GPU KV cache size: 100,000 tokens\n"
        + CONC.format(n="8,192", x="12.21")
    )
    result = CliRunner().invoke(app, ["size", "capacity", "--vllm-log", str(log)])
    assert result.exit_code == 2
    assert "at 64.00 bytes a token (the least any model takes)" in result.output, result.output
    assert "Traceback" not in result.output
