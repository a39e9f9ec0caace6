"""`felab size ...`: the course's sizing arithmetic at the terminal, with the working shown.

Each command calls one felab_core.sizing service, prints a small table of the numbers and then the
plain-words explanation the service wrote. Bad input ends with a one-line message and exit code 2.

Long because each `felab size` command spells out its options and help that teaches; the
arithmetic itself is in felab_core.sizing.
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

from felab.cli.errors import err
from felab.cli.output import Cell, Column, Format, Grid, emit, format_option
from felab_core.engine.targets import TargetError, normalize_base_url
from felab_core.sizing import capacity as cap
from felab_core.sizing import kv, slots, slots_live, speed_limit, vllm_live, vllm_log
from felab_core.sizing.errors import SizingError, Unreachable
from felab_core.sizing.gguf_weights import gguf_weights
from felab_core.sizing.model_shape import resolve_shape, weights_summary
from felab_core.sizing.shape import ModelShape
from felab_core.sizing.units import (
    GB,
    MAX_TOKENS,
    about_text,
    as_fraction,
    binary_size_text,
    both_ways,
    decimal_text,
    mib_text,
    parse_bandwidth,
    parse_model_bytes,
    round_half_up,
    size_text,
    tidy_text,
    whole_text,
)
from felab_core.text import shell_word

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


def _notes(console: Console, fmt: Format) -> Console:
    """Where the prose goes: under the table, or on stderr when stdout holds csv/json data."""
    return Console(stderr=True, highlight=False) if fmt.is_data else console


def _value(value: Fraction | int, places: int = 2) -> int | float:
    """A figure as CSV and JSON carry it: whole when whole, else rounded as the table shows it."""
    frac = Fraction(value)
    if frac.denominator == 1:
        return frac.numerator
    return float(round_half_up(frac, places))


def _whole(value: Fraction | int) -> Cell:
    return Cell(whole_text(value), int(round_half_up(Fraction(value), 0)))


def _decimal(value: Fraction | int, places: int) -> Cell:
    return Cell(decimal_text(value, places), float(round_half_up(Fraction(value), places)))


def _tidy(value: Fraction | int) -> Cell:
    return Cell(tidy_text(value), _value(value))


WHAT_VALUE = [
    Column("what", "what"),
    Column("value", "value", numeric=True),
    Column("unit", "unit", table=False),
]


def _pairs(title: str) -> Grid:
    """A what/value table: the table shows each value as read; CSV and JSON carry the figure
    itself (bytes as a whole count) with its unit."""
    return Grid(title, list(WHAT_VALUE))


def _pair(
    grid: Grid, what: str, shown: str, value: str | int | float | None = None, unit: str = ""
) -> None:
    grid.add(Cell(what, what), Cell(shown, shown if value is None else value), Cell(unit, unit))


@contextmanager
def _sizing_errors() -> Iterator[None]:
    """Turn a SizingError into one clear line on stderr and exit code 2 (3: unreachable)."""
    try:
        yield
    except SizingError as exc:
        err(str(exc))  # a path it names may hold an escape code: shown as '?'
        raise typer.Exit(code=3 if isinstance(exc, Unreachable) else 2) from None


def _flag(name: str, value: str | None) -> Fraction | None:
    """A number typed for flag `name`, or a SizingError that names the flag."""
    if value is None:
        return None
    try:
        number = as_fraction(value)
    except SizingError as exc:
        raise SizingError(f"{name}: {exc}") from None
    if number <= 0:
        raise SizingError(f"{name} must be more than zero (got {value})")
    return number


def _server_url(url: str) -> str:
    """A typed server address as the bench reads it (no scheme means http://), or a SizingError."""
    try:
        return normalize_base_url(url)
    except TargetError as exc:
        raise SizingError(str(exc)) from None


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
        "f16",
        "--dtype",
        help="KV cache type: f32, f16, bf16, fp8, q8_0, q5_1, q5_0, q4_1, q4_0, iq4_nl.",
    ),
    value_dtype: str | None = typer.Option(
        None, "--value-dtype", help="llama.cpp only: a different type for values (-ctv)."
    ),
    tokens: int | None = typer.Option(
        None,
        "--tokens",
        "-c",
        min=1,
        max=MAX_TOKENS,
        help="Also show the memory for this many tokens.",
    ),
    fmt: Format = format_option(),
) -> None:
    """KV cache bytes per token (2 x layers x KV heads x head size x bytes), and for N tokens."""
    console = _console()
    with _sizing_errors():
        shape = resolve_shape(config=config, gguf=gguf, model=model)
        per = kv.kv_bytes_per_token(shape, dtype, value_dtype)
        memory = kv.kv_memory(tokens, per) if tokens is not None else None
    grid = _pairs(f"KV cache: {shape.name}")
    layers = str(shape.n_layers)
    if shape.attention_layers is not None:  # a hybrid: the cache is the attention layers'
        layers = f"{shape.attention_layers} of {shape.n_layers} (attention only)"
    _pair(grid, "layers", layers, shape.n_layers)
    _pair(grid, "query heads", str(shape.n_heads), shape.n_heads)
    if shape.latent_cache_dim is not None:
        dim = shape.latent_cache_dim
        _pair(grid, "latent cache numbers per layer", str(dim), dim)
    else:
        _pair(grid, "KV heads", str(shape.n_kv_heads), shape.n_kv_heads)
        if shape.head_dim_k == shape.head_dim_v:
            _pair(grid, "head size (numbers)", str(shape.head_dim_k), shape.head_dim_k)
        else:
            _pair(grid, "head size (numbers)", f"{shape.head_dim_k}/{shape.head_dim_v}")
    if shape.context_length:
        ctx = shape.context_length
        _pair(grid, "trained context (tokens)", whole_text(ctx), ctx, "tokens")
    _pair(
        grid,
        "cache type",
        per.key_dtype.name
        if per.key_dtype == per.value_dtype
        else f"{per.key_dtype.name}/{per.value_dtype.name}",
    )
    _pair(
        grid,
        "bytes per token",
        f"{tidy_text(per.bytes)} ({binary_size_text(per.bytes)})",
        _value(per.bytes),
        "bytes",
    )
    if memory is not None:
        _pair(
            grid,
            f"memory for {whole_text(memory.tokens)} tokens",
            f"{mib_text(memory.bytes)} = {size_text(memory.bytes, 2)}",
            _value(memory.bytes),
            "bytes",
        )
    if shape.weights_bytes is not None:
        _pair(grid, "weights", both_ways(shape.weights_bytes), _value(shape.weights_bytes), "bytes")
    _pair(grid, "source", shape.source)
    emit(grid, fmt, console)
    notes = _notes(console, fmt)
    _say(notes, shape.describe())
    _say(notes, per.explanation)
    if memory is not None:
        _say(notes, memory.explanation)
        if beyond := kv.past_trained_context(memory.tokens, shape):
            _say(notes, beyond)


# ---------------------------------------------------------------- capacity


#: What a suggested `felab size kv` line shows for a value it cannot repeat (unseen, too long).
_PLACEHOLDER = {"--model": "NAME", "--config": "FOLDER", "--gguf": "FILE"}


@size_app.command("capacity")
def capacity_command(
    blocks: int | None = typer.Option(
        None, "--blocks", max=MAX_TOKENS, help="Cache blocks (vLLM's '# GPU blocks')."
    ),
    block_size: int | None = typer.Option(
        None,
        "--block-size",
        min=1,
        max=cap.MAX_BLOCK_SIZE,
        help="Tokens per block (vLLM's default: 16).",
    ),
    tokens: int | None = typer.Option(
        None,
        "--tokens",
        min=1,
        max=MAX_TOKENS,
        help="Cache size in tokens (vLLM's 'KV cache size').",
    ),
    max_len: int | None = typer.Option(
        None, "--max-len", min=1, max=MAX_TOKENS, help="--max-model-len, the longest conversation."
    ),
    kv_dtype_typed: str | None = typer.Option(
        None, "--kv-dtype", help="The cache type the server uses (default f16; auto = f16)."
    ),
    vllm_log_file: Path | None = typer.Option(
        None, "--vllm-log", help="Read blocks and lengths from a vLLM startup log."
    ),
    url: str | None = typer.Option(
        None, "--url", help="Read a running vLLM's /metrics and /v1/models."
    ),
    try_dtype: str = typer.Option("fp8", "--try-dtype", help="What-if cache type."),
    try_max_len: int | None = typer.Option(
        None, "--try-max-len", min=1, max=MAX_TOKENS, help="What-if max length (default: half)."
    ),
    # Taken only to be refused in words: click's "No such option: --model (Possible options:
    # --help)" left a person who sized the model with `size kv` nowhere to go.
    model: str | None = typer.Option(None, "--model", hidden=True),
    config: str | None = typer.Option(None, "--config", hidden=True),
    gguf: str | None = typer.Option(None, "--gguf", hidden=True),
    fmt: Format = format_option(),
) -> None:
    """Cache capacity and worst-case conversations at once; what fp8 or a shorter max buys."""
    console = _console()
    kv_dtype = kv_dtype_typed or "f16"  # typed or not: a log's own type is checked against it
    with _sizing_errors():
        named = next(
            (
                (flag, v)
                for flag, v in (("--model", model), ("--config", config), ("--gguf", gguf))
                if v is not None
            ),
            None,
        )
        if named is not None:
            word = shell_word(named[1], _PLACEHOLDER[named[0]])  # a line to paste: shell-quoted
            raise SizingError(
                f"size capacity takes no {named[0]} (it counts the server's cache, which needs "
                "no model): give --tokens N (or --blocks N --block-size B) with --max-len L, or "
                "read vLLM with --vllm-log FILE or --url URL. The cache one token of this model "
                f"takes is `felab size kv {named[0]} {word}`: size kv reads a model "
                "from felab's table (--model), a folder with config.json (--config) or a GGUF "
                "file (--gguf)"
            )
        kv.vllm_kv_dtype(kv_dtype, "--kv-dtype")  # the flags first: a typo before any file
        kv.vllm_kv_dtype(try_dtype, "--try-dtype")
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
                reading = vllm_live.read_live_vllm(_server_url(url))
            reading.memory_holds_tokens()
            base = reading.capacity(block_size=block_size, max_len=max_len, kv_dtype=kv_dtype_typed)
            if base.kv_dtype is None:
                base = replace(base, kv_dtype=kv.kv_dtype(kv_dtype).name)
        else:
            if max_len is None and blocks is None and tokens is None:  # nothing given: all of it
                raise SizingError(
                    "give the cache and the longest conversation: --tokens N (or --blocks N "
                    "--block-size B) with --max-len L, such as --tokens 100000 --max-len 8192; "
                    "or read a running vLLM with --url URL, or its log with --vllm-log FILE"
                )
            if max_len is None:
                raise SizingError(
                    "give --max-len (the server's --max-model-len), e.g. --max-len 8192"
                )
            if blocks is not None and tokens is not None:
                raise SizingError("give --blocks or --tokens, not both")
            if blocks is not None:
                base = cap.capacity_from_blocks(
                    blocks,
                    16 if block_size is None else block_size,
                    max_len,
                    kv.kv_dtype(kv_dtype).name,
                )
            elif tokens is not None:
                base = cap.capacity_from_tokens(
                    tokens, max_len, block_size, kv.kv_dtype(kv_dtype).name
                )
            else:
                raise SizingError(
                    "give --blocks (with --block-size), --tokens, --vllm-log FILE or --url URL"
                )
            if base.tokens < base.max_len:  # vLLM refuses to start with such a cache
                raise SizingError(
                    f"a cache of {whole_text(base.tokens)} tokens cannot hold one conversation "
                    f"of --max-len {whole_text(base.max_len)}: vLLM would refuse to start; "
                    "give a shorter --max-len or more cache"
                )
        if try_max_len is not None and try_max_len >= base.max_len:
            raise SizingError(
                f"--try-max-len {whole_text(try_max_len)} is the what-if's shorter length: give "
                f"less than the server's {whole_text(base.max_len)}"
            )
        changes = cap.standard_what_ifs(
            base, kv_from=base.kv_dtype or kv_dtype, kv_to=try_dtype, max_len=try_max_len
        )
    grid = Grid(
        "Cache capacity and worst-case concurrency",
        [
            Column("setting", "setting"),
            Column("blocks", "blocks", numeric=True),
            Column("tokens", "tokens", numeric=True),
            Column("max_len", "max length", numeric=True),
            Column("tokens_per_max", "tokens ÷ max", numeric=True),
            Column("conversations", "conversations", numeric=True),
            Column("factor", "x as started", numeric=True),
        ],
    )

    def row(label: str, c: cap.Capacity, factor: Fraction | None) -> None:
        grid.add(
            Cell(label, label),
            _whole(c.blocks) if c.blocks is not None else Cell("-", None),
            _whole(c.tokens),
            _whole(c.max_len),
            _decimal(c.concurrency, 2),
            _whole(c.whole_requests),
            _tidy(factor) if factor is not None else Cell("1", 1),
        )

    row(f"as started ({base.kv_dtype or kv_dtype})", base, None)
    for change in changes:
        row(change.after.label, change.after, change.factor)
    emit(grid, fmt, console)
    notes = _notes(console, fmt)
    if reading is not None:
        _say(notes, reading.explanation)
        for note in reading.consistency_notes(block_size=base.block_size):
            _say(notes, note)
    _say(notes, base.explanation)
    for change in changes:
        _say(notes, change.explanation)


# ---------------------------------------------------------------- slots


@size_app.command("slots")
def slots_command(
    ctx: int | None = typer.Option(
        None,
        "-c",
        "--ctx",
        min=0,
        max=MAX_TOKENS,
        help="llama-server's -c (cache length in tokens).",
    ),
    parallel: int | None = typer.Option(
        None,
        "--parallel",
        "-np",
        max=65_536,
        help="llama-server's --parallel (seats); leave out for its default.",
    ),
    unified: bool = typer.Option(
        False, "--unified", "-kvu", "--kv-unified", help="One cache shared by all seats."
    ),
    url: str | None = typer.Option(
        None, "--url", help="Ask a running llama-server (/props, /slots) instead."
    ),
    need: int | None = typer.Option(
        None,
        "--need",
        min=1,
        max=MAX_TOKENS,
        help="Tokens one conversation needs (prompt + reply).",
    ),
    each: int | None = typer.Option(
        None,
        "--each",
        min=1,
        max=MAX_TOKENS,
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
    fmt: Format = format_option(),
) -> None:
    """The slot trap: what context each llama-server seat really gets, and the -c that fixes it."""
    console = _console()
    with _sizing_errors():
        shape = _maybe_shape(config, gguf, model)
        if kv.kv_dtype(kv_type).name == "fp8":  # an unknown type is refused, costed or not
            raise SizingError(
                "--kv-type fp8 is vLLM's cache type; llama.cpp's -ctk has f16, q8_0, q4_0 and "
                "the like: give one of those"
            )
        if kv_type != "f16" and shape is None:
            raise SizingError(
                "--kv-type sets what one token of cache costs: give the model too (--model, "
                "--config or --gguf), or drop --kv-type"
            )
        if each is not None and need is None:
            raise SizingError(
                "--each is the tokens each seat gets in the fix for --need: give --need too"
            )
        if url is not None:
            if parallel is not None or unified:
                raise SizingError(
                    "with --url the server says how many seats it has; drop --parallel/--unified "
                    "(give -c only if you know what it was started with)"
                )
            verdict = slots_live.read_live(
                _server_url(url), ctx=ctx, need=need, shape=shape, kv_type=kv_type, tokens_each=each
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
    grid = _pairs("llama-server seats")
    _pair(grid, "read from", verdict.source)
    _pair(grid, "seats", str(verdict.slots), verdict.slots)
    mode = {True: "unified (shared)", False: "split", None: "not reported"}[verdict.unified]
    _pair(grid, "cache mode", mode)
    if verdict.shared_total is not None:
        total = verdict.shared_total
        _pair(grid, "cache, all seats", f"{whole_text(total)} tokens", _value(total), "tokens")
    per_slot = verdict.per_slot
    _pair(
        grid, "most one seat can hold", f"{whole_text(per_slot)} tokens", _value(per_slot), "tokens"
    )
    if verdict.need is not None and verdict.ratio is not None:
        _pair(
            grid,
            "one conversation needs",
            f"{whole_text(verdict.need)} tokens ({decimal_text(verdict.ratio, 1)} seats' room)",
            _value(verdict.need),
            "tokens",
        )
    _pair(grid, "verdict", verdict.verdict)
    if verdict.fix is not None and (verdict.fits is False or verdict.all_seats_fit is False):
        _pair(grid, "fix", verdict.fix.flags)
        if verdict.fix.memory is not None:
            cost = verdict.fix.memory.bytes
            _pair(
                grid, "fix costs", f"{mib_text(cost)} = {size_text(cost, 2)}", _value(cost), "bytes"
            )
    emit(grid, fmt, console)
    _say(_notes(console, fmt), verdict.explanation)


# ---------------------------------------------------------------- limit


@size_app.command("limit")
def limit_command(
    bandwidth: str | None = typer.Option(
        None, "--bandwidth", help="Memory bandwidth, GB/s (e.g. 273 or '3.35 TB/s')."
    ),
    chip: str | None = typer.Option(
        None, "--chip", help="A chip from `felab size chips` (e.g. 'M4 Pro', 'H100 SXM')."
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
        0,
        "--context",
        min=0,
        max=MAX_TOKENS,
        help="Tokens already in the conversation (their cache is read too).",
    ),
    kv_type: str = typer.Option("f16", "--kv-type", help="Cache type for --context."),
    measured: str | None = typer.Option(
        None, "--measured", help="A measured or typed writing speed, tokens/s."
    ),
    fmt: Format = format_option(),
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
            if bits_per_weight is not None:
                raise SizingError(
                    "--bits-per-weight sizes a model from the table (--model): --model-bytes "
                    "already gives the size; drop one"
                )
            weights = parse_model_bytes(model_bytes)
            note = f"{both_ways(weights)} as given"
        else:
            shape = _maybe_shape(config, gguf, model)
            if shape is None:
                raise SizingError(
                    "give the weights: --model-bytes 4.9GB, --gguf FILE, "
                    "--config DIR or --model NAME"
                )
            bits = _flag("--bits-per-weight", bits_per_weight)
            if gguf is not None:  # its tensors, held to the file's size, as the memo reads it
                weights, note = gguf_weights(shape, gguf, bits)
            else:
                weights, note = speed_limit.weights_for(shape, bits)
        per = None
        if kv_type != "f16" and not context:
            raise SizingError("--kv-type is the cache's type at --context: give --context too")
        if context:
            if shape is None:
                raise SizingError(
                    "--context needs the model's shape: use --gguf, --config or --model"
                )
            if shape.context_length and context > shape.context_length:
                raise SizingError(
                    f"--context {context:,} is longer than {shape.name} reads "
                    f"({shape.context_length:,} tokens): give at most that"
                )
            per = kv.kv_bytes_per_token(shape, kv_type)
        reads = speed_limit.bytes_per_token(
            weights,
            kv=per,
            context_tokens=context,
            weights_note=note,
            weights_at_most=speed_limit.share_unknown(shape),  # a mixture read whole: a floor
        )
        limit = speed_limit.ceiling(bw, reads, found)
        _flag("--measured", measured)
        check = speed_limit.check_speed(measured, limit) if measured is not None else None
    grid = _pairs("Single-stream speed limit")
    _pair(grid, "machine", found.name if found else "as given")
    _pair(grid, "memory bandwidth", f"{tidy_text(bw / GB)} GB/s", _value(bw / GB), "GB/s")
    _pair(grid, "weights read per token", both_ways(reads.weights), _value(reads.weights), "bytes")
    if reads.kv_cache:
        _pair(
            grid,
            f"cache read at {whole_text(context)} tokens",
            both_ways(reads.kv_cache),
            _value(reads.kv_cache),
            "bytes",
        )
    tps = limit.tokens_per_second
    _pair(
        grid,
        "ceiling",
        f"{'at least ' if limit.lower_bound else ''}{about_text(tps)} tokens/s "
        f"({decimal_text(tps, 2)})",
        float(round_half_up(Fraction(tps), 2)),
        "tokens/s",
    )
    if check is not None:
        _pair(
            grid,
            "measured",
            f"{check.measured_text} tokens/s = {check.percent_text} of the ceiling",
            float(round_half_up(Fraction(check.measured), 1)),
            "tokens/s",
        )
        _pair(
            grid,
            "share of the ceiling",
            check.percent_text,
            int(round_half_up(Fraction(check.share * 100), 0)),
            "%",
        )
        _pair(grid, "verdict", check.verdict)
    emit(grid, fmt, console)
    notes = _notes(console, fmt)
    if shape is not None and shape.weights_read_per_token() is not None:
        _say(notes, weights_summary(shape) + ".")
    _say(notes, limit.explanation)
    if check is not None:
        _say(notes, check.explanation)


# ---------------------------------------------------------------- chips


@size_app.command("chips")
def chips_command(
    model_bytes: str | None = typer.Option(
        None, "--model-bytes", help="Add each chip's ceiling for this many bytes per token."
    ),
    family: str | None = typer.Option(
        None, "--family", help="Only chips whose family contains this (Apple, NVIDIA, AMD ...)."
    ),
    fmt: Format = format_option(),
) -> None:
    """The bandwidth table: Apple M-series, NVIDIA and AMD Instinct data-center GPUs, consumer
    GPUs, DGX Spark."""
    console = _console()
    weights = _guard(
        lambda: (
            None
            if model_bytes is None
            else speed_limit.bytes_per_token(parse_model_bytes(model_bytes, table=False)).weights
        )  # refuses 0, 1 B
    )
    columns = [
        Column("chip", "chip"),
        Column("family", "family"),
        Column("bandwidth_gb_s", "GB/s", numeric=True),
        Column("memory", "memory"),
    ]
    if weights is not None:
        columns.append(Column("ceiling_tps", f"ceiling for {size_text(weights, 2)}", numeric=True))
    columns.append(Column("source", "source"))
    grid = Grid("Memory bandwidth by chip", columns)
    shown = [c for c in speed_limit.CHIPS if family is None or family.lower() in c.family.lower()]
    if not shown or (family is not None and not family.strip()):
        families = ", ".join(sorted({c.family for c in speed_limit.CHIPS}))
        with _sizing_errors():
            raise SizingError(f"--family: no chip's family contains {family!r}; try {families}")
    for c in shown:
        cells = [Cell(c.name, c.name), Cell(c.family, c.family), _tidy(c.bandwidth_gb_s)]
        cells.append(Cell(c.memory, c.memory))
        if weights is not None:
            ceiling = c.bytes_per_second / weights
            cells.append(
                Cell(f"{decimal_text(ceiling, 1)} tokens/s", float(round_half_up(ceiling, 1)))
            )
        cells.append(Cell(c.source, c.source))
        grid.add(*cells)
    emit(grid, fmt, console)
    _say(
        _notes(console, fmt),
        "One conversation's writing speed can never beat bandwidth ÷ bytes read per token; "
        "measured runs usually reach 55-85 % of it.",
    )
