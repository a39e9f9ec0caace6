"""What a student's machine installs and loads, checked on the real thing: a wheel built from
this tree claims no generic top-level names, the base install leaves the server's libraries to
`felab[server]`, and the commands a student runs (`felab bench`, `felab size`, `felab worker
pair|start`) load no database, bot or ingest code, in a fresh interpreter."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SERVER_LIBS = ("sqlalchemy", "alembic", "psycopg", "discord", "fsrs", "yaml")


def _loaded_after(code: str) -> set[str]:
    """Top-level modules loaded by running `code` in a fresh interpreter."""
    probe = f"import sys\n{code}\nprint(' '.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split())


@pytest.mark.parametrize(
    "argv",
    [
        ["bench", "--help"],
        ["size", "kv", "--help"],
        ["memo", "--help"],
        ["worker", "start", "--help"],
        ["worker", "pair", "--help"],
        ["worker", "identity", "--help"],
    ],
)
def test_student_commands_load_no_server_code(argv: list[str]) -> None:
    loaded = _loaded_after(
        f"from felab.cli.main import app\ntry:\n    app({argv!r})\nexcept SystemExit:\n    pass"
    )
    assert not loaded & {*SERVER_LIBS, "felab_bot"}, sorted(loaded & {*SERVER_LIBS, "felab_bot"})


def test_a_machines_worker_runtime_loads_no_server_code() -> None:
    loaded = _loaded_after("import felab_worker.machine, felab_worker.pairing, felab_core.jobs.run")
    # (kombu loads PyYAML when it happens to be installed, to offer a yaml serializer)
    forbidden = {*SERVER_LIBS, "felab_bot", "matplotlib"} - {"yaml"}
    assert not loaded & forbidden, sorted(loaded & forbidden)
    assert "celery" in loaded  # (it is a worker)


def test_the_base_install_leaves_server_libraries_to_the_extra() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = " ".join(project["dependencies"]).lower()
    server = " ".join(project["optional-dependencies"]["server"]).lower()
    for lib in ("sqlalchemy", "alembic", "psycopg", "discord.py", "fsrs", "pyyaml"):
        assert lib not in base and lib in server, lib


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_wheel_claims_no_generic_top_level_names(tmp_path: Path) -> None:
    src = tmp_path / "src"  # a copy: building in the checkout would leave build/ behind
    skip = shutil.ignore_patterns(".git", ".venv", "build", "data", "results", "*.egg-info")
    shutil.copytree(ROOT, src, ignore=skip)
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(src)],
        capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    (wheel,) = tmp_path.glob("felab-*.whl")
    names = {n.split("/")[0] for n in zipfile.ZipFile(wheel).namelist()}
    packages = {n for n in names if not n.endswith((".dist-info", ".data"))}
    assert packages == {"felab", "felab_core", "felab_bot", "felab_worker"}
    assert not {"bot", "worker", "tests", "benchmarks"} & names
