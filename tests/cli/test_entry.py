"""The installed `felab` script: a Ctrl-C while the commands are still loading ends quietly
with 130, as one a moment later does (eleventh sweep: Python's traceback for the first 0.5 s)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Ctrl-C pressed while typer loads: a finder that raises it on that import, then the script's
# own entry point, as the installed `felab` calls it.
_INTERRUPTED_WHILE_LOADING = """
import sys

class CtrlC:
    def find_spec(self, name, path=None, target=None):
        if name == "typer":
            raise KeyboardInterrupt
        return None

sys.meta_path.insert(0, CtrlC())
sys.argv = ["felab", "size", "chips"]
from felab.cli.entry import main
main()
"""


def test_the_script_is_the_guarded_entry_point() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["felab"] == "felab.cli.entry:main"


def test_ctrl_c_while_loading_exits_130_without_a_traceback() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_WHILE_LOADING],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 130, out.stderr
    assert "Traceback" not in out.stderr and "KeyboardInterrupt" not in out.stderr


def test_the_entry_point_runs_the_commands() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "from felab.cli.entry import main; main()", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()


def test_a_reader_that_left_ends_quietly(tmp_path: Path) -> None:
    """`felab numbers model --help | head -30` said "could not connect: Broken pipe ... is the
    service running?" when head left before the last line (a broken pipe is a ConnectionError).
    Now the boundary lets click end it as it ends any closed pipe: exit 1, nothing said.
    `broker ca` writes with click's echo, as that help's last line was written."""
    env = {**os.environ, "FELAB_DATA_DIR": str(tmp_path / "data"), "HOME": str(tmp_path)}
    made = subprocess.run(
        [sys.executable, "-m", "felab", "broker", "tls", "--dir", str(tmp_path / "tls")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=env,
    )
    assert made.returncode == 0, made.stderr
    read, write = os.pipe()
    os.close(read)  # the reader is gone before felab writes
    try:
        out = subprocess.run(
            [sys.executable, "-m", "felab", "broker", "ca"],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            cwd=ROOT,
            env={**env, "FELAB_BROKER_CA_FILE": str(tmp_path / "tls" / "ca.pem")},
        )
    finally:
        os.close(write)
    assert out.returncode == 1, out.stderr
    assert out.stderr == ""
