"""`felab bench --api` of another API than the server speaks (sweep 22 a A15): each request
had ended in a bare "HTTP 404". The error now names the path asked, says the server may speak
another API and names the --api values to try; where felab identified the server (before the
run, no generation request), a note names the API its kind speaks. No other path is probed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.engine.apis import Api
from felab_core.engine.request_errors import server_error_message
from felab_core.lab.scripted_server import Script, ScriptedServer

runner = CliRunner()


@contextmanager
def serving(script: Script) -> Iterator[ScriptedServer]:
    server = ScriptedServer(script).start_in_thread()
    try:
        yield server
    finally:
        server.stop_thread()


def _bench(server: ScriptedServer, api: str, *more: str) -> tuple[int, str]:
    args = ["bench", "--url", server.base_url, "--api", api, "--model", "m", "-n", "2"]
    args += ["-c", "1", "--warmup", "0", "--no-csv", *more]
    result = runner.invoke(app, args, env={"COLUMNS": "300"})
    return result.exit_code, " ".join(result.output.split())


@pytest.mark.parametrize(
    ("script", "api", "path", "said", "try_"),
    [
        (Script(persona="vllm"), "ollama", "/api/chat", "Not Found", "openai-chat"),
        (
            Script(persona="ollama", paths=("/api/chat",)),
            "openai-completions",
            "/v1/completions",
            "404 page not found",
            "ollama",
        ),
        (  # a llama.cpp-style server of /completion only: none of felab's APIs
            Script(persona="llamacpp", paths=("/completion",)),
            "openai-chat",
            "/v1/chat/completions",
            "File Not Found",
            "openai-completions",
        ),
    ],
)
def test_a_404_on_the_apis_path_names_it_and_the_apis_to_try(
    script: Script, api: str, path: str, said: str, try_: str
) -> None:
    with serving(script) as server:
        code, out = _bench(server, api)
    assert code == 3, out  # every request failed: a target not timed
    assert f"HTTP 404: {said}; the server has no endpoint at {path}, where --api {api}" in out
    assert "it may speak another API" in out and f"--api {try_} (" in out
    assert {r.path for r in server.log} == {path}  # no other path was posted to (no probe)


def test_an_identified_server_says_the_api_it_speaks() -> None:
    with serving(Script(persona="vllm")) as server:
        code, out = _bench(server, "ollama")
    assert code == 3
    assert "the server is vLLM (" in out and "which speaks --api openai-chat" in out
    with serving(Script(persona="vllm")) as server:  # --no-check: nothing identified, no note
        _, unchecked = _bench(server, "ollama", "--no-check")
    assert "the server is vLLM" not in unchecked and "--api openai-chat (" in unchecked


def test_a_404_for_a_model_keeps_its_own_words() -> None:
    """Ollama's 404 names the model it lacks: the path was right, no other API is offered."""
    with serving(Script(persona="ollama", fault="http404")) as server:
        _, out = _bench(server, "ollama")
    assert "HTTP 404: model 'x' not found, try pulling it first" in out
    assert "another API" not in out


def test_a_405_on_the_path_says_it_takes_no_post_there() -> None:
    said = server_error_message(
        405, b'{"detail":"Method Not Allowed"}', asked=(Api.OPENAI_CHAT, "/v1/chat/completions")
    )
    assert said.startswith(
        "HTTP 405: Method Not Allowed; the server does not take a POST at /v1/chat/completions"
    )
    assert "--api openai-completions (/v1/completions) or --api ollama (/api/chat)" in said
