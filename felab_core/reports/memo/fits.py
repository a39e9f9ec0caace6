"""What the machine can hold: the memo refuses a cache or weights and cache that no machine of
the named chip could keep in memory at once, rather than plan conversations that cannot run.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from felab_core.reports.memo.model import CacheBudget, Machine, MemoError, MemoInputs
from felab_core.sizing import kv, speed_limit
from felab_core.sizing.errors import SizingError
from felab_core.sizing.shape import ModelShape
from felab_core.sizing.shape_agreement import Reading, hold_together
from felab_core.sizing.units import (
    GiB,
    as_fraction,
    binary_size_text,
    both_ways,
    size_text,
    tidy_text,
    whole_text,
)
from felab_core.sizing.vllm_log import VllmReading

# A server may spread its cache over a node of GPUs (tensor parallel); eight is the usual node.
NODE_GPUS = 8


def _apple(chip: speed_limit.Chip) -> bool:
    return chip.family.startswith("Apple")


def _largest(machines: Sequence[Machine], device: str | None = None) -> speed_limit.Chip:
    """The chip whose memory bounds one device's figures: the named chips' largest; the table's
    largest when a machine is known only by its bandwidth, or when a CPU server on a GPU
    machine reports the host's memory, which no chip's figure bounds. A Mac's chip bounds even
    a CPU server (its memory is the chip's): 400 GiB had passed on a 64 GB M4 Pro."""
    chips = [m.chip for m in machines if m.chip is not None]
    cpu = device is not None and device.upper() == "CPU"
    if len(chips) < len(machines) or (cpu and not all(_apple(c) for c in chips)):
        chips = list(speed_limit.CHIPS)
    return max(chips, key=lambda c: c.memory_bytes)


def check_cache_fits(memory: Fraction, machines: Sequence[Machine]) -> None:
    """Refuse a cache bigger than a full node of the named chips (or of the largest chip known);
    a Mac is one chip, with no node of them to spread over."""
    biggest = _largest(machines)
    node = 1 if all(m.chip is not None and _apple(m.chip) for m in machines) else NODE_GPUS
    if memory > node * biggest.memory_bytes:
        many = f"{NODE_GPUS} x " if node > 1 else ""
        raise MemoError(
            f"--kv-memory {both_ways(memory)} is more than {many}{biggest.name} "
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


def memory_planned(
    held: Fraction, budget: CacheBudget, per_token: kv.KvPerToken, *, typed: bool = False
) -> tuple[Fraction, Fraction, str]:
    """The weights and the cache one device holds, and where the weights' figure is from: a vLLM
    log's own figures (one GPU's share) where it gives them, else the model's weights and the
    cache its tokens take. One sum for the check and the memo's line, so they cannot disagree."""
    reading = budget.reading
    cache = budget.memory_bytes
    if cache is None:  # given in tokens or blocks (or a log without the memory line)
        cache = budget.base.tokens * per_token.bytes
    if reading is not None and reading.weights_bytes is not None:
        if not typed:  # a typed file (--model-bytes) may be another server's quantized copy
            _log_weights_held(held, reading, budget, per_token)
        return reading.weights_bytes, cache, f", as {reading.source} says"
    return held, cache, ""


def typed_weights_note(held: Fraction, budget: CacheBudget, per_token: kv.KvPerToken) -> str | None:
    """--model-bytes beside a vLLM log's weights, held together as the model's own weights are
    (`_log_weights_held`): 1 GB typed beside "Loading weights took 15 GiB" had passed without a
    word. Said, not refused: the typed file may be another server's quantized copy."""
    reading = budget.reading
    if reading is None or reading.weights_bytes is None:
        return None
    try:
        _log_weights_held(
            held,
            reading,
            budget,
            per_token,
            model=f"--model-bytes for {per_token.shape.name}",
            then="the memory held takes the log's figure, the speed limit --model-bytes; if "
            "the log's server reads the same file, check --model-bytes or the log",
        )
    except SizingError as exc:
        return f"Note: {exc}"
    return None


def _log_weights_held(
    held: Fraction,
    reading: VllmReading,
    budget: CacheBudget,
    per_token: kv.KvPerToken,
    *,
    model: str | None = None,
    then: str = "the log is of another model or was edited; give the model the server loads "
    "(--model-bytes with its files' size, or its --config/--gguf)",
) -> None:
    """Hold the log's weights (one GPU's share) to the model's: the speed limit had read 16.06
    GB of tensors while the memory sum took the log's "Model loading took 1.00 GiB". The GPUs
    the weights are spread over are those the log's cache memory beside its tokens implies;
    without that, up to 16. Half to twice the share is loading's own overhead or a dtype."""
    assert reading.weights_bytes is not None
    memory, tokens = reading.kv_memory_bytes, budget.base.tokens
    gpus = max(1, round(tokens * per_token.bytes / memory)) if memory and tokens else None
    how = "as its cache memory beside its tokens implies"
    if reading.gpus is not None:
        gpus, how = reading.gpus, "its tensor x pipeline parallel size"
    over = (
        f"over {gpus} GPU{'' if gpus == 1 else 's'}, {how}"
        if gpus
        else f"over up to {MOST_GPUS_SHARED} GPUs"
    )
    share = held / (gpus or 1)
    hold_together(
        "the weights on one GPU",
        Reading(reading.weights_bytes, size_text(reading.weights_bytes, 2), reading.source),
        Reading(
            share,
            f"{size_text(share, 2)} ({size_text(held, 2)} {over})",
            model or _model(per_token),
        ),
        low=1 / (2 * (1 if gpus else MOST_GPUS_SHARED)),
        high=2,
        room="the speed limit and the memory held take one weights figure",
        then=then,
    )


def _model(per_token: kv.KvPerToken) -> str:
    return f"{per_token.shape.name}'s weights"


def memory_line(
    held: Fraction, budget: CacheBudget, per_token: kv.KvPerToken, *, typed: bool = False
) -> str:
    """The memo's line for what the machine holds: weights + cache = their sum."""
    weights, cache, _ = memory_planned(held, budget, per_token, typed=typed)
    return (
        f"{size_text(weights, 1)} of weights + {size_text(cache, 1)} of cache = "
        f"{size_text(weights + cache, 1)}"
    )


def check_machine_memory(
    held: Fraction,
    budget: CacheBudget,
    per_token: kv.KvPerToken,
    machines: Sequence[Machine],
    *,
    typed: bool = False,
) -> None:
    """Refuse weights and cache that no machine of the named chip could hold at once.

    A chip from the table bounds them by its memory (the most it ships with); a machine given
    by its bandwidth, by a full node of the table's largest chip. A vLLM log's figures are one
    device's: summed too (16 GiB of weights and 73 GiB of cache on one H100 had passed, each
    under 80 GB), though a CPU server's on a GPU machine are the host's, which no chip bounds.
    """
    weights, cache, said = memory_planned(held, budget, per_token, typed=typed)
    total = weights + cache
    need = (
        f"the weights ({size_text(weights, 1)}{said}) and {budget.short} "
        f"({size_text(cache, 1)}) need {size_text(total, 1)}"
    )
    device = budget.reading.device if budget.reading is not None else None
    cpu = device is not None and device.upper() == "CPU"
    for machine in machines:
        chip = machine.chip
        if chip is None:
            biggest = _largest(machines)
            if total <= NODE_GPUS * biggest.memory_bytes:
                continue
            raise MemoError(
                f"{need}, more than {NODE_GPUS} x {biggest.name} ({biggest.memory}), the largest "
                "in felab's table, could hold: check --model-bytes and the cache's "
                "size (--kv-tokens, --blocks), or name the machine with --chip"
            )
        if total <= chip.memory_bytes or (cpu and not _apple(chip)):
            continue
        spread = (
            ""
            if _apple(chip)  # one Mac's memory: no second chip to spread to
            else "; for a server spread over several GPUs, give their total bandwidth with "
            "--bandwidth instead of --chip"
        )
        fix = (
            f"{budget.reading.source} is from another machine, or was edited"
            if budget.reading is not None
            else "check --model-bytes, and give only the memory left for the cache after the "
            "weights"
        )
        raise MemoError(f"{need}, more than {chip.name} comes with ({chip.memory}): {fix}{spread}")


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
    gpus = [m.chip for m in machines if m.chip is not None and not _apple(m.chip)]
    if reading.device is not None and reading.device.upper() == "CPU" and gpus:
        raise MemoError(  # its host's memory had been summed beside an H100's 80 GB, unchecked
            f"{reading.source} is a CPU server's log (its cache line says CPU), and --chip "
            f"names {gpus[0].name}, a GPU with {gpus[0].memory}: the log is from another machine "
            "or the chip is wrong; give the log of the server on that chip, or name the CPU "
            "server's machine by its memory bandwidth (--bandwidth GBPS)"
        )
    biggest = _largest(machines, reading.device)  # a Mac's CPU server: its chip's memory
    fix = "the log was edited or is from another machine; give the cache with --kv-tokens"
    one = reading.device or "GPU"
    for what, value in (
        ("weights took", reading.weights_bytes),
        ("cache has", reading.kv_memory_bytes),
    ):
        if value is not None and value > biggest.memory_bytes:
            raise MemoError(
                f"{reading.source} says the {what} {size_text(value, 2)} of one {one}'s memory, "
                f"more than {biggest.name} comes with ({biggest.memory}): {fix}"
            )
    if reading.weights_bytes is not None and reading.weights_bytes * 64 < model_weights:
        raise MemoError(  # 16 GPUs' share, at a quarter of the model file's bits
            f"{reading.source} says the weights took {size_text(reading.weights_bytes, 2)} of one "
            f"{one}'s memory, and the model's are {size_text(model_weights, 1)}, at least 1/64 "
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
