"""Start a real serving engine, wait until it really answers, ask it about itself, stop it cleanly.

`ServerProcess` is what `felab serve` and the test fixtures use. The command line is built in the
open (`shell_line()` prints it, environment included) because a field engineer wants the flags.

Why each step:

* The model file and the port are checked first, so the usual mistakes get a specific message
  instead of a server log to decipher.
* Ready means a real chat completion succeeded: MLX answers `/health` before its model is loaded,
  and llama.cpp answers 503 while loading.
* The server runs in its own process group (vLLM starts helper processes of its own), and stop
  sends SIGTERM then SIGKILL to the whole group. Every started server is also stopped at exit and
  on Ctrl-C, and on Linux the kernel kills it if the Python process dies (`PR_SET_PDEATHSIG`).

Long because starting a server for real takes every case: ports in use, a model not found,
readiness by a real completion, logs kept, clean stops on every exit path.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import errno
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import httpx

from felab_core.engine.server_kinds import LAB_KINDS, LabStart, ServerKind
from felab_core.lab.engines import ENGINES, EngineError, EngineLocation, require_engine
from felab_core.settings import get_settings

#: Where each engine listens unless told otherwise, and how long it may take to answer its
#: first completion: both from the server kinds table (`mlx_lm.server` defaults to 8080 like
#: llama-server, so felab moves MLX to 8081 and the two can run side by side).
DEFAULT_PORTS = {k.value: int(k.traits.port or 0) for k in LAB_KINDS}
DEFAULT_STARTUP_TIMEOUT = {
    k.value: k.traits.lab.startup_timeout_s for k in LAB_KINDS if k.traits.lab is not None
}


def lab_start(engine: str) -> LabStart:
    """How the lab starts this engine, from the server kinds table."""
    start = ServerKind(engine).traits.lab if engine in ENGINES else None
    if start is None:
        raise EngineError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    return start


class ServeError(RuntimeError):
    """Base class: something stopped a server from starting; the message says what."""


class ModelNotFound(ServeError):
    pass


class PortInUse(ServeError):
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        super().__init__(
            f"port {port} on {host} is already in use (another server is listening there; "
            f"`ss -ltnp 'sport = :{port}'` or `lsof -i :{port}` shows which). "
            "Stop it, or choose another port with --port."
        )


class ServerStartError(ServeError):
    """The server exited or never answered; the message carries its last log lines."""

    def __init__(self, message: str, log_tail: str, log_path: Path | None) -> None:
        self.log_tail = log_tail
        self.log_path = log_path
        where = f" (full log: {log_path})" if log_path else ""
        super().__init__(f"{message}{where}\n--- last lines of the server log ---\n{log_tail}")


@dataclass(frozen=True)
class ServerInfo:
    """What a running server says about itself (the part the course cares about)."""

    engine: str
    base_url: str
    model_name: str  # the `model` to send in requests
    version: str | None
    total_slots: int | None = None  # llama.cpp: --parallel
    n_ctx: int | None = None  # the whole context (llama.cpp) or max_model_len (vLLM)
    slot_n_ctx: tuple[int, ...] = ()  # llama.cpp: context each slot really gets
    startup_s: float | None = None
    raw: dict[str, Any] = field(default_factory=dict)

    def rows(self) -> list[tuple[str, str]]:
        """Label/value pairs for a table."""
        rows = [
            ("engine", self.engine),
            ("url", self.base_url),
            ("model", self.model_name),
            ("version", self.version or "unknown"),
        ]
        if self.total_slots is not None:
            rows.append(("slots (--parallel)", str(self.total_slots)))
        if self.n_ctx is not None:
            label = "max model length" if self.engine == "vllm" else "context (-c)"
            rows.append((label, str(self.n_ctx)))
        if self.slot_n_ctx:
            same = len(set(self.slot_n_ctx)) == 1
            text = (
                f"{self.slot_n_ctx[0]} each" if same else ", ".join(str(n) for n in self.slot_n_ctx)
            )
            rows.append(("context per slot", text))
        if self.startup_s is not None:
            rows.append(("ready after", f"{self.startup_s:.1f} s"))
        return rows


# --------------------------------------------------------------------------- helpers


def port_is_free(host: str, port: int) -> bool:
    """True when nothing listens on host:port (TIME_WAIT leftovers do not count)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS considers free now (for tests that must not collide)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def resolve_model_path(engine: str, model: Path) -> Path:
    """The file or folder this engine loads: a GGUF file for llama.cpp, an HF folder otherwise.

    A folder written by `felab model tiny` holds both, and the right one is picked.
    """
    gguf = lab_start(engine).model_file == "gguf"
    model = Path(model).expanduser()
    if not model.exists():
        raise ModelNotFound(
            f"model not found: {model} does not exist. Make the lab's tiny model with "
            f"`felab model tiny --out DIR`, then pass "
            + ("DIR/tiny.gguf" if gguf else "DIR/hf")
            + "."
        )
    if gguf:
        if model.is_dir():
            ggufs = sorted(model.glob("*.gguf"))
            if len(ggufs) == 1:
                return ggufs[0]
            raise ModelNotFound(
                f"llama.cpp loads one GGUF file, and {model} is a folder with "
                f"{len(ggufs)} .gguf files; pass the file itself."
            )
        try:
            with model.open("rb") as fh:
                magic = fh.read(4)
        except OSError as exc:
            raise ModelNotFound(f"cannot read {model}: {exc.strerror or exc}") from None
        if magic != b"GGUF":
            raise ModelNotFound(
                f"{model} is not a GGUF file (it does not start with GGUF): llama.cpp loads "
                "GGUF models, such as the one `felab model tiny --out DIR` writes"
            )
        return model
    if model.is_file():
        raise ModelNotFound(
            f"{engine} loads a Hugging Face folder (config.json, *.safetensors, tokenizer), "
            f"not a single file: {model}."
        )
    if not (model / "config.json").is_file() and (model / "hf" / "config.json").is_file():
        return model / "hf"
    if not (model / "config.json").is_file():
        raise ModelNotFound(f"{model} has no config.json: it is not a Hugging Face model folder.")
    return model


def _has_flag(args: Sequence[str], *names: str) -> bool:
    return any(a in names or any(a.startswith(n + "=") for n in names) for a in args)


def _flag_value(args: Sequence[str], *names: str) -> str | None:
    """The value of the last `-x V` / `--x=V` among `args`."""
    value = None
    for i, a in enumerate(args):
        for n in names:
            if a == n and i + 1 < len(args):
                value = args[i + 1]
            elif a.startswith(n + "="):
                value = a.split("=", 1)[1]
    return value


def slot_check(extra_args: Sequence[str]) -> Any | None:
    """The slot trap check for llama-server flags, when both `-c` and `--parallel` are given.

    Returns felab_core.sizing.slots.SlotVerdict (its `.explanation` is the lesson), else None.
    """
    ctx = _flag_value(extra_args, "-c", "--ctx-size")
    parallel = _flag_value(extra_args, "-np", "--parallel")
    if ctx is None or parallel is None:
        return None
    try:
        ctx_n, par_n = int(ctx), int(parallel)
    except ValueError:
        return None
    unified = _has_flag(extra_args, "-kvu", "--kv-unified")
    from felab_core.sizing.slots import check_flags  # the one call site of the slot trap check

    try:
        return check_flags(ctx_n, par_n, unified)
    except ValueError:  # SizingError: e.g. -c 0; the server will say what it does
        return None


def _set_pdeathsig() -> None:  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


_LIVE: weakref.WeakSet[ServerProcess] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for server in list(_LIVE):
        with contextlib.suppress(Exception):
            server.stop()


# --------------------------------------------------------------------------- the process


class ServerProcess:
    """One real server: `with ServerProcess("llamacpp", model) as s: ... s.info.base_url`."""

    def __init__(
        self,
        engine: str,
        model: Path | str,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        extra_args: Sequence[str] = (),
        log_path: Path | None = None,
        startup_timeout: float | None = None,
        location: EngineLocation | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        if engine not in ENGINES:
            raise EngineError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
        self.engine = engine
        self.model = Path(model).expanduser()
        self.host = host
        self.port = port if port is not None else DEFAULT_PORTS[engine]
        self.extra_args = list(extra_args)
        self.startup_timeout = startup_timeout or DEFAULT_STARTUP_TIMEOUT[engine]
        self._location = location
        self._extra_env = dict(env or {})
        #: The server's stdout and stderr; by default the last run of this engine on this port.
        self.log_path = log_path or (
            get_settings().cache_dir / "logs" / f"{engine}-{self.port}.log"
        )
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_fh: IO[bytes] | None = None
        self.info: ServerInfo | None = None
        self.slot_verdict: Any | None = None
        self._model_path: Path | None = None
        self._ready_body: Any = None

    # ---- the command line

    @property
    def location(self) -> EngineLocation:
        if self._location is None:
            self._location = require_engine(self.engine)
        return self._location

    @property
    def model_path(self) -> Path:
        if self._model_path is None:
            self._model_path = resolve_model_path(self.engine, self.model)
        return self._model_path

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        if host in ("0.0.0.0", "[::]"):
            host = "127.0.0.1"
        return f"http://{host}:{self.port}"

    @property
    def model_name(self) -> str:
        """What to send as `model`: MLX and vLLM insist on the exact `--model` path."""
        if self.engine == "vllm":
            name = _flag_value(self.extra_args, "--served-model-name")
            if name:
                return name
        return str(self.model_path)

    def command(self) -> list[str]:
        """The full argv. felab's own defaults are listed here, not hidden."""
        model = self.model_path  # first: a missing model is the likelier mistake
        loc, args = self.location, self.extra_args
        base = [*loc.command]
        where = [lab_start(self.engine).model_flag, str(model), "--host", self.host]
        where += ["--port", str(self.port)]
        if self.engine != "vllm":
            return [*base, *where, *args]
        defaults: list[str] = []
        if not _has_flag(args, "--dtype"):
            defaults += ["--dtype", "float32"]  # what the other engines run
        if not _has_flag(args, "--enforce-eager"):
            defaults += ["--enforce-eager"]  # no graph compilation: starts faster on CPU
        if not _has_flag(args, "--gpu-memory-utilization"):
            # On CPU this is the share of the machine's memory vLLM reserves (0.92 by default,
            # which fails on a machine that runs anything else); a lab model needs little.
            defaults += ["--gpu-memory-utilization", "0.2"]
        return [*base, *where, *defaults, *args]

    def environment(self) -> dict[str, str]:
        """Variables felab sets for the engine (`shell_line` shows them), not inherited ones."""
        cache = get_settings().cache_dir
        env: dict[str, str] = {}
        if self.engine in ("mlx", "vllm"):
            hub = cache / "hf-hub"  # must exist, or MLX's GET /v1/models fails
            hub.mkdir(parents=True, exist_ok=True)
            env.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(hub), TRANSFORMERS_OFFLINE="1")
        if self.engine == "vllm":
            run = cache / "vllm" / "run"
            for sub in ("cache", "inductor", "tmp"):
                (run / sub).mkdir(parents=True, exist_ok=True)
            env.update(
                VLLM_HOST_IP="127.0.0.1",
                VLLM_CACHE_ROOT=str(run / "cache"),
                TORCHINDUCTOR_CACHE_DIR=str(run / "inductor"),
                TMPDIR=str(run / "tmp"),
                VLLM_NO_USAGE_STATS="1",
                DO_NOT_TRACK="1",
            )
        env.update(self._extra_env)
        return env

    def shell_line(self) -> str:
        """The command as one copy-pasteable line, environment first."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.environment().items())
        return (env + " " if env else "") + shlex.join(self.command())

    # ---- life cycle

    def start(self, wait: bool = True, log: Callable[[str], None] | None = None) -> ServerProcess:
        """Check, start, and (by default) wait until a completion succeeds."""
        if self.proc is not None:
            raise ServeError("this server was already started")
        self.model_path  # noqa: B018  (ModelNotFound before anything else)
        self.location  # noqa: B018  (EngineNotInstalled)
        if self.engine == "llamacpp":
            self.slot_verdict = slot_check(self.extra_args)
            if self.slot_verdict is not None and log is not None:
                log(self.slot_verdict.explanation)
        if not port_is_free(self.host, self.port):
            raise PortInUse(self.host, self.port)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_fh = open(self.log_path, "wb")  # noqa: SIM115  (closed in stop())

        in_main = threading.current_thread() is threading.main_thread()
        preexec = _set_pdeathsig if (sys.platform == "linux" and in_main) else None
        self._started = time.monotonic()
        try:
            self.proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=self._log_fh,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.environment()},
                start_new_session=True,  # own process group: stop() kills helpers too
                preexec_fn=preexec,
            )
        except OSError as exc:
            self._close_log()
            raise ServeError(f"could not start {self.command()[0]}: {exc}") from exc
        _LIVE.add(self)
        if wait:
            try:
                self.wait_ready()
            except BaseException:
                self.stop()
                raise
        return self

    def log_tail(self, lines: int = 20) -> str:
        if not self.log_path.exists():
            return "(no log)"
        with open(self.log_path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            text = fh.read().decode("utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:]) or "(the log is empty)"

    def _ready_request(self, client: httpx.Client) -> httpx.Response:
        body = {
            "model": self.model_name,
            "messages": [{"role": "user", "content": "ready?"}],
            "max_tokens": 1,
            "temperature": 0,
            "stream": False,
        }
        return client.post(f"{self.base_url}/v1/chat/completions", json=body)

    def wait_ready(self, timeout: float | None = None) -> ServerInfo:
        """Poll with a real completion request until it succeeds, the server dies, or time is up."""
        timeout = timeout or self.startup_timeout
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        proc = self.proc
        if proc is None:
            raise ServeError("start() the server before waiting for it")
        with httpx.Client(timeout=httpx.Timeout(10.0, connect=2.0), trust_env=False) as client:
            while True:
                code = proc.poll()
                if code is not None:
                    raise ServerStartError(
                        f"{self.engine} server exited with code {code} before it answered",
                        self.log_tail(),
                        self.log_path,
                    )
                try:
                    r = self._ready_request(client)
                    if r.status_code == 200:
                        with contextlib.suppress(ValueError):
                            self._ready_body = r.json()
                        break
                    last = f"HTTP {r.status_code}: {r.text[:300]}"
                    if r.status_code in (400, 401, 403, 404, 422):
                        raise ServerStartError(
                            f"{self.engine} server refused the readiness request ({last})",
                            self.log_tail(),
                            self.log_path,
                        )
                except httpx.TransportError as exc:
                    last = f"{type(exc).__name__}: {exc}"
                if time.monotonic() > deadline:
                    raise ServerStartError(
                        f"{self.engine} server did not answer a completion within {timeout:.0f} s "
                        f"(last: {last})",
                        self.log_tail(),
                        self.log_path,
                    )
                time.sleep(0.1)
            startup = time.monotonic() - self._started
            self.info = self._describe(client, startup)
        return self.info

    def _describe(self, client: httpx.Client, startup: float) -> ServerInfo:
        def get(path: str) -> Any:
            try:
                r = client.get(self.base_url + path)
                return r.json() if r.status_code == 200 else None
            except (httpx.HTTPError, ValueError):
                return None

        name, version = self.model_name, self.location.version
        raw: dict[str, Any] = {}
        if self.engine == "llamacpp":
            props = get("/props") or {}
            slots = get("/slots")  # 501 when started with --no-slots
            raw = {"props": props, "slots": slots}
            settings = props.get("default_generation_settings") or {}
            slot_ctx: tuple[int, ...] = ()
            if isinstance(slots, list):
                slot_ctx = tuple(
                    int(s["n_ctx"])
                    for s in slots
                    if isinstance(s, dict) and isinstance(s.get("n_ctx"), int)
                )
            total = props.get("total_slots")
            n_ctx = settings.get("n_ctx")
            if not slot_ctx and isinstance(total, int) and isinstance(n_ctx, int):
                slot_ctx = (n_ctx,) * total
            ctx_flag = _flag_value(self.extra_args, "-c", "--ctx-size")  # the server omits it
            return ServerInfo(
                self.engine,
                self.base_url,
                name,
                props.get("build_info") or version,
                total_slots=total if isinstance(total, int) else None,
                n_ctx=int(ctx_flag) if ctx_flag and ctx_flag.isdigit() else None,
                slot_n_ctx=slot_ctx,
                startup_s=startup,
                raw=raw,
            )
        models = get("/v1/models") or {}
        raw["models"] = models
        data = models.get("data") if isinstance(models, dict) else None
        max_len = None
        if isinstance(data, list) and data and isinstance(data[0], dict):
            max_len = data[0].get("max_model_len")
        if self.engine == "mlx" and isinstance(self._ready_body, dict):
            # mlx_lm.server's fingerprint starts "<mlx-lm version>-<mlx version>-<platform>"
            parts = str(self._ready_body.get("system_fingerprint") or "").split("-")
            if len(parts) >= 2 and parts[0][:1].isdigit():
                version = f"mlx-lm {parts[0]}, mlx {parts[1]}"
        if self.engine == "vllm":
            ver = get("/version") or {}
            raw["version"] = ver
            version = ver.get("version") or version
        return ServerInfo(
            self.engine,
            self.base_url,
            name,
            version,
            n_ctx=max_len if isinstance(max_len, int) else None,
            startup_s=startup,
            raw=raw,
        )

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace: float = 10.0) -> int | None:
        """SIGTERM the whole process group, then SIGKILL what is left; returns the exit code."""
        proc = self.proc
        if proc is None:
            return None
        pgid = proc.pid  # start_new_session: the group id is the leader's pid
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGTERM)
            with contextlib.suppress(Exception):  # subprocess.TimeoutExpired
                proc.wait(timeout=grace)
        deadline = time.monotonic() + min(grace, 5.0)
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _group_alive(pgid):  # only a live group: never signal a reused id
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        code: int | None = proc.wait()
        _LIVE.discard(self)
        self._close_log()
        return code

    def _close_log(self) -> None:
        if self._log_fh is not None:
            self._log_fh.close()
            self._log_fh = None

    def __enter__(self) -> ServerProcess:
        if self.proc is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


__all__ = [
    "DEFAULT_PORTS",
    "EngineError",
    "ModelNotFound",
    "PortInUse",
    "ServeError",
    "ServerInfo",
    "ServerProcess",
    "ServerStartError",
    "free_port",
    "port_is_free",
    "resolve_model_path",
    "slot_check",
]
