"""Units, KV bytes, capacity and what-ifs: exact arithmetic, properties, refusals of bad input."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from felab_core.sizing import SizingError, capacity, change, kv
from felab_core.sizing.known_models import known_model
from felab_core.sizing.shape import ModelShape
from felab_core.sizing.units import (
    GB,
    GiB,
    KiB,
    article,
    both_ways,
    decimal_text,
    parse_bandwidth,
    parse_bytes,
    round_half_up,
)


def _shape(**kw: object) -> ModelShape:
    base = ModelShape(
        name="test",
        n_layers=32,
        n_heads=32,
        n_kv_heads=8,
        head_dim_k=128,
        head_dim_v=128,
        source="test",
    )
    return replace(base, **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------- units


def test_rounding_is_half_up_not_bankers() -> None:
    assert str(round_half_up(Fraction(5, 2), 0)) == "3"
    assert decimal_text(Fraction(1, 8), 2) == "0.13"
    assert decimal_text(Fraction(-5, 2), 0) == "-3"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4.9 GB", 49 * GB // 10),
        ("4.9GB", 49 * GB // 10),
        ("128 KiB", 128 * KiB),
        ("4,912,898,304", 4_912_898_304),
        ("1 GiB", GiB),
        ("2e9", 2 * GB),
    ],
)
def test_parse_bytes(text: str, expected: int) -> None:
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("bad", ["4.9 G", "lots", "4.9 furlongs", ""])
def test_parse_bytes_refuses_unclear_units(bad: str) -> None:
    with pytest.raises(SizingError, match=r"size|unit"):
        parse_bytes(bad)


def test_bandwidth_defaults_to_gb_per_second() -> None:
    assert parse_bandwidth("273") == 273 * GB
    assert parse_bandwidth("3.35 TB/s") == 3350 * GB


def test_a_speed_is_no_size_and_a_size_no_bandwidth() -> None:
    """Fifteenth sweep H13: `--bytes '273 GB/s'` stored a 273 GB model file, `--bandwidth 4.9GB`
    4.9 GB/s, and the speed limit came from the two."""
    for speed in ("273 GB/s", "3.35 TB/s", "4.9 GB / s"):
        with pytest.raises(SizingError, match="is a speed \\(per second\\), not a size"):
            parse_bytes(speed)
    for size in ("4.9GB", "16 GiB"):
        with pytest.raises(SizingError, match="is a size, not a memory bandwidth"):
            parse_bandwidth(size)
    assert parse_bandwidth("273 GB / s") == parse_bandwidth("273GB/s") == 273 * GB


def test_a_bandwidth_is_read_once_per_second_in_bytes() -> None:
    """Seventeenth sweep (c) M10: '273 GB/s/s' was answered with --model-bytes advice about
    '273 GB/s', and '273 GBps' called a size."""
    with pytest.raises(SizingError, match=r"could not read '273 GB/s/s' as a memory bandwidth"):
        parse_bandwidth("273 GB/s/s")
    assert parse_bandwidth("273 GBps") == 273 * GB
    with pytest.raises(SizingError, match="is in bits per second"):
        parse_bandwidth("273 Gbps")


def test_both_ways_shows_decimal_and_binary() -> None:
    assert both_ways(4 * GiB) == "4.29 GB = 4 GiB"
    assert both_ways(128 * KiB) == "131,072 bytes (128 KiB)"


def test_article_before_numbers() -> None:
    assert article(8000) == "an"
    assert article(11) == "an"
    assert article(2048) == "a"
    assert article(18_000) == "an"


# ---------------------------------------------------------------- kv


def test_kv_dtypes_have_exact_sizes() -> None:
    shape = known_model("llama-3.1-8b")
    assert kv.kv_bytes_per_token(shape, "f32").bytes == 262_144
    assert kv.kv_bytes_per_token(shape, "bf16").bytes == 131_072
    assert kv.kv_bytes_per_token(shape, "fp8").bytes == 65_536
    assert kv.kv_bytes_per_token(shape, "q8_0").bytes == 69_632  # 34 bytes per 32 numbers
    assert kv.kv_bytes_per_token(shape, "q4_0").bytes == 36_864  # 18 bytes per 32 numbers
    # llama.cpp's other -ctk types: ggml's block sizes (scale, minimum, high bits, quants)
    assert kv.kv_bytes_per_token(shape, "q4_1").bytes == 40_960  # 2 + 2 + 16 bytes per 32
    assert kv.kv_bytes_per_token(shape, "q5_0").bytes == 45_056  # 2 + 4 + 16 bytes per 32
    assert kv.kv_bytes_per_token(shape, "q5_1").bytes == 49_152  # 2 + 2 + 4 + 16 bytes per 32
    assert kv.kv_bytes_per_token(shape, "iq4_nl").bytes == 36_864  # 2 + 16 bytes per 32
    assert kv.kv_bytes_per_token(shape, "auto").bytes == 131_072


def test_llama_70b_matches_the_figure_people_cite() -> None:
    assert kv.kv_bytes_per_token(known_model("Llama 3.1 70B"), "f16").bytes == 327_680


def test_keys_and_values_may_differ_in_llama_cpp() -> None:
    per = kv.kv_bytes_per_token(known_model("llama-3.1-8b"), "f16", "q8_0")
    assert per.bytes == 32 * 8 * 128 * (2 + Fraction(34, 32))
    assert "keys as 16-bit floats" in per.explanation


def test_latent_and_per_layer_caches() -> None:
    latent = _shape(n_layers=61, latent_cache_dim=512 + 64)
    assert kv.kv_bytes_per_token(latent, "bf16").bytes == 61 * 576 * 2
    uneven = _shape(n_layers=3, kv_heads_by_layer=(2, 4, 0))
    assert kv.kv_bytes_per_token(uneven, "f16").bytes == (2 + 4) * 2 * 128 * 2


def test_unknown_kv_dtype_is_refused() -> None:
    with pytest.raises(SizingError, match="unknown KV cache type 'int3'"):
        kv.kv_dtype("int3")


@pytest.mark.parametrize("tokens", [0, -5])
def test_memory_for_no_tokens_is_refused(tokens: int) -> None:
    per = kv.kv_bytes_per_token(known_model("llama-3.1-8b"))
    with pytest.raises(SizingError, match="more than zero"):
        kv.kv_memory(tokens, per)


@given(layers=st.integers(1, 200), heads=st.integers(1, 64), dim=st.integers(1, 512))
def test_kv_bytes_grow_linearly_with_layers(layers: int, heads: int, dim: int) -> None:
    one = kv.kv_bytes_per_token(
        _shape(n_layers=1, n_kv_heads=heads, n_heads=heads, head_dim_k=dim, head_dim_v=dim)
    )
    many = kv.kv_bytes_per_token(
        _shape(n_layers=layers, n_kv_heads=heads, n_heads=heads, head_dim_k=dim, head_dim_v=dim)
    )
    assert many.bytes == layers * one.bytes
    assert one.bytes == 2 * heads * dim * 2


# ---------------------------------------------------------------- capacity


@given(
    blocks=st.integers(1, 10**6),
    extra=st.integers(0, 10**5),
    block_size=st.sampled_from([1, 8, 16, 32, 128]),
    max_len=st.integers(1, 200_000),
)
def test_concurrency_is_monotone_in_blocks(
    blocks: int, extra: int, block_size: int, max_len: int
) -> None:
    small = capacity.capacity_from_blocks(blocks, block_size, max_len)
    big = capacity.capacity_from_blocks(blocks + extra, block_size, max_len)
    assert big.concurrency >= small.concurrency
    assert big.whole_requests >= small.whole_requests
    # whole conversations never exceed the fractional figure vLLM prints
    assert small.whole_requests <= small.concurrency


@given(blocks=st.integers(1, 10**6), max_len=st.integers(2, 100_000))
def test_fp8_doubles_and_halving_length_at_least_doubles(blocks: int, max_len: int) -> None:
    base = capacity.capacity_from_blocks(blocks, 16, max_len, "f16")
    fp8 = capacity.what_if(base, kv_to="fp8")
    assert fp8.after.tokens == 2 * base.tokens
    shorter = capacity.what_if(base, max_len=max_len // 2)
    assert shorter.after.concurrency >= 2 * base.concurrency


def test_capacity_from_memory_matches_block_arithmetic() -> None:
    per = kv.kv_bytes_per_token(known_model("llama-3.1-8b"))
    cap = capacity.capacity_from_memory(8234 * 16 * per.bytes, per, 16, 8192)
    assert (cap.blocks, cap.tokens, cap.whole_requests) == (8234, 131_744, 16)


def test_part_filled_last_block_counts() -> None:
    cap = capacity.capacity_from_blocks(100, 16, 1000)
    assert cap.blocks_per_request == 63  # 1000 / 16 = 62.5, so 63 blocks
    assert cap.whole_requests == 1
    assert "part-filled" in cap.explanation


@pytest.mark.parametrize(
    ("blocks", "block_size", "max_len", "word"),
    [
        (0, 16, 8192, "blocks"),
        (-1, 16, 8192, "blocks"),
        (8234, 0, 8192, "block size"),
        (8234, 16, 0, "max model"),
    ],
)
def test_capacity_refuses_zero_and_negative(
    blocks: int, block_size: int, max_len: int, word: str
) -> None:
    with pytest.raises(SizingError, match=f"{word}.*more than zero"):
        capacity.capacity_from_blocks(blocks, block_size, max_len)


def test_nothing_fits_is_said_plainly() -> None:
    cap = capacity.capacity_from_blocks(10, 16, 8192)
    assert cap.whole_requests == 0
    assert "Not even one full-length conversation fits" in cap.explanation


def test_what_if_needs_a_change() -> None:
    with pytest.raises(SizingError, match="needs a new cache type"):
        capacity.what_if(capacity.capacity_from_blocks(1, 16, 16))


# ---------------------------------------------------------------- change


def test_change_refuses_zero() -> None:
    with pytest.raises(SizingError, match="more than zero"):
        change.compare(0, 5)


def test_one_byte_is_a_byte() -> None:
    """The fp8 working reads "x 1 byte", not "x 1 bytes"."""
    from felab_core.sizing import kv
    from felab_core.sizing.known_models import known_model
    from felab_core.sizing.units import bytes_text

    per = kv.kv_bytes_per_token(known_model("Llama 3.1 8B"), "fp8")
    assert "x 1 byte = 65,536 bytes" in per.explanation and "1 bytes" not in per.explanation
    assert [bytes_text(v) for v in (1, 2, 0.5)] == ["1 byte", "2 bytes", "0.5 bytes"]


def test_a_cache_no_server_holds_is_refused() -> None:
    """Each figure inside its own range can still multiply into nonsense: 10^9 blocks of 10^9
    tokens is a 10^18-token cache, and a 'block' of a million tokens is a token count."""
    with pytest.raises(SizingError, match="more than any server holds"):
        capacity.capacity_from_blocks(1_000_000_000, 16, 8192)
    with pytest.raises(SizingError, match="is no engine's"):
        capacity.capacity_from_blocks(10, 1_000_000, 8192)
    with pytest.raises(SizingError, match="is no engine's"):
        capacity.capacity_from_tokens(10_000_000, 8192, block_size=1_000_000)
    top = capacity.capacity_from_blocks(62_500_000, 16, 8192)  # 10^9 tokens: the most allowed
    assert top.tokens == 1_000_000_000


def test_a_negative_size_is_said_without_trailing_decimals() -> None:
    """Fourteenth sweep L8: "got -4,900,000,000.0000"."""
    from felab_core.sizing.units import require_positive

    with pytest.raises(SizingError, match=r"\(got -4,900,000,000\)"):
        require_positive("the bytes of weights", Fraction(-4_900_000_000))


def test_a_small_size_is_said_once_and_a_tiny_bit_width_as_typed() -> None:
    """Twentieth sweep (c) C22: '1,000 bytes (1,000 bytes)'; C4: --bits-per-weight 0.0001 was
    refused as '0 is out of range'."""
    from felab_core.sizing.units import both_ways

    assert both_ways(1000) == "1,000 bytes" and both_ways(0) == "0 bytes"
    assert both_ways(2048) == "2,048 bytes (2 KiB)"
    from typer.testing import CliRunner

    from felab.cli.main import app

    args = ["size", "limit", "--chip", "H100 SXM", "--model", "llama-3.1-8b"]
    out = CliRunner().invoke(app, [*args, "--bits-per-weight", "0.0001"])
    assert out.exit_code == 2 and "--bits-per-weight 0.0001 is out of range" in out.output


def test_a_measured_speed_that_shows_as_zero_is_refused() -> None:
    """Twentieth sweep (c) C24: --measured 1e-30 read '0.0 tokens per second is 0 %'."""
    from typer.testing import CliRunner

    from felab.cli.main import app

    args = ["size", "limit", "--bandwidth", "273", "--model", "llama-3.1-8b"]
    args += ["--bits-per-weight", "4.5", "--measured"]
    out = CliRunner().invoke(app, [*args, "1e-30"])
    assert out.exit_code == 2 and "less than one token every 1,000 s" in out.output
    assert CliRunner().invoke(app, [*args, "0.5"]).exit_code == 0
