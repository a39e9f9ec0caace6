"""`felab memo`: the Day 10 sizing memo, written from the results CSV with its charts beside it.

A thin adapter: it turns flags into `MemoInputs`, calls felab_core.reports.memo and writes files.
Bad input ends with one line saying what to pass, and exit code 2.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import typer
from rich.console import Console

from felab.cli import errors
from felab_core.engine.results import (
    DEFAULT_CSV,
    ResultsFileError,
    check_destinations,
    default_csv,
)
from felab_core.files import MEMO, MEMO_CHART, NamedFileError, make_folder_for, write_whole
from felab_core.reports.memo import (
    DEFAULT_CONTEXTS,
    MachineSpec,
    MemoError,
    MemoInputs,
    build_memo,
    chart_names,
    load_results,
    parse_machine,
    render_markdown,
    write_charts,
)
from felab_core.sizing.errors import SizingError
from felab_core.sizing.units import MAX_TOKENS
from felab_core.text import comma_items, loose_number_problem

DEFAULT_OUT = DEFAULT_CSV.parent / "memo.md"
EXIT_USAGE = 2
_CONTEXTS_TEXT = ",".join(str(c) for c in DEFAULT_CONTEXTS)


#: The most context lengths one memo compares: its tables and charts hold one each.
MAX_CONTEXTS = 32


def _contexts(text: str) -> tuple[int, ...]:
    try:
        parts = comma_items(text, "4096,8192,32768")
    except ValueError as exc:
        raise MemoError(f"--contexts {exc}") from None
    loose = next((why for p in parts if (why := loose_number_problem(p, int))), None)
    if loose:
        raise MemoError(f"--contexts: {loose}")
    try:
        values = tuple(int(p) for p in parts)
    except ValueError:
        raise MemoError(
            f"--contexts {text!r}: give token counts separated by commas, e.g. 4096,8192,32768"
        ) from None
    if not values:
        raise MemoError("--contexts is empty: give token counts, e.g. 4096,8192,32768")
    if len(values) > MAX_CONTEXTS:  # 4,000 lengths drew charts past 30 s and 600 MB
        raise MemoError(
            f"--contexts names {len(values):,} lengths: a memo compares at most {MAX_CONTEXTS} "
            "(each is a row of its tables and a point of its charts)"
        )
    twice = next((v for v, n in Counter(values).items() if n > 1), None)
    if twice is not None:
        raise MemoError(f"--contexts names {twice:,} more than once: give each length once")
    return values


def _machines(chips: list[str] | None, bandwidths: list[str] | None) -> tuple[MachineSpec, ...]:
    specs = [parse_machine(c) for c in chips or []]
    specs += [parse_machine(b, bandwidth=True) for b in bandwidths or []]
    return tuple(specs)


def memo(
    csv_path: Path | None = typer.Option(
        None,
        "--csv",
        help="The results CSV `felab bench` wrote (Day 2's timing rows) "
        "(default: results/01-latency.csv).",
    ),
    out: Path = typer.Option(
        DEFAULT_OUT,
        "--out",
        "-o",
        help="Markdown file to write; its two charts go beside it (memo.md: memo-speed.png, "
        "memo-concurrency.png). '-' prints the memo instead, without charts.",
    ),
    chip: list[str] | None = typer.Option(
        None,
        "--chip",
        metavar="CHIP",
        help="The machine the rows ran on, from `felab size chips` "
        "(e.g. 'M4 Pro', 'H100 SXM'). Several machines: HOST=CHIP once per host.",
        show_default=False,
    ),
    bandwidth: list[str] | None = typer.Option(
        None,
        "--bandwidth",
        metavar="GBPS",
        help="Instead of --chip: memory bandwidth in GB/s from the spec sheet (or HOST=GBPS).",
        show_default=False,
    ),
    host: list[str] | None = typer.Option(
        None,
        "--host",
        metavar="HOST",
        help="Only rows from this host (repeat for several).",
        show_default=False,
    ),
    model: str | None = typer.Option(
        None, "--model", help="The model, from felab's table (e.g. llama-3.1-8b)."
    ),
    config: Path | None = typer.Option(
        None, "--config", help="Or its Hugging Face config.json (or the folder holding it)."
    ),
    gguf: Path | None = typer.Option(
        None,
        "--gguf",
        help="Or its GGUF file (its tensors are then the weights read, as in `size limit`).",
    ),
    model_bytes: str | None = typer.Option(
        None,
        "--model-bytes",
        help="Size of the model file the servers read per token, e.g. 4.9GB (`ollama list`).",
    ),
    bits_per_weight: str | None = typer.Option(
        None, "--bits-per-weight", help="With --model and no --model-bytes: 16, 8, 4.5 ..."
    ),
    kv_memory: str | None = typer.Option(
        None, "--kv-memory", help="Memory left for the KV cache after the weights, e.g. 16GiB."
    ),
    kv_tokens: int | None = typer.Option(
        None,
        "--kv-tokens",
        min=1,
        max=MAX_TOKENS,
        help="Or the cache size in tokens (vLLM's 'KV cache size').",
    ),
    blocks: int | None = typer.Option(
        None,
        "--blocks",
        max=MAX_TOKENS,
        help="Or cache blocks (vLLM's '# GPU blocks'), with --block-size.",
    ),
    block_size: int | None = typer.Option(
        None,
        "--block-size",
        min=1,
        max=MAX_TOKENS,
        help="Tokens per cache block (vLLM's default: 16).",
    ),
    vllm_log_file: Path | None = typer.Option(
        None, "--vllm-log", help="Or a vLLM startup log: its cache size and max length."
    ),
    kv_dtype: str | None = typer.Option(
        None,
        "--kv-dtype",
        help="The cache type the server uses: f16 (the default), bf16, fp8, q8_0 ...",
    ),
    max_len: int | None = typer.Option(
        None,
        "--max-len",
        min=1,
        max=MAX_TOKENS,
        help="The longest conversation planned (vLLM's --max-model-len); default 8192, or the "
        "vLLM log's.",
        show_default=False,
    ),
    contexts: str | None = typer.Option(
        None,
        "--contexts",
        help=f"Conversation lengths to tabulate, comma-separated, at most {MAX_CONTEXTS} "
        f"(default {_CONTEXTS_TEXT}, up to the model's trained context).",
        show_default=False,
    ),
    no_charts: bool = typer.Option(False, "--no-charts", help="Write the Markdown only."),
) -> None:
    """Write the sizing memo: latest timing rows against the speed limit, KV math, concurrency.

    The CSV says what was measured; you add what it cannot know: the machine (--chip or
    --bandwidth), the model (--model, --config or --gguf) with its file size (--model-bytes),
    and the memory left for the cache (--kv-memory, --kv-tokens, --blocks or --vllm-log).

    The memo keeps the newest run per server and machine that had a request answered (a
    newer run whose requests all failed is named in a note), shows each writing speed as a
    percentage of the speed limit (flagging any above it as impossible), works out the cache
    per token and per conversation, how many conversations fit at each length, and the flags
    to try first (prefix caching, chunked prefill, fp8 cache) with what each buys.

    [bold]Examples[/bold]

      felab memo --chip "M4 Pro" --model llama-3.1-8b --model-bytes 4.9GB --kv-memory 16GiB
      felab memo --csv results/01-latency.csv --chip "H100 SXM" --model llama-3.1-8b \\
          --model-bytes 8.5GB --vllm-log vllm.log --out results/memo.md
      felab memo --chip "studio=M2 Ultra" --chip "laptop=M4 Pro" --gguf model.gguf --blocks 8234
    """
    err = Console(stderr=True, highlight=False)
    try:
        if model_bytes is not None and bits_per_weight is not None:
            raise MemoError(
                "--bits-per-weight sizes a model from the table; --model-bytes already gives the "
                "size: drop one"
            )
        inputs = MemoInputs(
            machines=_machines(chip, bandwidth),
            model=model,
            config=config,
            gguf=gguf,
            model_bytes=model_bytes,
            bits_per_weight=bits_per_weight,
            contexts=_contexts(contexts) if contexts is not None else DEFAULT_CONTEXTS,
            max_len=max_len,
            kv_dtype=kv_dtype,
            kv_memory=kv_memory,
            kv_tokens=kv_tokens,
            blocks=blocks,
            block_size=block_size,
            vllm_log=vllm_log_file,
            hosts=tuple(host or ()),
        )
        csv_path = csv_path or default_csv()
        if str(out) != "-":  # before the work: an unwritable path is said first
            read = ((csv_path, "results CSV (--csv)"), (vllm_log_file, "vLLM log"))
            # The memo and the two charts beside it: each gets the same checks (a chart once
            # overwrote the database through a link, a bench record, and the CSV it read).
            charts_beside = () if no_charts else chart_names(out.stem)
            for path, what, kind in (
                (out, "memo", MEMO),
                *((out.parent / c, "memo chart", MEMO_CHART) for c in charts_beside),
            ):
                check_destinations(None, path, what=what, inputs=read, json_writes=kind)
        if str(out) != "-" and out.suffix.lower() not in (".md", ".markdown", ".txt"):
            raise MemoError(
                f"--out {out} ends in {out.suffix or 'no suffix'!r}: the memo is Markdown, so "
                f"name it {out.stem or 'memo'}.md (its charts go beside it as PNG)"
            )
        rows = load_results(csv_path)
        result = build_memo(rows, inputs, source=str(csv_path))
    except (MemoError, SizingError, ResultsFileError) as exc:
        errors.err(str(exc))  # a path it names may hold an escape code: shown as '?'
        raise typer.Exit(EXIT_USAGE) from None

    if str(out) == "-":
        typer.echo(render_markdown(result, charts=None))
        return
    console = Console(highlight=False)
    try:
        make_folder_for(out, what="memo")  # one missing folder, as bench's files; no tree
        charts = None if no_charts else write_charts(result, out.parent, stem=out.stem)
        names = (charts[0].name, charts[1].name) if charts else None
        write_whole(out, render_markdown(result, charts=names))
        written = [out, *(charts or ())]
    except NamedFileError as exc:
        errors.err(str(exc))  # a path it names may hold an escape code: shown as '?'
        raise typer.Exit(EXIT_USAGE) from None
    except OSError as exc:
        why = exc.strerror or str(exc)
        err.print(
            f"error: could not write the memo to {out}: {why}: choose another path (-o)",
            markup=False,
            soft_wrap=True,
        )
        raise typer.Exit(EXIT_USAGE) from None
    for path in written:
        console.print(f"wrote {path}", markup=False, soft_wrap=True)
