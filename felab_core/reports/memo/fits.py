"""What the machine can hold: the memo refuses a cache or weights and cache that no machine of
the named chip could keep in memory at once, rather than plan conversations that cannot run.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from felab_core.reports.memo.model import CacheBudget, Machine, MemoError, MemoInputs
from felab_core.sizing import kv, speed_limit
from felab_core.sizing.model_shape import ModelShape
from felab_core.sizing.units import (
    GiB,
    as_fraction,
    binary_size_text,
    both_ways,
    gb_text,
    tidy_text,
    whole_text,
)

# A server may spread its cache over a node of GPUs (tensor parallel); eight is the usual node.
NODE_GPUS = 8


def check_cache_fits(memory: Fraction, machines: Sequence[Machine]) -> None:
    """Refuse a cache bigger than a full node of the named chips (or of the largest chip known)."""
    chips = [m.chip for m in machines if m.chip is not None]
    if len(chips) < len(machines):  # a machine known only by its bandwidth: any chip could be it
        chips = list(speed_limit.CHIPS)
    biggest = max(chips, key=lambda c: c.memory_bytes)
    if memory > NODE_GPUS * biggest.memory_bytes:
        raise MemoError(
            f"--kv-memory {both_ways(memory)} is more than {NODE_GPUS} x {biggest.name} "
            f"({biggest.memory}) could hold; give the memory left for the cache after the "
            "weights, e.g. --kv-memory 16GiB"
        )


def weights_held(inputs: MemoInputs, shape: ModelShape, weights: Fraction) -> Fraction:
    """The weights the machine holds in memory: the file's size when given, else all the model's
    weights (a mixture of experts keeps every expert, though a token reads only a few)."""
    if inputs.model_bytes is not None or inputs.gguf is not None:
        share = speed_limit.active_share(shape)  # weights: the share of the file a token reads
        return weights / share if share else weights
    if not shape.is_moe:
        return weights
    if shape.weights_bytes:
        return Fraction(shape.weights_bytes)
    if shape.params_total and inputs.bits_per_weight:
        return Fraction(shape.params_total) * as_fraction(inputs.bits_per_weight) / 8
    return weights


def check_machine_memory(
    held: Fraction, budget: CacheBudget, per_token: kv.KvPerToken, machines: Sequence[Machine]
) -> None:
    """Refuse weights and cache that no machine of the named chip could hold at once.

    Only a chip from the table has a known memory (the most it ships with); a machine given by
    its bandwidth says nothing. A vLLM log's cache was measured on a server that ran, so it fit.
    """
    if budget.reading is not None:
        return
    cache = budget.memory_bytes
    if cache is None:  # given in tokens or blocks: what they take at the cache's type
        cache = budget.base.tokens * per_token.bytes
    total = held + cache
    for machine in machines:
        chip = machine.chip
        if chip is None or total <= chip.memory_bytes:
            continue
        spread = (
            ""
            if chip.family.startswith("Apple")  # one Mac's memory: no second chip to spread to
            else "; for a server spread over several GPUs, give their total bandwidth with "
            "--bandwidth instead of --chip"
        )
        raise MemoError(
            f"the weights ({gb_text(held, 1)}) and {budget.short} ({gb_text(cache, 1)}) need "
            f"{gb_text(total, 1)}, more than {chip.name} comes with ({chip.memory}): check "
            "--model-bytes, and give only the memory left for the cache after the weights"
            f"{spread}"
        )


#: A log's cache memory is one GPU's share: a server spread over up to this many GPUs (tensor
#: and pipeline parallel) keeps 1/16 of each token's cache on each; past that either way the
#: log's memory and its token count cannot both be true of this model.
MOST_GPUS_SHARED = 16
#: vLLM prints memory with two decimals: up to half of 0.01 GiB is its rounding.
_PRINTED_SLACK = Fraction(GiB, 200)


def check_reading_figures(
    budget: CacheBudget,
    per_token: kv.KvPerToken,
    model_weights: Fraction,
    machines: Sequence[Machine],
) -> None:
    """Refuse a vLLM log's memory figures the machine or the model rule out, rather than quote
    them: 9,999 GiB of weights on an H100, 0.001 GiB of cache memory beside 100,000 tokens."""
    reading = budget.reading
    if reading is None:
        return
    chips = [m.chip for m in machines if m.chip is not None]
    if len(chips) < len(machines) or any(c.family.startswith("Apple") for c in chips):
        chips = list(speed_limit.CHIPS)  # vLLM on a Mac runs on its CPU: any size is bounded
    biggest = max(chips, key=lambda c: c.memory_bytes)
    fix = "the log was edited or is from another machine; give the cache with --kv-tokens"
    one = reading.device or "GPU"
    for what, value in (
        ("weights took", reading.weights_bytes),
        ("cache has", reading.kv_memory_bytes),
    ):
        if value is not None and value > biggest.memory_bytes:
            raise MemoError(
                f"{reading.source} says the {what} {gb_text(value, 2)} of one {one}'s memory, "
                f"more than {biggest.name} comes with ({biggest.memory}): {fix}"
            )
    if reading.weights_bytes is not None and reading.weights_bytes * 64 < model_weights:
        raise MemoError(  # 16 GPUs' share, at a quarter of the model file's bits
            f"{reading.source} says the weights took {gb_text(reading.weights_bytes, 2)} of one "
            f"{one}'s memory, and the model's are {gb_text(model_weights, 1)}, at least 1/64 "
            f"of that on each of up to {MOST_GPUS_SHARED} GPUs: {fix}"
        )
    memory = reading.kv_memory_bytes
    if memory is None:
        return
    tokens = budget.base.tokens
    need = tokens * per_token.bytes
    if memory + _PRINTED_SLACK < need / MOST_GPUS_SHARED or (
        memory - _PRINTED_SLACK > need * MOST_GPUS_SHARED
    ):
        implied = (memory / tokens) if tokens else memory
        raise MemoError(
            f"{reading.source} gives {binary_size_text(memory)} of cache memory beside a cache "
            f"of {whole_text(tokens)} tokens, {tidy_text(implied)} bytes a token, where "
            f"{per_token.shape.name} takes {tidy_text(per_token.bytes)} bytes a token "
            f"({binary_size_text(per_token.bytes)}; a share of it on each of up to "
            f"{MOST_GPUS_SHARED} GPUs): the two figures contradict each other, or the log is "
            "of another model (--model); give the cache with --kv-tokens or --kv-memory"
        )
