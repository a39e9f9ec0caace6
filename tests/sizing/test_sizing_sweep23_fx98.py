"""Sweep 23 s2, sizing inputs: every --chip example the help and the docs give is one felab
takes (M1: `--chip H100` was the example, and is refused as three chips); an ambiguous chip is
named by its maker's tool; a GGUF or safetensors file given as --config says which flag or file
it wants (M3: "save the model's config.json as UTF-8")."""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.sizing import speed_limit
from felab_core.sizing.errors import SizingError
from tests.reports.conftest import SAMPLE_CSV
from tests.sizing.test_model_shape import write_gguf

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
WIDE = {"COLUMNS": "220"}

#: `--chip NAME` as an example writes it: quoted either way, or one bare word.
_CHIP_FLAG = re.compile(r"""--chip[ =](?:"([^"]+)"|'([^']+)'|([^\s"'`\\)]+))""")


def _commands(command: Any, path: str = "felab") -> Iterator[tuple[str, Any]]:
    """Every command under `command`, felab's lazy groups loaded as `felab --help` loads them."""
    yield path, command
    if hasattr(command, "list_commands"):
        ctx = type(command).context_class(command)
        for name in command.list_commands(ctx):
            yield from _commands(command.get_command(ctx, name), f"{path} {name}")


def _help_examples() -> list[tuple[str, str]]:
    """(where, chip) for each chip a command's help names: its --chip option's "(e.g. ...)" and
    each `--chip NAME` in its text (the Examples block)."""
    found: list[tuple[str, str]] = []
    for path, command in _commands(typer.main.get_command(app)):
        for param in command.params:
            if "--chip" in getattr(param, "opts", ()):
                for listed in re.findall(r"e\.g\. ([^)]*)\)", param.help or ""):
                    found += [(f"{path} --chip help", c.strip(" '\"")) for c in listed.split(",")]
                for named in re.findall(r"such as '([^']+)'", param.help or ""):
                    found.append((f"{path} --chip help", named))
        found += [(path, chip) for chip in _command_lines(command.help or "")]
    return found


def _command_lines(text: str) -> list[str]:
    """The chip of each `--chip NAME` on a line that is a command to copy (not prose's "the
    machine (--chip or --bandwidth)")."""
    return [
        "".join(m)
        for line in text.splitlines()
        if line.lstrip().startswith("felab ")
        for m in _CHIP_FLAG.findall(line)
    ]


def _doc_examples() -> list[tuple[str, str]]:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found: list[tuple[str, str]] = []
    for doc in docs:
        found += [(doc.name, chip) for chip in _command_lines(doc.read_text(encoding="utf-8"))]
    return found


def test_the_help_names_chips_to_copy() -> None:
    names = {chip for _, chip in _help_examples()}
    assert {"M4 Pro", "H100 SXM"} <= names  # the helps' own examples are read


@pytest.mark.parametrize(
    ("where", "chip"), sorted({*_help_examples(), *_doc_examples()}), ids=lambda x: str(x)
)
def test_every_chip_an_example_names_is_taken(where: str, chip: str) -> None:
    name = chip.split("=", 1)[1] if "=" in chip else chip  # HOST=CHIP
    speed_limit.find_chip(name)  # raises SizingError for one felab refuses


def test_the_memo_example_with_an_h100_runs_as_far_as_its_files() -> None:
    result = runner.invoke(
        app,
        ["size", "limit", "--chip", "H100 SXM", "--model-bytes", "8.5GB"],
        env=WIDE,
    )
    assert result.exit_code == 0, result.output
    assert "3,350 GB/s" in result.output


def test_an_ambiguous_nvidia_chip_is_named_by_nvidia_smi() -> None:
    with pytest.raises(SizingError) as caught:
        speed_limit.find_chip("H100")
    said = str(caught.value)
    assert "'H100 SXM' (3,350 GB/s)" in said
    assert "nvidia-smi --query-gpu=name" in said
    assert "About This Mac" not in said


def test_an_ambiguous_mac_chip_is_named_by_about_this_mac() -> None:
    with pytest.raises(SizingError) as caught:
        speed_limit.find_chip("M4 Max")
    assert "About This Mac" in str(caught.value)
    assert "nvidia-smi" not in str(caught.value)


def test_every_maker_in_the_table_has_its_own_tool() -> None:
    for chip in speed_limit.CHIPS:
        assert speed_limit.where_named(chip) != "the maker's system tool", chip.family


def _safetensors(path: Path) -> Path:
    header = json.dumps(
        {"w": {"dtype": "F16", "shape": [2, 2], "data_offsets": [0, 8]}}, separators=(",", ":")
    ).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(8))
    return path


@pytest.mark.parametrize(
    "args",
    [
        ("size", "kv"),
        ("size", "slots", "-c", "8192", "--parallel", "4", "--need", "8000"),
        ("size", "limit", "--bandwidth", "273"),
        ("memo", "--csv", str(SAMPLE_CSV), "--chip", "M4 Pro", "--kv-memory", "16GiB", "-o", "-"),
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_a_gguf_given_as_config_is_sent_to_gguf(tmp_path: Path, args: tuple[str, ...]) -> None:
    gguf = write_gguf(tmp_path / "model.gguf")
    result = runner.invoke(app, [*args, "--config", str(gguf)], env=WIDE)
    assert result.exit_code == 2, result.output
    assert f"{gguf} is a GGUF model (it starts with GGUF), not a config.json" in result.output
    assert "--gguf" in result.output
    assert "UTF-8" not in result.output


def test_a_safetensors_file_given_as_config_asks_for_the_config_beside_it(
    tmp_path: Path,
) -> None:
    weights = _safetensors(tmp_path / "model.safetensors")
    result = runner.invoke(app, ["size", "kv", "--config", str(weights)], env=WIDE)
    assert result.exit_code == 2, result.output
    assert "is a safetensors weights file, not a config.json" in result.output
    assert "UTF-8" not in result.output and "not valid JSON" not in result.output
