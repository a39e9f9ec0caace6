"""`felab model`, `felab lab` and `felab serve`: the lab's model, engines and real servers."""

from __future__ import annotations

import math
import signal
import time
from pathlib import Path
from types import FrameType

import typer
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from felab.cli.folders import folder_parser
from felab_core.lab.engines import (
    ENGINES,
    EngineError,
    find_engine,
    install_engine,
)
from felab_core.lab.serve import DEFAULT_PORTS, ServeError, ServerProcess, ServerStartError
from felab_core.lab.tiny_model import SIZES, ModelFolderError, write_tiny_model
from felab_core.redact import redact

console = Console()
err_console = Console(stderr=True)

EXIT_OK, EXIT_SERVER_FAILED, EXIT_USAGE = 0, 1, 2


def _error(label: str, message: object) -> None:
    """Print an error as plain text (server logs hold brackets that rich would read as markup)."""
    err_console.print(Text(f"{label}: ", style="red") + Text(redact(str(message))), soft_wrap=True)


model_app = typer.Typer(
    name="model",
    help="Make the lab's own model: no hub, no download, the same bytes on every machine.",
    no_args_is_help=True,
    rich_markup_mode="rich",
)
lab_app = typer.Typer(
    name="lab",
    help=(
        "Install and find the real engines (llama.cpp, MLX, vLLM) that [bold]felab serve[/bold] "
        "starts. Installs live in felab's cache (FELAB_CACHE_DIR, default ~/.cache/felab), "
        "outside the checkout, so the next run reuses them."
    ),
    no_args_is_help=True,
    rich_markup_mode="rich",
)


def _check_engine(engine: str) -> str:
    if engine not in ENGINES:
        raise typer.BadParameter(f"choose one of {', '.join(ENGINES)}")
    return engine


@model_app.command("tiny")
def tiny(
    out: Path = typer.Option(
        ...,
        "--out",
        help="Folder to write (created if missing); a file of the same name that felab did not "
        "write there is never replaced.",
        parser=folder_parser("--out models"),
        metavar="DIR",
    ),
    size: str = typer.Option(
        "tiny",
        "--size",
        help="tiny: ~172k parameters, ~1 ms a token (measures the serving path). "
        "slow: ~91M parameters, 365 MB, ~15 ms a token (decode time dominates).",
    ),
) -> None:
    """Write a small random Llama model as a Hugging Face folder and a GGUF file.

    Both come from the same weights, so llama.cpp (GGUF), MLX and vLLM
    (HF folder) serve the same model. Nothing is downloaded; the bytes
    are the same on every run.

    Its greedy answer to any chat prompt is known ("Lorem ipsum dolor ..."),
    and it never emits an end token: N tokens asked, N chunks streamed.
    """
    if size not in SIZES:
        raise typer.BadParameter(f"choose one of {', '.join(SIZES)}", param_hint="--size")
    started = time.monotonic()
    try:
        model = write_tiny_model(out, size)
    except ModelFolderError as exc:  # an OSError is the boundary's: it words paths already
        _error("error", exc)
        raise typer.Exit(EXIT_USAGE) from None
    took = time.monotonic() - started
    spec = model.spec
    console.print(
        f"Wrote the [bold]{spec.name}[/bold] model ({spec.n_params:,} parameters: {spec.n_layers} "
        f"layers, hidden {spec.hidden}, {spec.n_heads} heads of {spec.head_dim}, vocabulary "
        f"{spec.vocab}, context {spec.context}) in {took:.1f} s."
    )
    table = Table(show_header=True, header_style="bold")
    table.add_column("for")
    table.add_column("path")
    table.add_column("size", justify="right")
    table.add_row(
        "MLX, vLLM",
        str(model.hf_dir),
        f"{sum(p.stat().st_size for p in model.hf_dir.iterdir()) / 1e6:.1f} MB",
    )
    gguf_mb = model.gguf_path.stat().st_size / 1e6
    table.add_row("llama.cpp", str(model.gguf_path), f"{gguf_mb:.1f} MB")
    console.print(table)
    console.print(f"Greedy answer, first 8 tokens: [italic]{model.expected_text(8)}[/italic]")
    console.print(
        f"Serve it:  felab serve llamacpp --model {model.gguf_path}\n"
        f"           felab serve mlx --model {model.hf_dir}"
    )


@lab_app.command("install")
def install(
    engine: str = typer.Argument(..., help="llamacpp, mlx or vllm.", callback=_check_engine),
    native: bool = typer.Option(
        False,
        "--native",
        help="llama.cpp: build with -march=native for this very CPU (cached under a key of its "
        "feature flags). The default portable build (AVX2 level on x86-64) runs on any "
        "recent CPU, so a CI cache can travel, and was faster here.",
    ),
    jobs: int | None = typer.Option(
        None,
        "--jobs",
        "-j",
        min=1,
        max=256,
        help="Parallel compile jobs, 1-256 (default: all cores).",
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="Install into felab's cache even when the engine is already on the PATH.",
    ),
) -> None:
    """Install an engine the way CI does, into felab's cache (reused by later runs).

    [bold]llamacpp[/bold]: builds llama-server from the llama.cpp sources in
      the llama-cpp-python sdist on PyPI: ~9 minutes on 2 cores, once.
      Portable (AVX2 level on x86-64) unless --native; cached by
      version, and by CPU features for a native build.
    [bold]mlx[/bold]: a venv with mlx, mlx-lm (and mlx-cpu on Linux): ~20 s.
    [bold]vllm[/bold]: a venv with vLLM's CPU build and torch 2.13: 3.5 GB, opt-in.

    An engine already on the PATH (Homebrew's llama-server, a pip-installed
    mlx_lm.server) is used as it is.
    """
    found = find_engine(engine)
    if found is not None and found.source == "PATH" and not force:
        console.print(
            f"{engine}: found on the PATH at {found.path}; felab uses it "
            "(--force installs felab's own copy anyway)."
        )
        return
    started = time.monotonic()

    def log(line: str) -> None:
        console.print(line, markup=False, highlight=False, style="dim", soft_wrap=True)

    try:
        loc = install_engine(engine, log=log, native=True if native else None, jobs=jobs)
    except EngineError as exc:
        _error("install failed", exc)
        raise typer.Exit(EXIT_SERVER_FAILED) from None
    console.print(
        f"[green]{engine} ready[/green] in {time.monotonic() - started:.0f} s: "
        f"{' '.join(loc.command)}"
    )


@lab_app.command("where")
def where() -> None:
    """Show which engines felab finds, where, and how it would start each one."""
    table = Table(show_header=True, header_style="bold")
    for col in ("engine", "status", "from", "version", "starts with"):
        table.add_column(col, overflow="fold")
    for engine in ENGINES:
        loc = find_engine(engine, with_version=True)
        if loc is None:
            table.add_row(
                engine, "[yellow]not installed[/yellow]", "", "", f"felab lab install {engine}"
            )
        else:
            table.add_row(
                engine,
                "[green]found[/green]",
                loc.source,
                loc.version or "unknown",
                " ".join(loc.command),
            )
    import shutil

    ollama = shutil.which("ollama")
    table.add_row(
        "ollama",
        "[green]found[/green]" if ollama else "not found",
        "PATH" if ollama else "",
        "",
        "start it yourself (ollama serve); felab bench times it",
    )
    console.print(table)


def _check_host(host: str) -> str:
    """An address this machine can listen on, checked before any engine starts."""
    import socket

    try:
        socket.getaddrinfo(host, None)
    except (socket.gaierror, UnicodeError):
        raise typer.BadParameter(
            f"{host!r} is not an address or a host name this machine knows"
        ) from None
    return host


def _check_timeout(value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(f"seconds above zero (got {value})")
    return value


def serve(
    ctx: typer.Context,
    engine: str = typer.Argument(..., help="llamacpp, mlx or vllm.", callback=_check_engine),
    model: Path = typer.Option(
        ...,
        "--model",
        "-m",
        help="llama.cpp: a .gguf file; MLX and vLLM: a Hugging Face folder. A folder written by "
        "`felab model tiny` works for all three.",
    ),
    port: int | None = typer.Option(
        None,
        "--port",
        min=1,
        max=65535,
        help=f"Default: llamacpp {DEFAULT_PORTS['llamacpp']}, mlx {DEFAULT_PORTS['mlx']} "
        f"(mlx_lm.server's own default is 8080, like llama-server's), "
        f"vllm {DEFAULT_PORTS['vllm']}.",
    ),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Address to listen on.", callback=_check_host
    ),
    timeout: float | None = typer.Option(
        None,
        "--timeout",
        callback=_check_timeout,
        help="Seconds to wait for the first completion (default: 60 llama.cpp, 120 MLX, 600 vLLM).",
    ),
) -> None:
    """Start a real engine with every flag visible; wait until it answers; stop it on Ctrl-C.

    felab prints the full command line, waits until a real chat completion
    succeeds, then shows what the server says about itself (version, slots,
    context per slot).

    Engine flags go after [bold]--[/bold], unchanged:
      felab serve llamacpp --model tiny.gguf -- -c 8192 --parallel 4 --metrics

    With -c and --parallel, felab first says how much context each slot
    really gets: llama-server splits -c between the slots (the slot trap).
    """
    extra = list(ctx.args)
    server = ServerProcess(
        engine, model, host=host, port=port, extra_args=extra, startup_timeout=timeout
    )
    try:
        console.print(Text("$ ", style="bold") + Text(server.shell_line()), soft_wrap=True)
    except (ServeError, EngineError) as exc:
        _error("error", exc)
        raise typer.Exit(EXIT_USAGE) from None

    def on_slots(text: str) -> None:
        verdict = server.slot_verdict
        split = verdict is not None and verdict.unified is False and verdict.slots > 1
        console.print(
            Panel(Text(text), title="slot check", border_style="yellow" if split else "blue")
        )

    previous = signal.getsignal(signal.SIGTERM)

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)  # `kill` stops the server cleanly too
    try:
        with console.status(
            f"starting {engine}; waiting for a completion to succeed (log: {server.log_path}) ..."
        ):
            server.start(log=on_slots)
        info = server.info
        assert info is not None
        table = Table(title=f"{engine} says", show_header=False)
        table.add_column("what", style="bold")
        table.add_column("value", overflow="fold")
        for label, value in info.rows():
            table.add_row(label, Text(value))
        table.add_row("log", Text(str(server.log_path)))
        console.print(table)
        console.print(
            f"Serving at {info.base_url}/v1 (send model={info.model_name!r}). Ctrl-C stops it."
        )
        while server.is_running():
            time.sleep(0.5)
        code = server.stop()
        _error(f"{engine} exited by itself (code {code})", "last log lines:\n" + server.log_tail())
        raise typer.Exit(EXIT_SERVER_FAILED)
    except KeyboardInterrupt:
        code = server.stop()
        console.print(f"stopped {engine} (exit code {code}); nothing left running.")
    except (ServeError, EngineError) as exc:
        server.stop()
        _error("error", exc)
        failed = isinstance(exc, ServerStartError)  # the rest: model, port, engine missing
        raise typer.Exit(EXIT_SERVER_FAILED if failed else EXIT_USAGE) from None
    finally:
        server.stop()
        signal.signal(signal.SIGTERM, previous)


SERVE_CONTEXT = {"allow_extra_args": True, "ignore_unknown_options": True}
