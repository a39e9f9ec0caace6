"""`felab compare` takes the records felab bench wrote, sealed, and refuses them once edited
(a 1 ns nudge, a deleted seal) unless asked to compare them on purpose (`--unsealed`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.lab.scripted_server import Script, ScriptedServer
from tests.cli.test_compare_cli import _bench

runner = CliRunner()


@pytest.fixture(scope="module")
def benched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two records written by a real bench of a scripted server."""
    folder = tmp_path_factory.mktemp("sealed")
    server = ScriptedServer(Script(persona="llamacpp", ttft_s=0.060, itl_s=0.012)).start_in_thread()
    try:
        return _bench(server, folder / "a.json"), _bench(server, folder / "b.json")
    finally:
        server.stop_thread()


def _edited(source: Path, to: Path, edit: object) -> Path:
    record = json.loads(source.read_text(encoding="utf-8"))
    edit(record)  # type: ignore[operator]
    to.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return to


def _nudge(record: dict[str, object]) -> None:
    request = record["runs"][0]["requests"][5]  # type: ignore[index]
    request["ttft_s"] += 1e-9


def test_a_record_bench_wrote_is_sealed_and_compared(benched: tuple[Path, Path]) -> None:
    a, b = benched
    record = json.loads(a.read_text(encoding="utf-8"))
    assert record["seal"].startswith("sha256:") and len(record["seal"]) == 7 + 64
    out = runner.invoke(app, ["compare", str(a), str(b), "-o", "json"])
    assert out.exit_code == 0, out.output
    assert "unsealed" not in out.output
    assert all("note" not in row for row in json.loads(out.stdout))


def test_a_float_edited_by_a_nanosecond_is_refused_by_its_seal(
    benched: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = benched
    nudged = _edited(a, tmp_path / "nudged.json", _nudge)
    out = runner.invoke(app, ["compare", str(nudged), str(b)])
    assert out.exit_code == 2, out.output
    said = " ".join(out.output.split())
    assert (
        "nudged.json: changed after felab wrote it (its seal does not match its contents)" in said
    )
    assert "pass --unsealed" in said and "Traceback" not in out.output


def test_a_record_whose_seal_was_removed_is_refused_naming_unsealed(
    benched: tuple[Path, Path], tmp_path: Path
) -> None:
    a, _ = benched
    bare = _edited(a, tmp_path / "bare.json", lambda r: r.pop("seal"))
    out = runner.invoke(app, ["compare", str(a), str(bare)])
    assert out.exit_code == 2, out.output
    said = " ".join(out.output.split())
    assert "bare.json: has no seal, and felab seals every record it writes" in said
    assert "--unsealed" in said


def test_unsealed_compares_an_edited_record_and_says_so_in_every_format(
    benched: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = benched
    nudged = _edited(a, tmp_path / "nudged.json", _nudge)
    table = runner.invoke(app, ["compare", str(nudged), str(b), "--unsealed"])
    assert table.exit_code == 0, table.output
    said = " ".join(table.output.split())
    assert "A (nudged.json) is unsealed: its seal does not match its contents" in said
    assert "checked field by field, not proven unchanged" in said
    assert "B (b.json)" not in said  # B's seal holds: no note of it
    md = runner.invoke(app, ["compare", str(nudged), str(b), "--unsealed", "-o", "md"])
    assert md.exit_code == 0 and "not proven unchanged" in " ".join(md.stdout.split())
    for fmt in ("json", "csv"):
        data = runner.invoke(app, ["compare", str(nudged), str(b), "--unsealed", "-o", fmt])
        assert data.exit_code == 0, data.output
        assert "unsealed: A (nudged.json) checked field by field, not proven unchanged" in (
            data.stdout
        )
    rows = json.loads(
        runner.invoke(app, ["compare", str(nudged), str(b), "--unsealed", "-o", "json"]).stdout
    )
    assert all(row["note"].startswith("unsealed: A (nudged.json)") for row in rows)


def test_unsealed_still_checks_each_field(benched: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = benched

    def broken(record: dict[str, object]) -> None:
        record.pop("seal")
        record["runs"][0]["requests"][5]["output_tokens"] = -3  # type: ignore[index]

    edited = _edited(a, tmp_path / "edited.json", broken)
    out = runner.invoke(app, ["compare", str(edited), str(b), "--unsealed"])
    assert out.exit_code == 2 and "output_tokens = -3, not a count" in out.output


def test_help_teaches_unsealed() -> None:
    out = runner.invoke(app, ["compare", "--help"], env={"COLUMNS": "200"})
    said = " ".join(out.output.split())
    assert "--unsealed" in said and "felab seals every record it writes" in said
