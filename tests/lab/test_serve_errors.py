"""ServerProcess's failure paths: each gives a specific message and leaves nothing running.

These use stand-in servers (small Python programs), so they run without any engine installed.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import textwrap
import time
import weakref
from pathlib import Path

import pytest

from felab_core.lab import serve
from felab_core.lab.engines import EngineLocation, EngineNotInstalled
from felab_core.lab.serve import (
    ModelNotFound,
    PortInUse,
    ServerProcess,
    ServerStartError,
    free_port,
    slot_check,
)


def _gone(pid: int) -> bool:
    """True when the process no longer exists (a zombie waiting for its reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return state in ("Z", "X")


def _wait_gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.05)
    return _gone(pid)


def _fake(tmp_path: Path, code: str) -> EngineLocation:
    script = tmp_path / "fake_server.py"
    script.write_text(textwrap.dedent(code))
    return EngineLocation("llamacpp", (sys.executable, str(script)), "test", script)


# A stand-in that answers completions like a server (argv: ... --port N), optionally deaf to TERM.
ANSWERING = """
    import json, signal, sys
    from http.server import BaseHTTPRequestHandler, HTTPServer
    if "--ignore-term" in sys.argv:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    port = int(sys.argv[sys.argv.index("--port") + 1])
    class H(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            body = json.dumps({"choices": [{"message": {"content": "x"}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        def do_GET(self):
            self.send_response(404)
            self.end_headers()
        def log_message(self, *a):
            pass
    print("fake server listening", flush=True)
    HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF")
    return path


def test_missing_model_file(tmp_path: Path) -> None:
    server = ServerProcess(
        "llamacpp", tmp_path / "nope.gguf", port=free_port(), location=_fake(tmp_path, "pass")
    )
    with pytest.raises(ModelNotFound, match=r"nope\.gguf does not exist"):
        server.start()
    assert server.proc is None


def test_hf_engine_wants_a_folder_with_config(tmp_path: Path, gguf: Path) -> None:
    loc = EngineLocation("mlx", (sys.executable, "-c", "pass"), "test", Path(sys.executable))
    with pytest.raises(ModelNotFound, match="not a single file"):
        ServerProcess("mlx", gguf, location=loc).start()
    with pytest.raises(ModelNotFound, match=r"no config\.json"):
        ServerProcess("mlx", tmp_path, location=loc).start()


def test_engine_not_installed(isolated_cache: Path, gguf: Path) -> None:
    server = ServerProcess("llamacpp", gguf, port=free_port())
    with pytest.raises(EngineNotInstalled, match="felab lab install llamacpp"):
        server.start()
    assert server.proc is None


def test_port_already_in_use(tmp_path: Path, gguf: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        server = ServerProcess("llamacpp", gguf, port=port, location=_fake(tmp_path, ANSWERING))
        with pytest.raises(PortInUse, match=f"port {port} on 127.0.0.1 is already in use"):
            server.start()
    assert server.proc is None


def test_server_that_dies_at_start(tmp_path: Path, gguf: Path) -> None:
    loc = _fake(
        tmp_path,
        """
        import sys
        print("error: failed to load model 'model.gguf'", flush=True)
        sys.exit(3)
    """,
    )
    server = ServerProcess(
        "llamacpp", gguf, port=free_port(), location=loc, log_path=tmp_path / "server.log"
    )
    with pytest.raises(ServerStartError) as err:
        server.start()
    text = str(err.value)
    assert "exited with code 3 before it answered" in text
    assert "failed to load model" in text  # the server's own last words
    assert str(tmp_path / "server.log") in text
    assert server.proc.poll() == 3


def test_server_that_never_answers_is_killed_with_its_children(tmp_path: Path, gguf: Path) -> None:
    pidfile = tmp_path / "child.pid"
    loc = _fake(
        tmp_path,
        f"""
        import subprocess, time
        child = subprocess.Popen(["sleep", "300"])
        open({str(pidfile)!r}, "w").write(str(child.pid))
        print("loading forever", flush=True)
        time.sleep(300)
    """,
    )
    server = ServerProcess("llamacpp", gguf, port=free_port(), location=loc, startup_timeout=1.5)
    with pytest.raises(ServerStartError, match="did not answer a completion within 2 s"):
        server.start()
    assert server.proc.poll() is not None
    assert _wait_gone(int(pidfile.read_text()))  # the helper process went with it


def test_stop_escalates_to_sigkill(tmp_path: Path, gguf: Path) -> None:
    loc = _fake(tmp_path, ANSWERING)
    server = ServerProcess(
        "llamacpp", gguf, port=free_port(), location=loc, extra_args=["--ignore-term"]
    )
    with server:
        assert server.info is not None and server.info.startup_s is not None
        pid = server.proc.pid
        started = time.monotonic()
        code = server.stop(grace=0.5)
    assert code == -signal.SIGKILL
    assert time.monotonic() - started < 5
    assert _gone(pid)


def test_everything_started_is_stopped_at_exit(
    tmp_path: Path, gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only this test's server: the session's real servers must outlive this test.
    monkeypatch.setattr(serve, "_LIVE", weakref.WeakSet())
    server = ServerProcess("llamacpp", gguf, port=free_port(), location=_fake(tmp_path, ANSWERING))
    server.start()
    pid = server.proc.pid
    serve._stop_all()  # what atexit runs
    assert _gone(pid)
    assert server.stop() is not None  # stopping twice is harmless


def test_command_lines_show_every_flag(tmp_path: Path) -> None:
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text("{}")
    py = EngineLocation(
        "vllm", ("python", "-m", "vllm.entrypoints.openai.api_server"), "test", Path("python")
    )
    vllm = ServerProcess("vllm", tmp_path, location=py)  # a felab model folder: picks hf/
    assert vllm.command() == [
        "python",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(hf),
        "--host",
        "127.0.0.1",
        "--port",
        "8000",
        "--dtype",
        "float32",
        "--enforce-eager",
        "--gpu-memory-utilization",
        "0.2",
    ]
    assert vllm.environment()["VLLM_HOST_IP"] == "127.0.0.1"
    mine = ServerProcess("vllm", hf, location=py, extra_args=["--dtype", "bfloat16"])
    assert mine.command().count("--dtype") == 1 and "bfloat16" in mine.command()
    mlx = ServerProcess("mlx", hf, location=py)
    assert mlx.port == 8081 and mlx.model_name == str(hf)
    line = mlx.shell_line()
    assert line.startswith("HF_HUB_OFFLINE=1 ") and "--model" in line


def test_slot_check_runs_only_with_ctx_and_parallel() -> None:
    verdict = slot_check(["-c", "2048", "--parallel", "4", "--metrics"])
    assert verdict is not None and verdict.per_slot == 512 and verdict.slots == 4
    assert "512" in verdict.explanation
    assert slot_check(["-c", "2048"]) is None
    unified = slot_check(["--ctx-size=2048", "-np", "4", "-kvu"])
    assert unified is not None and unified.per_slot == 2048
