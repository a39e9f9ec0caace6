"""Tool calls count: an agentic turn streams its function's arguments as `tool_calls` deltas and
no content, and those are generated tokens (TTFT at the first, ITL between them)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.engine.apis import Frame, Ollama, OpenAIChat
from felab_core.lab.scripted_server import Script, ScriptedServer

runner = CliRunner()


def test_tool_call_deltas_are_generated_text() -> None:
    chat = OpenAIChat()
    first = {
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": ""},
                        }
                    ]
                },
            }
        ]
    }
    more = {
        "choices": [
            {
                "index": 0,
                "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"city"'}}]},
            }
        ]
    }
    assert chat.interpret(Frame(json.dumps(first))).text == "get_weather"
    assert chat.interpret(Frame(json.dumps(more))).text == '{"city"'
    ollama = Ollama()
    whole = {
        "message": {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Lisbon"}}}],
        },
        "done": False,
    }
    assert ollama.interpret(Frame(json.dumps(whole))).text == 'get_weather{"city":"Lisbon"}'


def test_a_tool_call_workload_is_timed_like_text(tmp_path: Path) -> None:
    server = ScriptedServer(Script(persona="vllm", ttft_s=0.01, itl_s=0.003)).start_in_thread()
    out = tmp_path / "tools.json"
    try:
        result = runner.invoke(
            app,
            [
                "bench",
                "vllm",
                "--url",
                server.base_url,
                "--model",
                "m",
                "--tools",
                "-n",
                "4",
                "--max-tokens",
                "20",
                "--no-csv",
                "--json",
                str(out),
            ],
        )
    finally:
        server.stop_thread()
    assert result.exit_code == 0, result.output
    body = server.log[-1].body
    assert body["tools"][0]["function"]["name"] == "get_weather"
    assert body["tool_choice"] == "required"
    assert "get_weather" in body["messages"][0]["content"]
    (run,) = json.loads(out.read_text())["runs"]
    for request in run["requests"]:
        assert request["ok"] and request["counted_chunks"] == 20
        assert request["output_tokens"] == 20 and request["ttft_s"] is not None
        assert len(request["itl_s"]) == 19
    assert run["summary"]["writing_tps"]["p50"] > 0
    record = json.loads(out.read_text())
    assert record["workload"]["tools"] is True
    assert not any("made no tool call" in n for n in record["notes"])


def test_a_server_that_answers_in_prose_is_said_not_to_make_tool_calls(tmp_path: Path) -> None:
    """Eighteenth sweep (a) M5: a server that ignores tool_choice "required" and writes prose
    was timed and kept as an agent's turns without a word; its record could not even say the
    run had --tools."""
    script = Script(persona="vllm", ttft_s=0.005, itl_s=0.002, ignores_tools=True)
    server = ScriptedServer(script).start_in_thread()
    out = tmp_path / "prose.json"
    try:
        args = ["bench", "vllm", "--url", server.base_url, "--model", "m", "--tools", "-n", "3",
                "--max-tokens", "8", "--no-csv", "--json", str(out)]  # fmt: skip
        result = runner.invoke(app, args, env={"COLUMNS": "250"})
    finally:
        server.stop_thread()
    assert result.exit_code == 0, result.output
    assert "3 of 3 answers made no tool call (prose instead)" in result.output
    assert any("made no tool call" in n for n in json.loads(out.read_text())["notes"])


def test_tools_need_a_chat_api() -> None:
    result = runner.invoke(
        app, ["bench", "--url", "http://127.0.0.1:9", "--api", "openai-completions", "--tools"]
    )
    assert result.exit_code == 2
    assert "--tools needs a chat API" in " ".join(result.output.split())
