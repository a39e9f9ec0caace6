"""The lab's demo: serve one model two (or three) ways, time each with the same script.

This is the course's Day 2 on one machine: the tiny generated model served by real llama.cpp
and MLX (and vLLM where installed), one server at a time, timed by the same benchmark service
`felab bench` uses, rows appended to the results CSV.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from felab_core.engine.bench import BenchOutcome, run_bench, save_outcomes
from felab_core.engine.event_loop import run_sync
from felab_core.engine.targets import DEFAULT_TARGETS
from felab_core.engine.workloads import PRESETS, Workload
from felab_core.lab.engines import EngineError, ensure_engine, find_engine
from felab_core.lab.serve import ServeError, ServerProcess, free_port
from felab_core.lab.tiny_model import cached_tiny_model

Log = Callable[[str], None]
DEMO_ENGINES = ("llamacpp", "mlx")


@dataclass(slots=True)
class DemoResult:
    outcomes: list[BenchOutcome] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # engine -> why it was not timed
    written: list[Path] = field(default_factory=list)


def demo_workload(quick: bool) -> Workload:
    """Day 2's preset; quick mode (CI) sends fewer, shorter requests and says so in the row."""
    workload = PRESETS["day2"].workload
    if quick:
        workload = workload.with_overrides(requests=3, max_tokens=64)
    return workload


def run_demo(
    *,
    engines: tuple[str, ...] = DEMO_ENGINES,
    quick: bool = False,
    install: bool = True,
    csv_path: Path | None = None,
    log: Log = print,
    with_llamacpp: Callable[[str], None] | None = None,
) -> DemoResult:
    """Serve and time each engine in turn; `with_llamacpp(base_url)` runs while llama.cpp is
    still up, after it was timed (the demo's worker-fleet half measures it again)."""
    result = DemoResult()
    model = cached_tiny_model("tiny")
    log(f"model: felab's tiny Llama ({model.spec.n_params:,} parameters) at {model.hf_dir.parent}")
    workload = demo_workload(quick)
    for engine in engines:
        try:
            location = ensure_engine(engine, log=log) if install else find_engine(engine)
        except EngineError as exc:
            result.skipped[engine] = f"could not install: {exc}"
            continue
        if location is None:
            result.skipped[engine] = f"not installed (felab lab install {engine})"
            continue
        extra = ["--metrics"] if engine == "llamacpp" else []
        server = ServerProcess(engine, model.hf_dir.parent, port=free_port(), extra_args=extra)
        log("$ " + server.shell_line())
        try:
            with server:
                # MLX and vLLM want the exact model path; llama.cpp serves whatever it loaded.
                name = None if engine == "llamacpp" else server.model_name
                target = replace(
                    DEFAULT_TARGETS[engine], url=server.base_url, model=name, note=None
                )
                outcomes = run_sync(run_bench([target], workload))
                if engine == "llamacpp" and with_llamacpp is not None:
                    with_llamacpp(server.base_url)
        except ServeError as exc:
            result.skipped[engine] = f"did not start: {exc}"
            continue
        result.outcomes.extend(outcomes)
    result.written = save_outcomes(result.outcomes, csv_path=csv_path, json_path=None)
    return result
