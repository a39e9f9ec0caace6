"""One way for the engine's tests to run `felab bench` against a scripted server: start it with a
script, run the real CLI with the given flags, stop it, and hand back the output and the record."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.lab.scripted_server import Script, ScriptedServer

runner = CliRunner()


@dataclass
class Benched:
    output: str  # what a user saw, rich's wrapping undone
    record: dict[str, Any]  # the JSON record (schema felab.bench/1)
    server: ScriptedServer  # stopped; its log holds every request it saw

    @property
    def run(self) -> dict[str, Any]:
        """The record's one run."""
        (only,) = self.record["runs"]
        return dict(only)


def bench(script: Script, out: Path, *flags: str, target: str = "llamacpp") -> Benched:
    """`felab bench TARGET --url <scripted> FLAGS --no-csv --json OUT`, which must succeed."""
    server = ScriptedServer(script).start_in_thread()
    try:
        args = ["bench", target, "--url", server.base_url, *flags, "--no-csv", "--json", str(out)]
        result = runner.invoke(app, args)
    finally:
        server.stop_thread()
    assert result.exit_code == 0, result.output
    return Benched(" ".join(result.output.split()), json.loads(out.read_text()), server)
