"""Every worked number on the course page, produced by the sizing functions.

Each row quotes the page's own line, then asks felab for the figure the way the page shows it.
No arithmetic happens in the test: a row only calls sizing functions and formats their results.
Units are checked both ways (GB and GiB/MiB) wherever the page mixes them.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import pytest

from felab_core.sizing import capacity, change, kv, slots, speed_limit, vllm_log
from felab_core.sizing.known_models import known_model
from felab_core.sizing.units import (
    about_text,
    about_words,
    binary_size_text,
    decimal_text,
    gb_text,
    gib_text,
    mib_text,
    parse_bandwidth,
    parse_bytes,
    tidy_text,
    whole_text,
)

FIXTURES = Path(__file__).parent / "fixtures"
LLAMA = known_model("Llama 3.1 8B")
PER_TOKEN = kv.kv_bytes_per_token(LLAMA, "f16")
TRAP = slots.check_flags(8192, 4, False, need=8000, shape=LLAMA, tokens_each=8192)
FIX = slots.slot_fix(4, 8192, LLAMA, "f16")
VIDEO = capacity.capacity_from_blocks(8234, 16, 8192, "f16")
FP8, SHORTER, BOTH = capacity.standard_what_ifs(VIDEO, kv_to="fp8", max_len=4096)
MAC = speed_limit.ceiling(
    parse_bandwidth("273 GB/s"),
    speed_limit.bytes_per_token(parse_bytes("4.9 GB")),
    speed_limit.find_chip("M4 Pro"),
)


def _memory(tokens: int) -> kv.KvMemory:
    return kv.kv_memory(tokens, PER_TOKEN)


# (the page's line, what felab computes, how the page writes the result)
ROWS: list[tuple[str, Callable[[], str], str]] = [
    # Step 1 card: the slot trap
    ("Each seat: 8,192 ÷ 4 = 2,048 tokens", lambda: whole_text(TRAP.per_slot), "2,048"),
    (
        "Each of the 4 seats gets only 2,048 tokens",
        lambda: f"{TRAP.slots}/{TRAP.per_slot}",
        "4/2048",
    ),
    (
        "2,048 tokens (about 1,500 words)",
        lambda: whole_text(about_words(TRAP.per_slot)),
        "1,500",
    ),
    ("-c 8192 = 8,192 tokens, about 6,000 words", lambda: whole_text(about_words(8192)), "6,000"),
    (
        "(8,000 ÷ 2,048 = 3.9), so it does not fit",
        lambda: f"{decimal_text(TRAP.ratio or Fraction(0), 1)} {TRAP.verdict}",
        "3.9 does not fit",
    ),
    ("For 4 seats of 8,192 tokens: 4 x 8,192 = 32,768", lambda: whole_text(FIX.ctx), "32,768"),
    (
        "32,768, which takes 4.29 GB of notes for this model",
        lambda: gb_text(FIX.memory.bytes) if FIX.memory else "",
        "4.29 GB",
    ),
    (
        "4 x 8,192 = 32,768, which is 4,096 MiB of f16 cache for Llama 3.1 8B",
        lambda: mib_text(_memory(32768).bytes),
        "4,096 MiB",
    ),
    (
        "at 128 KiB per token (lesson 05)",
        lambda: f"{tidy_text(PER_TOKEN.bytes)} bytes = {binary_size_text(PER_TOKEN.bytes)}",
        "131,072 bytes = 128 KiB",
    ),
    (
        "32,768 tokens of notes take 4.29 GB for Llama 3.1 8B",
        lambda: f"{gb_text(_memory(32768).bytes)} = {gib_text(_memory(32768).bytes)}",
        "4.29 GB = 4.00 GiB",
    ),
    # Step 1 card: what to ask a customer, and Whiteboard 1
    (
        "8,234 x 16 = 131,744 tokens of notes",
        lambda: whole_text(VIDEO.tokens),
        "131,744",
    ),
    (
        "Blocks one full conversation needs: 8,192 ÷ 16 = 512 blocks.",
        lambda: whole_text(VIDEO.blocks_per_request or 0),
        "512",
    ),
    (
        "131,744 ÷ 8,192 = 16.08, so 16 people at once",
        lambda: f"{decimal_text(VIDEO.concurrency, 2)}, so {VIDEO.whole_requests}",
        "16.08, so 16",
    ),
    (
        "16.08, so 16 (the same as 8,234 ÷ 512)",
        lambda: str((VIDEO.blocks or 0) // (VIDEO.blocks_per_request or 1)),
        "16",
    ),
    (
        "the same memory holds 131,744 x 2 = 263,488 tokens",
        lambda: (
            f"x{tidy_text(FP8.after.tokens / FP8.before.tokens)} = {whole_text(FP8.after.tokens)}"
        ),
        "x2 = 263,488",
    ),
    ("263,488 ÷ 8,192 = 32 conversations", lambda: str(FP8.after.whole_requests), "32"),
    ("131,744 ÷ 4,096 = 32 conversations", lambda: str(SHORTER.after.whole_requests), "32"),
    (
        "Both together: 263,488 ÷ 4,096 = 64 conversations, four times the 16",
        lambda: f"{BOTH.after.whole_requests}, {tidy_text(BOTH.factor)} times",
        "64, 4 times",
    ),
    (
        "8-bit notes alone about double it: 16 x 2 = 32",
        lambda: f"{tidy_text(FP8.factor)} -> {FP8.after.whole_requests}",
        "2 -> 32",
    ),
    # Whiteboard 2: the three flags
    (
        "Conversations at once: 16 before, 50 after. 50 ÷ 16 = 3.1 times as many",
        lambda: change.compare(16, 50).more_text(),
        "50 ÷ 16 = 3.1 times as many",
    ),
    (
        "0.5 ÷ 1.6 = 0.31, about a third of the wait: over 3 times faster.",
        lambda: decimal_text(change.compare("1.6", "0.5").ratio, 2),
        "0.31",
    ),
    (
        "1.6 s to 0.5 s is a 69% cut (3.2 times faster)",
        lambda: (
            f"{decimal_text(change.compare('1.6', '0.5').cut_percent, 0)}% cut "
            f"({decimal_text(change.compare('1.6', '0.5').inverse, 1)} times faster)"
        ),
        "69% cut (3.2 times faster)",
    ),
    # Your numbers: the speed limit
    (
        "273 GB per second ÷ 4.9 GB = about 56 tokens per second",
        lambda: about_text(MAC.tokens_per_second),
        "about 56",
    ),
    (
        "Example: Day 1's sample Ollama row: 44.6, about 33 words a second.",
        lambda: str(about_words(Fraction("44.6"))),
        "33",
    ),
    # The kit's question, read as a log by the parser
    (
        "model weights 8.4 GB · # GPU blocks 8,234 · block size 16 tokens",
        lambda: whole_text(
            vllm_log.parse_log_file(FIXTURES / "course_page_whiteboard.txt").capacity().tokens
        ),
        "131,744",
    ),
]


@pytest.mark.parametrize(("quote", "compute", "expected"), ROWS, ids=[r[0][:60] for r in ROWS])
def test_course_page_number(quote: str, compute: Callable[[], str], expected: str) -> None:
    assert compute() == expected, quote


def _seed() -> Path | None:
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "shared" / "seeds" / "000_36963882bb2b2d1f.txt"
        if candidate.exists():
            return candidate
    return None


def test_every_quote_is_on_the_page() -> None:
    """The rows quote the page exactly (typographic apostrophes aside)."""
    seed = _seed()
    if seed is None:
        pytest.skip("the course page (shared/seeds) is not beside this checkout")
    page = seed.read_text(encoding="utf-8").replace("\u2019", "'")
    for quote, _, _ in ROWS:
        assert quote in page, quote


def test_explanations_speak_the_course_words() -> None:
    """The plain-words explanations carry the page's own sentence shapes and numbers."""
    assert "each of the 4 seats gets only 8,192 ÷ 4 = 2,048 tokens" in TRAP.explanation
    assert "8,000 ÷ 2,048 = 3.9 times one seat's room, so it does not fit" in TRAP.explanation
    assert "4 x 8,192 = 32,768" in FIX.explanation
    assert "4,096 MiB (4 GiB) = 4.29 GB" in FIX.explanation
    assert "8,234 blocks x 16 tokens = 131,744 tokens" in VIDEO.explanation
    assert "8,192 ÷ 16 = 512 blocks" in VIDEO.explanation
    assert "131,744 ÷ 8,192 = 16.08, so 16 conversations at once" in VIDEO.explanation
    assert "131,744 x 2 = 263,488 tokens" in FP8.explanation
    assert "263,488 tokens ÷ 4,096 = 64.33, so 64 conversations" in BOTH.explanation
    assert "273 GB/s ÷ 4.9 GB = about 56 tokens per second" in MAC.explanation
    assert "2 x 32 layers x 8 KV heads x 128 numbers x 2 bytes = 131,072 bytes" in (
        PER_TOKEN.explanation
    )
