"""Identity endpoints of several engines answering at one address name none (A08)."""

from __future__ import annotations

from felab_core.engine.probe import check_identity, identify
from felab_core.engine.targets import load_targets, resolve_target
from tests.engine.test_probe_evidence import _server

_EVERY_ENGINE = {
    "/props": {"total_slots": 4, "default_generation_settings": {}},
    "/api/version": {"version": "0.5.0"},
    "/version": {"version": "0.6.0"},
    "/v1/models": {"data": [{"id": "m"}]},
}


async def test_three_engines_answering_are_said_and_none_is_believed() -> None:
    """Twenty-first sweep A08: /props, /api/version and /version all answered, and the run was
    filed as llama.cpp without a word."""
    routes = lambda path: (200, _EVERY_ENGINE[path]) if path in _EVERY_ENGINE else (404, {})  # noqa: E731
    async with _server(routes) as url:
        ident = await identify(url)
        target = resolve_target("llamacpp", targets=load_targets(None), url=url)
    assert ident.kind is None, ident
    assert "/props lists slots (llama.cpp) and /api/version (Ollama) and /version (vLLM)" in (
        ident.evidence
    )
    note = check_identity(target, ident) or ""
    assert "could not confirm" in note and "engines that disagree" in note


async def test_sglang_serving_its_own_version_endpoint_is_still_sglang() -> None:
    both = {"/get_server_info": {"model_path": "m"}, "/version": {"version": "0.4"}}
    routes = lambda path: (200, both[path]) if path in both else (404, {})  # noqa: E731
    async with _server(routes) as url:
        ident = await identify(url)
    assert ident.kind is not None and ident.kind.value == "sglang", ident
