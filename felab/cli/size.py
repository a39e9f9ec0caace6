"""`felab size ...`: the course's sizing arithmetic at the terminal, with the working shown.

Each command calls one felab_core.sizing service, prints a small table of the numbers and then the
plain-words explanation the service wrote. Bad input ends with a one-line message and exit code 2.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import TypeVar

import typer
from rich.console import Console
from rich.table import Table

from felab_core.sizing import capacity as cap
from felab_core.sizing import kv, slots, speed_limit, vllm_log
from felab_core.sizing.errors import SizingError
from felab_core.sizing.model_shape import ModelShape, resolve_shape, weights_summary
from felab_core.sizing.units import (
    GB,
    about_text,
    as_fraction,
    binary_size_text,
    both_ways,
    decimal_text,
    gb_text,
    mib_text,
    parse_bandwidth,
    parse_bytes,
    tidy_text,
    whole_text,
)

size_app = typer.Typer(
    name="size",
    help="Sizing arithmetic: KV cache, capacity and concurrency, llama.cpp slots, the speed limit.",
    no_args_is_help=True,
)

T = TypeVar("T")


def _console() -> Console:
    return Console(highlight=False)


def _say(console: Console, text: str) -> None:
    """Print prose as it is: no markup parsing, no hard wrapping (copy-paste keeps lines whole)."""
    console.print(text, markup=False, soft_wrap=True)


@contextmanager
def _sizing_errors() -> Iterator[None]:
    """Turn a SizingError into one clear line on stderr and exit code 2."""
    try:
        yield
    except SizingError as exc:
        Console(stderr=True, highlight=False).print(f"error: {exc}", markup=False, soft_wrap=True)
        raise typer.Exit(code=2) from None


def _guard(fn: Callable[[], T]) -> T:
    with _sizing_errors():
        return fn()


def _maybe_shape(config: Path | None, gguf: Path | None, model: str | None) -> ModelShape | None:
    if config is None and gguf is None and model is None:
        return None
    return resolve_shape(config=config, gguf=gguf, model=model)


# ---------------------------------------------------------------- kv


@size_app.command("kv")
def kv_command(
    config: Path | None = typer.Option(
        None, "--config", help="A Hugging Face config.json (or its folder)."
    ),
    gguf: Path | None = typer.Option(None, "--gguf", help="A GGUF model file."),
    model: str | None = typer.Option(
        None, "--model", help="A model from felab's table (e.g. llama-3.1-8b)."
    ),
    dtype: str = typer.Option(
        "f16", "--dtype", help="KV cache type: f32, f16, bf16, fp8, q8_0, q4_0."
    ),
    value_dtype: str | None = typer.Option(
        None, "--value-dtype", help="llama.cpp only: a different type for values (-ctv)."
    ),
    tokens: int | None = typer.Option(
        None, "--tokens", "-c", help="Also show the memory for this many tokens."
    ),
) -> None:
    """KV cache bytes per token (2 x layers x KV heads x head size x bytes), and for N tokens."""
    console = _console()
    with _sizing_errors():
        shape = resolve_shape(config=config, gguf=gguf, model=model)
        per = kv.kv_bytes_per_token(shape, dtype, value_dtype)
        memory = kv.kv_memory(tokens, per) if tokens is not None else None
    table = Table(title=f"KV cache: {shape.name}")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("layers", str(shape.n_layers))
    table.add_row("query heads", str(shape.n_heads))
    if shape.latent_cache_dim is not None:
        table.add_row("latent cache numbers per layer", str(shape.latent_cache_dim))
    else:
        table.add_row("KV heads", str(shape.n_kv_heads))
        head = (
            str(shape.head_dim_k)
            if shape.head_dim_k == shape.head_dim_v
            else f"{shape.head_dim_k}/{shape.head_dim_v}"
        )
        table.add_row("head size (numbers)", head)
    if shape.context_length:
        table.add_row("trained context (tokens)", whole_text(shape.context_length))
    table.add_row(
        "cache type",
        per.key_dtype.name
        if per.key_dtype == per.value_dtype
        else f"{per.key_dtype.name}/{per.value_dtype.name}",
    )
    table.add_row("bytes per token", f"{tidy_text(per.bytes)} ({binary_size_text(per.bytes)})")
    if memory is not None:
        table.add_row(
            f"memory for {whole_text(memory.tokens)} tokens",
            f"{mib_text(memory.bytes)} = {gb_text(memory.bytes)}",
        )
    if shape.weights_bytes is not None:
        table.add_row("weights", both_ways(shape.weights_bytes))
    table.add_row("source", shape.source)
    console.print(table)
    _say(console, shape.describe())
    _say(console, per.explanation)
    if memory is not None:
        _say(console, memory.explanation)


# ---------------------------------------------------------------- capacity


@size_app.command("capacity")
def capacity_command(
    blocks: int | None = typer.Option(
        None, "--blocks", help="Cache blocks (vLLM's '# GPU blocks')."
    ),
    block_size: int | None = typer.Option(
        None, "--block-size", help="Tokens per block (vLLM's default: 16)."
    ),
    tokens: int | None = typer.Option(
        None, "--tokens", help="Cache size in tokens (vLLM's 'KV cache size')."
    ),
    max_len: int | None = typer.Option(
        None, "--max-len", help="--max-model-len, the longest conversation."
    ),
    kv_dtype: str = typer.Option(
        "f16", "--kv-dtype", help="The cache type the server uses (auto = f16)."
    ),
    vllm_log_file: Path | None = typer.Option(
        None, "--vllm-log", help="Read blocks and lengths from a vLLM startup log."
    ),
    url: str | None = typer.Option(
        None, "--url", help="Read a running vLLM's /metrics and /v1/models."
    ),
    try_dtype: str = typer.Option("fp8", "--try-dtype", help="What-if cache type."),
    try_max_len: int | None = typer.Option(
        None, "--try-max-len", help="What-if max length (default: half)."
    ),
) -> None:
    """Cache capacity and worst-case conversations at once; what fp8 or a shorter max buys."""
    console = _console()
    with _sizing_errors():
        reading: vllm_log.VllmReading | None = None
        if vllm_log_file is not None or url is not None:
            if blocks is not None or tokens is not None:
                raise SizingError("give either --blocks/--tokens or --vllm-log/--url, not both")
            if vllm_log_file is not None and url is not None:
                raise SizingError("give either --vllm-log or --url, not both")
            if vllm_log_file is not None:
                reading = vllm_log.parse_log_file(vllm_log_file)
            else:
                assert url is not None
                reading = vllm_log.read_live_vllm(url)
            base = reading.capacity(block_size=block_size, max_len=max_len)
            if reading.kv_cache_dtype is None:
                base = replace(base, kv_dtype=kv.kv_dtype(kv_dtype).name)
        else:
            if max_len is None:
                raise SizingError(
                    "give --max-len (the server's --max-model-len), e.g. --max-len 8192"
                )
            if blocks is not None and tokens is not None:
                raise SizingError("give --blocks or --tokens, not both")
            if blocks is not None:
                base = cap.capacity_from_blocks(
                    blocks, block_size or 16, max_len, kv.kv_dtype(kv_dtype).name
                )
            elif tokens is not None:
                base = cap.capacity_from_tokens(
                    tokens, max_len, block_size, kv.kv_dtype(kv_dtype).name
                )
            else:
                raise SizingError(
                    "give --blocks (with --block-size), --tokens, --vllm-log FILE or --url URL"
                )
        changes = cap.standard_what_ifs(
            base, kv_from=base.kv_dtype or kv_dtype, kv_to=try_dtype, max_len=try_max_len
        )
    table = Table(title="Cache capacity and worst-case concurrency")
    for col, justify in (
        ("setting", "left"),
        ("blocks", "right"),
        ("tokens", "right"),
        ("max length", "right"),
        ("tokens ÷ max", "right"),
        ("conversations", "right"),
        ("x as started", "right"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]

    def row(label: str, c: cap.Capacity, factor: Fraction | None) -> None:
        table.add_row(
            label,
            whole_text(c.blocks) if c.blocks is not None else "-",
            whole_text(c.tokens),
            whole_text(c.max_len),
            decimal_text(c.concurrency, 2),
            whole_text(c.whole_requests),
            tidy_text(factor) if factor is not None else "1",
        )

    row(f"as started ({base.kv_dtype or kv_dtype})", base, None)
    for change in changes:
        row(change.after.label, change.after, change.factor)
    console.print(table)
    if reading is not None:
        _say(console, reading.explanation)
        for note in reading.consistency_notes():
            _say(console, note)
    _say(console, base.explanation)
    for change in changes:
        _say(console, change.explanation)


# ---------------------------------------------------------------- slots


@size_app.command("slots")
def slots_command(
    ctx: int | None = typer.Option(
        None, "-c", "--ctx", help="llama-server's -c (cache length in tokens)."
    ),
    parallel: int | None = typer.Option(
        None,
        "--parallel",
        "-np",
        help="llama-server's --parallel (seats); leave out for its default.",
    ),
    unified: bool = typer.Option(
        False, "--unified", "-kvu", "--kv-unified", help="One cache shared by all seats."
    ),
    url: str | None = typer.Option(
        None, "--url", help="Ask a running llama-server (/props, /slots) instead."
    ),
    need: int | None = typer.Option(
        None, "--need", help="Tokens one conversation needs (prompt + reply)."
    ),
    each: int | None = typer.Option(
        None,
        "--each",
        help="Tokens each seat should get in the fix (default: --need rounded up to 256).",
    ),
    config: Path | None = typer.Option(
        None, "--config", help="Model config.json, to cost the cache."
    ),
    gguf: Path | None = typer.Option(None, "--gguf", help="Model GGUF file, to cost the cache."),
    model: str | None = typer.Option(
        None, "--model", help="Model from felab's table, to cost the cache."
    ),
    kv_type: str = typer.Option(
        "f16", "--kv-type", help="llama.cpp cache type (-ctk): f16, q8_0, q4_0 ..."
    ),
) -> None:
    """The slot trap: what context each llama-server seat really gets, and the -c that fixes it."""
    console = _console()
    with _sizing_errors():
        shape = _maybe_shape(config, gguf, model)
        if url is not None:
            if parallel is not None or unified:
                raise SizingError(
                    "with --url the server says how many seats it has; drop --parallel/--unified "
                    "(give -c only if you know what it was started with)"
                )
            verdict = slots.read_live(
                url, ctx=ctx, need=need, shape=shape, kv_type=kv_type, tokens_each=each
            )
        else:
            if ctx is None:
                raise SizingError(
                    "give -c (the cache length llama-server gets), "
                    "or --url of a running llama-server"
                )
            verdict = slots.check_flags(
                ctx, parallel, unified, need=need, shape=shape, kv_type=kv_type, tokens_each=each
            )
    table = Table(title="llama-server seats")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("read from", verdict.source)
    table.add_row("seats", str(verdict.slots))
    mode = {True: "unified (shared)", False: "split", None: "not reported"}[verdict.unified]
    table.add_row("cache mode", mode)
    if verdict.shared_total is not None:
        table.add_row("cache, all seats", f"{whole_text(verdict.shared_total)} tokens")
    table.add_row("most one seat can hold", f"{whole_text(verdict.per_slot)} tokens")
    if verdict.need is not None and verdict.ratio is not None:
        table.add_row(
            "one conversation needs",
            f"{whole_text(verdict.need)} tokens ({decimal_text(verdict.ratio, 1)} seats' room)",
        )
    table.add_row("verdict", verdict.verdict)
    if verdict.fix is not None and (verdict.fits is False or verdict.all_seats_fit is False):
        table.add_row("fix", verdict.fix.flags)
        if verdict.fix.memory is not None:
            table.add_row(
                "fix costs",
                f"{mib_text(verdict.fix.memory.bytes)} = {gb_text(verdict.fix.memory.bytes)}",
            )
    console.print(table)
    _say(console, verdict.explanation)


# ---------------------------------------------------------------- limit


@size_app.command("limit")
def limit_command(
    bandwidth: str | None = typer.Option(
        None, "--bandwidth", help="Memory bandwidth, GB/s (e.g. 273 or '3.35 TB/s')."
    ),
    chip: str | None = typer.Option(
        None, "--chip", help="A chip from `felab size chips` (e.g. 'M4 Pro', H100)."
    ),
    model_bytes: str | None = typer.Option(
        None, "--model-bytes", help="Bytes of weights read per token, e.g. 4.9GB."
    ),
    gguf: Path | None = typer.Option(
        None, "--gguf", help="A GGUF file: its weights (active experts only for MoE)."
    ),
    config: Path | None = typer.Option(
        None, "--config", help="A model folder with config.json and safetensors."
    ),
    model: str | None = typer.Option(
        None, "--model", help="A model from felab's table (needs --bits-per-weight)."
    ),
    bits_per_weight: str | None = typer.Option(
        None, "--bits-per-weight", help="With --model: bits per weight (16, 8, 4.5 ...)."
    ),
    context: int = typer.Option(
        0, "--context", help="Tokens already in the conversation (their cache is read too)."
    ),
    kv_type: str = typer.Option("f16", "--kv-type", help="Cache type for --context."),
    measured: str | None = typer.Option(
        None, "--measured", help="A measured or typed writing speed, tokens/s."
    ),
) -> None:
    """The speed limit: tokens/s <= bandwidth ÷ bytes read per token; a measured speed beside it."""
    console = _console()
    with _sizing_errors():
        if (bandwidth is None) == (chip is None):
            raise SizingError("give the machine one way: --bandwidth GBPS or --chip NAME")
        found = speed_limit.find_chip(chip) if chip is not None else None
        bw = found.bytes_per_second if found is not None else parse_bandwidth(bandwidth or "")
        shape = None
        if model_bytes is not None:
            if gguf or config or model:
                raise SizingError(
                    "give the weights one way: --model-bytes, --gguf, --config or --model"
                )
            weights = parse_bytes(model_bytes, default_unit="bytes")
            note = f"{both_ways(weights)} as given"
        else:
            shape = _maybe_shape(config, gguf, model)
            if shape is None:
                raise SizingError(
                    "give the weights: --model-bytes 4.9GB, --gguf FILE, "
                    "--config DIR or --model NAME"
                )
            bits = as_fraction(bits_per_weight) if bits_per_weight is not None else None
            weights, note = speed_limit.weights_for(shape, bits)
        per = None
        if context:
            if shape is None:
                raise SizingError(
                    "--context needs the model's shape: use --gguf, --config or --model"
                )
            per = kv.kv_bytes_per_token(shape, kv_type)
        reads = speed_limit.bytes_per_token(
            weights, kv=per, context_tokens=context, weights_note=note
        )
        limit = speed_limit.ceiling(bw, reads, found)
        check = speed_limit.check_speed(measured, limit) if measured is not None else None
    table = Table(title="Single-stream speed limit")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("machine", found.name if found else "as given")
    table.add_row("memory bandwidth", f"{tidy_text(bw / GB)} GB/s")
    table.add_row("weights read per token", both_ways(reads.weights))
    if reads.kv_cache:
        table.add_row(f"cache read at {whole_text(context)} tokens", both_ways(reads.kv_cache))
    table.add_row(
        "ceiling",
        f"{about_text(limit.tokens_per_second)} tokens/s "
        f"({decimal_text(limit.tokens_per_second, 2)})",
    )
    if check is not None:
        table.add_row(
            "measured",
            f"{decimal_text(check.measured, 1)} tokens/s = "
            f"{decimal_text(check.share * 100, 0)} % of the ceiling",
        )
        table.add_row("verdict", check.verdict)
    console.print(table)
    if shape is not None and shape.weights_read_per_token() is not None:
        _say(console, weights_summary(shape) + ".")
    _say(console, limit.explanation)
    if check is not None:
        _say(console, check.explanation)


# ---------------------------------------------------------------- chips


@size_app.command("chips")
def chips_command(
    model_bytes: str | None = typer.Option(
        None, "--model-bytes", help="Add each chip's ceiling for this many bytes per token."
    ),
    family: str | None = typer.Option(
        None, "--family", help="Only chips whose family contains this (Apple, NVIDIA ...)."
    ),
) -> None:
    """The bandwidth table: Apple M-series, NVIDIA data-center and consumer GPUs, DGX Spark."""
    console = _console()
    weights = _guard(lambda: parse_bytes(model_bytes) if model_bytes is not None else None)
    table = Table(title="Memory bandwidth by chip")
    table.add_column("chip")
    table.add_column("family")
    table.add_column("GB/s", justify="right")
    table.add_column("memory")
    if weights is not None:
        table.add_column(f"ceiling for {gb_text(weights)}", justify="right")
    table.add_column("source")
    for c in speed_limit.CHIPS:
        if family is not None and family.lower() not in c.family.lower():
            continue
        cells = [c.name, c.family, tidy_text(c.bandwidth_gb_s), c.memory]
        if weights is not None:
            cells.append(f"{decimal_text(c.bytes_per_second / weights, 1)} tokens/s")
        cells.append(c.source)
        table.add_row(*cells)
    console.print(table)
    _say(
        console,
        "One conversation's writing speed can never beat bandwidth ÷ bytes read per token; "
        "measured runs usually reach 55-85 % of it.",
    )
