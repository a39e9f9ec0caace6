"""The speed limit (bandwidth ÷ bytes per token) and server-side rates from /metrics."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from felab_core.sizing import SizingError, kv, metrics_scrape, speed_limit
from felab_core.sizing.errors import BadAnswer
from felab_core.sizing.known_models import known_model
from felab_core.sizing.units import GB, parse_bytes

FIXTURES = Path(__file__).parent / "fixtures"
Q4_K_M = 4_912_898_304  # Llama 3.1 8B Q4_K_M, the figure the peer notes cite


def _limit(chip: str, weights: int | Fraction = Q4_K_M) -> speed_limit.Ceiling:
    found = speed_limit.find_chip(chip)
    return speed_limit.ceiling(found.bytes_per_second, speed_limit.bytes_per_token(weights), found)


# ---------------------------------------------------------------- chips and ceilings


def test_every_chip_has_a_source_and_a_positive_bandwidth() -> None:
    families = {c.family for c in speed_limit.CHIPS}
    assert {
        "Apple M-series",
        "NVIDIA data center",
        "NVIDIA consumer",
        "NVIDIA DGX Spark",
        "AMD Instinct",
    } <= families
    for chip in speed_limit.CHIPS:
        assert chip.bandwidth_gb_s > 0 and chip.source


@pytest.mark.parametrize(
    ("chip", "about"),
    [
        ("M4", 24),
        ("M4 Max (16-core CPU)", 111),
        ("H100 SXM", 682),
        ("DGX Spark", 56),
        ("RTX 5090", 365),
    ],
)
def test_ceilings_match_the_figures_people_cite(chip: str, about: int) -> None:
    assert round(_limit(chip).tokens_per_second) == about


@pytest.mark.parametrize(
    ("name", "gb_s", "memory"),
    [
        ("mi250x", Fraction("3276.8"), "128 GB HBM2e"),
        ("MI300X", 5300, "192 GB HBM3"),
        ("AMD Instinct MI325X", 6000, "256 GB HBM3E"),
        ("amd mi355x", 8000, "288 GB HBM3E"),
    ],
)
def test_amd_instinct_chips_with_their_public_figures(
    name: str, gb_s: Fraction | int, memory: str
) -> None:
    chip = speed_limit.find_chip(name)
    assert chip.family == "AMD Instinct" and chip.bandwidth_gb_s == gb_s
    assert chip.memory.startswith(memory) and "AMD" in chip.source


def test_chip_lookup_forgives_spelling_and_refuses_unknowns() -> None:
    assert speed_limit.find_chip("apple m4 pro").bandwidth_gb_s == 273
    assert speed_limit.find_chip("h100-sxm").name == "H100 SXM"
    with pytest.raises(SizingError, match="felab size chips"):
        speed_limit.find_chip("Z80")


def test_context_adds_the_cache_read() -> None:
    shape = known_model("llama-3.1-8b")
    per = kv.kv_bytes_per_token(shape)
    reads = speed_limit.bytes_per_token(Q4_K_M, kv=per, context_tokens=8192)
    assert reads.kv_cache == 8192 * 131_072
    limit = speed_limit.ceiling(273 * GB, reads)
    assert limit.tokens_per_second < _limit("M4 Pro").tokens_per_second
    assert "of cache for 8,192 tokens of context" in limit.explanation


def test_moe_reads_only_active_weights() -> None:
    shape = known_model("qwen3-30b-a3b")
    weights, note = speed_limit.weights_for(shape, Fraction(16))
    assert weights == 3_300_000_000 * 2  # 3.3B active x 2 bytes, not the 30.5B of the file
    assert "active" in note
    dense = replace(shape, weights_bytes=1000)
    assert dense.weights_read_per_token() is None  # an MoE without its expert split is not guessed
    with pytest.raises(SizingError, match=r"weight size of .* is unknown"):
        speed_limit.weights_for(dense)


@given(bw=st.integers(1, 10_000), weights=st.integers(100_000, 10**12), extra=st.integers(0, 10**9))
def test_ceiling_falls_as_bytes_rise(bw: int, weights: int, extra: int) -> None:
    low = speed_limit.ceiling(bw * GB, speed_limit.bytes_per_token(weights + extra))
    high = speed_limit.ceiling(bw * GB, speed_limit.bytes_per_token(weights))
    assert low.tokens_per_second <= high.tokens_per_second


def test_speed_verdicts() -> None:
    limit = _limit("M4 Pro", parse_bytes("4.9 GB"))
    assert speed_limit.check_speed(44.6, limit).verdict == "typical"
    assert speed_limit.check_speed("20", limit).verdict == "well below the limit"
    assert speed_limit.check_speed(52, limit).verdict == "very close to the limit"
    too_fast = speed_limit.check_speed(70, limit)
    assert too_fast.impossible and too_fast.verdict == "impossible"
    for cause in ("prompt tokens were counted", "from a cache", "a different, smaller"):
        assert cause in too_fast.explanation


@pytest.mark.parametrize("bad", [0, -3])
def test_bad_speed_inputs_are_refused(bad: int) -> None:
    limit = _limit("M4")
    with pytest.raises(SizingError, match="measured writing speed must be more than zero"):
        speed_limit.check_speed(bad, limit)
    with pytest.raises(SizingError, match="memory bandwidth must be more than zero"):
        speed_limit.ceiling(bad, speed_limit.bytes_per_token(Q4_K_M))
    with pytest.raises(SizingError, match="bytes of weights read per token must be more than zero"):
        speed_limit.bytes_per_token(bad)


# ---------------------------------------------------------------- /metrics


def _vllm(name: str, at: float) -> metrics_scrape.Snapshot:
    return metrics_scrape.parse_metrics((FIXTURES / name).read_text(), taken_at=at)


def test_vllm_snapshots_and_rates_from_the_real_server() -> None:
    before = _vllm("vllm_0.32.0_cpu_metrics_before.txt", 0.0)
    after = _vllm("vllm_0.32.0_cpu_metrics_after.txt", 2.0)
    assert before.engine == after.engine == "vllm"
    assert after.info["num_gpu_blocks"] == "16384"
    rates = metrics_scrape.diff(before, after)
    assert rates.prompt_tokens == 4 and rates.generation_tokens == 16
    assert rates.delta("requests_finished") == 1
    assert rates.mean_ttft_seconds == pytest.approx(0.06528306007385254)
    assert rates.stream_tokens_per_second == pytest.approx(15 / 0.0668973570000162)
    assert rates.generation_tokens_per_second == 8
    assert "wrote 16 tokens" in rates.explanation


LLAMA_TEXT = """# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total {prompt}
# HELP llamacpp:prompt_seconds_total Total time spent processing prompts
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total {prompt_s}
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total {gen}
# HELP llamacpp:tokens_predicted_seconds_total Total time spent generating tokens
# TYPE llamacpp:tokens_predicted_seconds_total counter
llamacpp:tokens_predicted_seconds_total {gen_s}
# HELP llamacpp:requests_processing Number of requests processing
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 0
"""


def _llama(
    prompt: int, prompt_s: float, gen: int, gen_s: float, at: float
) -> metrics_scrape.Snapshot:
    text = LLAMA_TEXT.format(prompt=prompt, prompt_s=prompt_s, gen=gen, gen_s=gen_s)
    return metrics_scrape.parse_metrics(text, taken_at=at)


def test_llama_cpp_rates() -> None:
    before = _llama(10, 0.01, 100, 1.0, at=5.0)
    after = _llama(110, 0.11, 300, 3.0, at=9.0)
    rates = metrics_scrape.diff(before, after)
    assert rates.engine == "llama.cpp"
    assert rates.stream_tokens_per_second == pytest.approx(100.0)
    assert rates.prompt_tokens_per_second == pytest.approx(1000.0)
    assert rates.generation_tokens_per_second == pytest.approx(50.0)
    assert "requests_running" not in rates.deltas


def test_restart_between_snapshots_is_refused() -> None:
    with pytest.raises(SizingError, match="restarted in between"):
        metrics_scrape.diff(_llama(100, 1, 100, 1, 0), _llama(5, 0.1, 5, 0.1, 1))


def test_mixed_or_foreign_metrics_are_refused() -> None:
    with pytest.raises(SizingError, match="different servers"):
        metrics_scrape.diff(_llama(1, 1, 1, 1, 0), _vllm("vllm_0.32.0_cpu_metrics_after.txt", 1))
    with pytest.raises(SizingError, match=r"no llama.cpp .* or vLLM"):
        metrics_scrape.parse_metrics("# TYPE go_goroutines gauge\ngo_goroutines 12\n")
    # Tenth sweep: an OpenAI-style server's JSON got the parser's own words about labels.
    with pytest.raises(SizingError, match="answered with JSON, not Prometheus text"):
        metrics_scrape.parse_metrics('{"object": "list", "data": [{"id": "m"}]}')


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-Inf", "-5"])
def test_a_counter_no_server_keeps_is_the_servers_fault(value: str) -> None:
    text = (
        f"# TYPE llamacpp:tokens_predicted_total counter\nllamacpp:tokens_predicted_total {value}\n"
    )
    with pytest.raises(BadAnswer, match="llamacpp:tokens_predicted_total"):
        metrics_scrape.parse_metrics(text)


def test_a_limit_under_one_token_keeps_its_first_figure() -> None:
    """273 GB/s over a 5,000 GB file said 'about 0 tokens per second' (twelfth sweep)."""
    huge = _limit("M4 Pro", 5000 * GB).explanation
    assert "= about 0.05 tokens per second (0.05)" in huge
    assert "more than one M4 Pro holds (up to 64 GB), so check the size" in huge
    fits = _limit("M4 Pro", Fraction("4.9") * GB).explanation
    assert "= about 56 tokens per second" in fits and "check the size" not in fits


def test_one_least_model_size_for_the_limit_and_the_record() -> None:
    """Fifteenth sweep M6: `size limit --model-bytes 1000` printed 3.35 billion tokens a second
    while `numbers model` refused 100 kB; felab's own tiny test model (703 kB) passes both."""
    with pytest.raises(SizingError, match=r"smallest, felab.s own tiny test model, is 0\.7 MB"):
        speed_limit.bytes_per_token(99_999)
    assert speed_limit.bytes_per_token(703_040).weights == 703_040


@pytest.mark.parametrize(
    ("after", "says"),
    [
        (_llama(110, 0.11, 10**15, 1e-12, at=5.3), "one stream's speed would be"),  # 10^27 tok/s
        (_llama(110, 0.11, 10**100, 3.0, at=5.3), "would be"),  # exit 70 in the explanation
    ],
)
def test_counters_no_run_could_leave_are_not_used(
    after: metrics_scrape.Snapshot, says: str
) -> None:
    """Seventeenth sweep (a2) H2, H3: 10^27 tokens a second was printed and saved; a jump of
    10^100 stopped the bench (exit 70) and lost the run."""
    from felab_core.engine.runner import _server_rates

    kept = _server_rates(_llama(10, 0.01, 0, 0.0, at=5.0), after, _run_at(100.0))
    assert kept is not None and "do not fit this run" in kept["explanation"]
    assert says in kept["explanation"] and "stream_tps" not in kept
    honest = _server_rates(
        _llama(10, 0.01, 100, 1.0, at=5.0), _llama(110, 0.11, 300, 3.0, 9.0), _run_at(100.0)
    )
    assert honest is not None and honest["stream_tps"] == pytest.approx(100.0)


def _run_at(writing_tps: float, e2e_s: float = 1.0) -> Any:
    """The summary of a run whose streams felab timed writing this fast."""
    from felab_core.engine.metrics import RequestMetrics, summarize

    tpot = 1 / writing_tps
    done = [
        RequestMetrics(i, True, None, ttft_s=0.1, tpot_s=tpot, writing_tps=writing_tps, e2e_s=e2e_s)
        for i in range(4)
    ]
    return summarize(done, duration_s=4.0)


@pytest.mark.parametrize(
    ("after", "says"),
    [
        # eighteenth sweep (a) H3: 10^12 prompt tokens in 4 s; 8 tokens over 10^9 s of decoding
        (_llama(10**12, 0.11, 300, 3.0, 9.0), "prompt tokens read in 4 s"),
        (_llama(110, 0.11, 300, 1e9, 9.0), "where felab timed 100"),
    ],
)
def test_counters_that_contradict_the_run_felab_timed_are_not_used(
    after: metrics_scrape.Snapshot, says: str
) -> None:
    """A server's counters said 0.0 tokens a second for streams felab saw write 49 a second,
    and 10^12 prompt tokens read in a 0.14 s run; both were printed and stored."""
    from felab_core.engine.runner import _server_rates

    kept = _server_rates(_llama(10, 0.01, 100, 1.0, at=5.0), after, _run_at(100.0))
    assert kept is not None and "do not fit this run" in kept["explanation"], kept
    assert says in kept["explanation"] and "stream_tps" not in kept


def _received(tokens_each: int, requests: int = 3) -> Any:
    """The summary of a run whose streams felab received this many tokens each from."""
    from felab_core.engine.metrics import RequestMetrics, summarize

    done = [RequestMetrics(i, True, None, output_tokens=tokens_each) for i in range(requests)]
    return summarize(done, duration_s=1.0)


@pytest.mark.parametrize(
    ("after", "says"),
    [
        (
            _llama(10, 0.01, 100, 1.0, at=5.3),
            "would have written 0 tokens, where felab received 24",
        ),
        (_llama(20, 0.02, 105, 1.05, at=5.3), "would have written 5 tokens, where felab received"),
        (_llama(10, 0.01, 124, 1.2, at=5.3), "would have read no prompt tokens"),
    ],
)
def test_counters_that_did_not_count_the_run_are_not_the_servers(
    after: metrics_scrape.Snapshot, says: str
) -> None:
    """Twentieth sweep (a) A01: counters that did not move while felab received 24 tokens
    were saved as "the server wrote 0 tokens, 0.0 tok/s"; 5 written for 24 received too."""
    from felab_core.engine.runner import _server_rates

    kept = _server_rates(_llama(10, 0.01, 100, 1.0, at=5.0), after, _received(8))
    assert kept is not None and "do not fit this run" in kept["explanation"], kept
    assert says in kept["explanation"] and "generation_tokens" not in kept
    honest = _server_rates(
        _llama(10, 0.01, 100, 1.0, at=5.0), _llama(310, 0.31, 124, 1.2, at=5.3), _received(8)
    )
    assert honest is not None and honest["generation_tokens"] == 24


def test_counters_that_went_down_are_said_not_dropped() -> None:
    """Eighteenth sweep (a) L2: a counter lower after the run than before (a restart) left the
    record's server_metrics empty without a word."""
    from felab_core.engine.runner import _server_rates

    said = _server_rates(
        _llama(110, 0.11, 300, 3.0, 5.0), _llama(10, 0.01, 100, 1.0, 9.0), _run_at(100.0)
    )
    assert said is not None and "restarted in between" in said["explanation"]
    assert "stream_tps" not in said


def test_a_mean_first_token_longer_than_the_window_is_not_used() -> None:
    """Eighteenth sweep (a) H3: vLLM's TTFT sum of 80,000 s over one request, between looks
    0.2 s apart, was printed as "Mean time to first token: 80,000,000 ms" and stored."""
    from felab_core.engine.runner import _server_rates

    def looks(ttft_sum: float, at: float) -> metrics_scrape.Snapshot:
        text = (
            f"vllm:time_to_first_token_seconds_sum {ttft_sum}\n"
            f"vllm:time_to_first_token_seconds_count {1 if ttft_sum else 0}\n"
        )
        return metrics_scrape.parse_metrics(text, taken_at=at)

    lied = _server_rates(looks(0, 5.0), looks(80_000, 5.2), _run_at(100.0))
    assert lied is not None and "between looks 0.2 s apart" in lied["explanation"]
    honest = _server_rates(looks(0, 5.0), looks(0.15, 5.2), _run_at(100.0))
    assert honest is not None and honest["mean_ttft_s"] == pytest.approx(0.15)


def test_small_weights_are_divided_in_a_unit_that_is_not_zero() -> None:
    """Eighteenth sweep (c) L1: felab's own tiny model read "3,350 GB/s ÷ 0.00 GB"."""
    tiny = _limit("H100 SXM", 689_408).explanation
    assert "3,350 GB/s ÷ 689.41 kB = about 4,859,242 tokens per second" in tiny, tiny
    assert "0.00 GB" not in tiny
    assert "÷ 500 MB = about 6,700" in _limit("H100 SXM", 500_000_000).explanation


@pytest.mark.parametrize(
    ("name", "variants"),
    [("M4 Max", ("14-core", "16-core")), ("h100", ("SXM", "PCIe", "NVL")), ("A100", ("40GB",))],
)
def test_a_name_that_fits_several_chips_is_refused_with_them(
    name: str, variants: tuple[str, ...]
) -> None:
    """Twentieth sweep (c) C32: 'M4 Max' was read as the 16-core one (546 GB/s), though the
    14-core one reads 410: a student on it got a speed limit a third too high."""
    with pytest.raises(SizingError, match="chips of different speeds") as caught:
        speed_limit.find_chip(name)
    assert all(v in str(caught.value) for v in variants)
    assert speed_limit.find_chip("M4 Max (14-core CPU)").bandwidth_gb_s == 410
