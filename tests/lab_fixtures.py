"""Session fixtures that serve felab's tiny model with the real engines (llama.cpp, MLX, vLLM).

Register with `pytest_plugins = ["tests.lab_fixtures"]` in tests/conftest.py.

The first run builds llama-server (about 9 minutes on 2 cores) and installs MLX (~20 s) into
felab's cache; later runs reuse both. The builds hold a file lock, so two test processes never
build at once. `FELAB_TEST_REAL_SERVERS=0` skips every test that needs a real server;
`FELAB_TEST_VLLM=1` opts in to vLLM (3.5 GB install, about a minute to start).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from felab_core.lab.engines import EngineError, ensure_engine, find_engine, install_engine
from felab_core.lab.serve import ServerInfo, ServerProcess, free_port
from felab_core.lab.tiny_model import TinyModel, cached_tiny_model
from felab_core.settings import get_settings

#: Flags every llama.cpp fixture passes (and so every test can rely on).
LLAMA_FLAGS = ("--metrics", "-c", "4096", "--parallel", "2", "-t", "1")
SLOW_LLAMA_FLAGS = ("--metrics", "-c", "2048", "--parallel", "1", "-t", "1")


@dataclass(frozen=True)
class RunningServer:
    """What a test needs: where to send, which `model` name to send, and what the server said."""

    engine: str
    base_url: str
    model: str
    info: ServerInfo
    process: ServerProcess
    tiny: TinyModel


def real_servers_enabled() -> bool:
    return os.environ.get("FELAB_TEST_REAL_SERVERS", "1") not in ("0", "false", "no")


def vllm_enabled() -> bool:
    return os.environ.get("FELAB_TEST_VLLM", "0") in ("1", "true", "yes")


def _progress(engine: str) -> Callable[[str], None]:
    """Print install progress past pytest's capture, so a 9-minute build is not silent."""

    def log(line: str) -> None:
        if line.startswith(("$", "[", "built", "Successfully", "ERROR", "error")):
            print(f"[felab lab install {engine}] {line}", file=sys.__stderr__, flush=True)

    return log


#: Which engine each server fixture needs.
FIXTURE_ENGINES = {
    "llama_server": "llamacpp",
    "slow_llama_server": "llamacpp",
    "mlx_server": "mlx",
    "vllm_server": "vllm",
}
_install_errors: dict[str, str] = {}


def pytest_collection_finish(session: pytest.Session) -> None:
    """Install the engines the selected tests need before any test starts.

    Here, not in a fixture, because the first llama.cpp build takes longer than the per-test
    timeout (pytest-timeout's 300 s counts fixture setup). An install failure is kept and
    reported by the fixtures, so every test that needs the engine fails with its message.
    """
    if not real_servers_enabled():
        return
    wanted = {
        FIXTURE_ENGINES[name]
        for item in session.items
        for name in getattr(item, "fixturenames", ())
        if name in FIXTURE_ENGINES
    }
    if not vllm_enabled():
        wanted.discard("vllm")
    for engine in sorted(wanted):
        if find_engine(engine) is not None:
            continue
        print(
            f"\n[felab] installing {engine} for the real-server tests "
            f"(once; cached under {get_settings().cache_dir})",
            file=sys.__stderr__,
            flush=True,
        )
        try:
            install_engine(engine, log=_progress(engine))
        except EngineError as exc:
            _install_errors[engine] = str(exc)


def _engine(engine: str) -> None:
    if not real_servers_enabled():
        pytest.skip("real servers disabled (FELAB_TEST_REAL_SERVERS=0)")
    if engine in _install_errors:
        pytest.fail(f"{engine} could not be installed:\n{_install_errors[engine]}", pytrace=False)
    if find_engine(engine) is None:
        ensure_engine(engine, log=_progress(engine))


def _start(
    engine: str, model: TinyModel, flags: Sequence[str], log_dir: Path, size: str = "tiny"
) -> Iterator[RunningServer]:
    path = model.gguf_path if engine == "llamacpp" else model.hf_dir
    port = free_port()
    server = ServerProcess(
        engine,
        path,
        port=port,
        extra_args=list(flags),
        log_path=log_dir / f"{engine}-{size}-{port}.log",
    )
    with server:
        assert server.info is not None
        yield RunningServer(engine, server.base_url, server.model_name, server.info, server, model)


@pytest.fixture(scope="session")
def tiny_model() -> TinyModel:
    """The tiny model (172k parameters), generated once into felab's cache."""
    return cached_tiny_model("tiny")


@pytest.fixture(scope="session")
def slow_model() -> TinyModel:
    """The slow model (~91M parameters, 365 MB per format), generated once into the cache."""
    return cached_tiny_model("slow")


@pytest.fixture(scope="session")
def llama_server(
    tiny_model: TinyModel, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    """llama-server on the tiny model, with `LLAMA_FLAGS` (metrics on, 2 slots, 1 thread)."""
    _engine("llamacpp")
    yield from _start("llamacpp", tiny_model, LLAMA_FLAGS, tmp_path_factory.mktemp("logs"))


@pytest.fixture(scope="session")
def slow_llama_server(
    slow_model: TinyModel, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    """llama-server on the slow model with `-t 1 --parallel 1`: decode time you can see."""
    _engine("llamacpp")
    yield from _start(
        "llamacpp", slow_model, SLOW_LLAMA_FLAGS, tmp_path_factory.mktemp("logs"), size="slow"
    )


@pytest.fixture(scope="session")
def mlx_server(
    tiny_model: TinyModel, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    """mlx_lm.server on the tiny model's Hugging Face folder (CPU wheels on Linux)."""
    _engine("mlx")
    yield from _start("mlx", tiny_model, (), tmp_path_factory.mktemp("logs"))


@pytest.fixture(scope="session")
def vllm_server(
    tiny_model: TinyModel, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    """vLLM's CPU build on the tiny model: opt-in with FELAB_TEST_VLLM=1."""
    if not vllm_enabled():
        pytest.skip("vLLM tests are opt-in: set FELAB_TEST_VLLM=1 (3.5 GB install, ~1 min start)")
    if not real_servers_enabled():
        pytest.skip("real servers disabled (FELAB_TEST_REAL_SERVERS=0)")
    error = _install_errors.get("vllm")
    if error is None and find_engine("vllm") is None:
        try:
            install_engine("vllm", log=_progress("vllm"))
        except EngineError as exc:
            error = str(exc)
    if error is not None:
        tail = " | ".join(error.splitlines()[-3:])
        pytest.skip(
            "vLLM CPU could not be installed (it needs torch==2.13.0 CPU, e.g. from "
            f"a local wheel): {tail}"
        )
    yield from _start(
        "vllm", tiny_model, ("--max-model-len", "2048"), tmp_path_factory.mktemp("logs")
    )
