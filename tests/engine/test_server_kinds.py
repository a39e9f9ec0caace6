"""The server kinds table (felab_core.engine.server_kinds): one entry per kind, read everywhere.

TensorRT-LLM is the worked example of adding a kind: its entry below is all felab needed to
time a `trtllm-serve` under its own name."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.engine.server_kinds import LAB_KINDS, TRAITS, ServerKind
from felab_core.engine.targets import DEFAULT_TARGETS, force_length_extra
from felab_core.lab.engines import ENGINES, EngineLocation
from felab_core.lab.scripted_server import Script, ScriptedServer
from felab_core.lab.serve import DEFAULT_PORTS, DEFAULT_STARTUP_TIMEOUT, ServerProcess

runner = CliRunner()


def test_every_kind_has_its_traits_and_a_default_target() -> None:
    assert set(TRAITS) == set(ServerKind)
    assert len({t.label for t in TRAITS.values()}) == len(TRAITS)
    for kind, traits in TRAITS.items():
        if traits.port is None:
            assert kind not in DEFAULT_TARGETS.values()
            continue
        target = DEFAULT_TARGETS[kind.value]
        assert target.url == f"http://127.0.0.1:{traits.port}" and target.api is traits.api
    assert DEFAULT_TARGETS["mlx"].note and "8081" in DEFAULT_TARGETS["mlx"].note


def test_the_lab_reads_its_ports_and_timeouts_from_the_table() -> None:
    assert {k.value for k in LAB_KINDS} == {"llamacpp", "mlx", "vllm"}
    assert DEFAULT_PORTS == {"llamacpp": 8080, "mlx": 8081, "vllm": 8000}
    assert DEFAULT_STARTUP_TIMEOUT["vllm"] == 600.0
    assert ENGINES == ("llamacpp", "mlx", "vllm")


def test_the_lab_starts_each_kind_as_its_entry_says(tmp_path: Path) -> None:
    """The model's flag and file (a GGUF file or a Hugging Face folder) come from the table."""
    (tmp_path / "tiny.gguf").write_bytes(b"GGUF")
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text("{}")
    for kind in LAB_KINDS:
        lab = kind.traits.lab
        assert lab is not None
        loc = EngineLocation(kind.value, ("engine",), "test", Path("engine"))
        server = ServerProcess(kind.value, tmp_path, location=loc)  # a `felab model tiny` folder
        model = tmp_path / ("tiny.gguf" if lab.model_file == "gguf" else "hf")
        argv = server.command()
        assert argv[:3] == ["engine", lab.model_flag, str(model)], kind
        assert argv[3:7] == ["--host", "127.0.0.1", "--port", str(kind.traits.port)], kind
        assert server.startup_timeout == lab.startup_timeout_s


def test_a_trtllm_server_is_timed_under_its_own_name(tmp_path: Path) -> None:
    trt = TRAITS[ServerKind.TRTLLM]
    assert trt.port == 8000 and trt.needs_model and not trt.metrics  # JSON at /metrics
    assert force_length_extra(ServerKind.TRTLLM) == {"ignore_eos": True}
    server = ScriptedServer(Script(persona="none", model="llama-3.1-8b")).start_in_thread()
    out = tmp_path / "trt.json"
    try:
        result = runner.invoke(
            app,
            ["bench", "trtllm", "--url", server.base_url, "-n", "2", "--max-tokens", "4",
             "--no-csv", "--json", str(out)],
        )  # fmt: skip
    finally:
        server.stop_thread()
    assert result.exit_code == 0, result.output
    body = server.log[-1].body
    assert body["model"] == "llama-3.1-8b"  # it needs one: the first the server lists
    assert body["ignore_eos"] is True
    record = json.loads(out.read_text())
    assert record["target"]["kind"] == "trtllm"
    said = " ".join(result.output.split())
    assert "could not confirm" in said and "TensorRT-LLM" in said


def test_every_list_of_kinds_in_words_names_every_kind(tmp_path: Path) -> None:
    """trtllm was named by `felab numbers enter`'s refusal (read from ServerKind) but not by
    the lists typed by hand: a target file's missing kind, bench without a target, the help
    of bench's targets and of numbers' server. Each now comes from kind_names()."""
    import inspect

    import pytest

    from felab.cli.bench import bench
    from felab.cli.numbers import enter, model
    from felab_core.engine.targets import TargetError, load_targets, resolve_target

    targeted = [k.value for k in ServerKind if TRAITS[k].port is not None]
    with pytest.raises(TargetError) as unnamed:
        resolve_target(None, targets=dict(DEFAULT_TARGETS))
    assert all(k in str(unnamed.value) for k in targeted), unnamed.value
    path = tmp_path / "targets.toml"
    path.write_text('[targets.new]\nurl = "http://x:1"\n')
    with pytest.raises(TargetError) as kindless:
        load_targets(path)
    assert all(k.value in str(kindless.value) for k in ServerKind), kindless.value
    helps = [inspect.signature(bench).parameters["targets"].default.help]
    helps += [inspect.signature(c).parameters["server"].default.help for c in (enter, model)]
    for text in helps:
        assert "trtllm" in text and all(k in text for k in targeted), text
