"""Finding and installing engines: cache keys, PATH first, atomic llama.cpp builds."""

from __future__ import annotations

import io
import json
import os
import stat
import tarfile
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from felab_core.lab import engines
from felab_core.lab.engines import (
    EngineInstallError,
    EngineNotInstalled,
    cpu_key,
    find_engine,
    install_llamacpp,
    llamacpp_build_dir,
    llamacpp_cmake_args,
    require_engine,
)


def test_cpu_key_names_arch_and_features() -> None:
    native, portable = cpu_key(True), cpu_key(False)
    assert native == cpu_key(True)  # stable
    assert portable.endswith("-portable")
    assert native.split("-")[0] == portable.split("-")[0]
    assert len(native.split("-")[1]) == 8


def test_build_dir_is_outside_the_checkout_and_keyed(isolated_cache: Path) -> None:
    d = llamacpp_build_dir(native=False)
    assert d.parent == isolated_cache / "llama.cpp"
    assert d.name == f"{engines.LLAMACPP_PY_VERSION}-{cpu_key(False)}"
    assert llamacpp_build_dir(native=True) != d


def test_portable_unless_the_cpu_cannot_run_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engines.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(engines.platform, "system", lambda: "Linux")
    monkeypatch.setattr(engines, "_cpu_features", lambda: "sse4_2 avx avx2 fma f16c bmi2 avx512f")
    assert engines.default_native() is False
    monkeypatch.setattr(engines, "_cpu_features", lambda: "sse4_2 avx")  # no AVX2: native
    assert engines.default_native() is True
    assert llamacpp_build_dir().name.endswith(cpu_key(True))


def test_cmake_args_never_download_a_web_ui() -> None:
    args = llamacpp_cmake_args(native=True)
    assert "-DLLAMA_USE_PREBUILT_UI=OFF" in args and "-DGGML_NATIVE=ON" in args
    assert "-DGGML_NATIVE=OFF" in llamacpp_cmake_args(native=False)


def test_not_installed_says_how_to_install(isolated_cache: Path) -> None:
    for engine in ("llamacpp", "mlx", "vllm"):
        assert find_engine(engine) is None
        with pytest.raises(EngineNotInstalled, match=f"felab lab install {engine}"):
            require_engine(engine)


def test_engine_on_path_comes_first(
    isolated_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "llama-server"
    fake.write_text("#!/bin/sh\necho 'version: 4242 (abc)'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    loc = find_engine("llamacpp", with_version=True)
    assert loc is not None and loc.source == "PATH" and loc.command == (str(fake),)
    assert loc.version == "4242 (abc)"


def _fake_sdist(root: Path, version: str) -> Path:
    """A stand-in for the llama-cpp-python sdist (the build itself is faked too)."""
    path = root / f"llama_cpp_python-{version}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        data = b"project(fake)\n"
        info = tarfile.TarInfo(f"llama_cpp_python-{version}/vendor/llama.cpp/CMakeLists.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path


def _fake_build(fail: bool) -> Callable[..., None]:
    def run(cmd: Sequence[str], log: Callable[[str], None], **_: object) -> None:
        if "--build" not in cmd:
            return  # configure
        build = Path(cmd[cmd.index("--build") + 1])
        (build / "bin").mkdir(parents=True)
        binary = build / "bin" / "llama-server"
        binary.write_text("#!/bin/sh\necho 'version: 1 (fake)'\n")
        binary.chmod(0o755)
        if fail:
            raise EngineInstallError("compiler died half way")

    return run


def test_interrupted_build_is_never_reused(
    isolated_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sdist = _fake_sdist(tmp_path, "9.9.9")
    monkeypatch.setattr(engines, "_llamacpp_sdist", lambda version, log: sdist)
    monkeypatch.setattr(engines, "_require_tools", lambda *a, **k: None)
    monkeypatch.setattr(engines, "_run_streamed", _fake_build(fail=True))
    with pytest.raises(EngineInstallError):
        install_llamacpp("9.9.9")
    root = isolated_cache / "llama.cpp"
    assert not llamacpp_build_dir("9.9.9").exists()
    assert not list(root.glob(".build-*"))  # the temporary build folder is gone
    # a folder left by a killed build (no cleanup ran) is removed by the next build
    (root / ".build-killed").mkdir()
    monkeypatch.setattr(engines, "_run_streamed", _fake_build(fail=False))
    loc = install_llamacpp("9.9.9")
    assert not (root / ".build-killed").exists()
    final = llamacpp_build_dir("9.9.9")
    assert loc.command == (str(final / "llama-server"),) and loc.source == "felab cache"
    meta = json.loads((final / "felab-build.json").read_text())
    assert meta["llama_server_version"] == "1 (fake)"
    assert meta["cpu_key"] == cpu_key(engines.default_native())
    # the second call reuses the cache without building
    monkeypatch.setattr(engines, "_run_streamed", _fake_build(fail=True))
    assert install_llamacpp("9.9.9") == loc
