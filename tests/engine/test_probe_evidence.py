"""What the identity check says it saw: only endpoints that answered, and no verdict from a
models list owned by two engines (twentieth sweep (a) A10, A17)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from felab_core.engine.probe import identify
from felab_core.engine.server_kinds import ServerKind

Routes = Callable[[str], tuple[int, object]]


@asynccontextmanager
async def _server(routes: Routes) -> AsyncIterator[str]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                path = head.split(b" ", 2)[1].decode()
                status, body = routes(path)
                data = json.dumps(body).encode()
                writer.write(
                    f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n"
                    f"content-length: {len(data)}\r\n\r\n".encode()
                    + data
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        await server.wait_closed()


def _only_models(*owners: str) -> Routes:
    data = [{"id": f"m{i}", "owned_by": o} for i, o in enumerate(owners)]
    return lambda path: (200, {"data": data}) if path == "/v1/models" else (404, {"detail": "x"})


async def test_a_models_list_owned_by_two_engines_is_no_evidence() -> None:
    """A10: only /v1/models answered, owned by vllm and sglang; the refusal said
    "SGLang (/get_server_info answered)" though /get_server_info was a 404."""
    async with _server(_only_models("vllm", "sglang")) as url:
        ident = await identify(url)
    assert ident.kind is None
    assert ident.evidence == "its /v1/models names models owned by both SGLang and vLLM, so neither"


@pytest.mark.parametrize(
    ("owner", "kind", "evidence"),
    [
        ("VLLM", ServerKind.VLLM, "models owned by vllm"),
        ("sglang", ServerKind.SGLANG, "models owned by sglang"),
    ],
)
async def test_evidence_names_only_what_answered(
    owner: str, kind: ServerKind, evidence: str
) -> None:
    """A10: owned_by "VLLM" with /version a 404 was recorded as "/version answered, ..."."""
    async with _server(_only_models(owner)) as url:
        ident = await identify(url)
    assert (ident.kind, ident.evidence) == (kind, evidence)


async def test_endpoints_that_want_credentials_are_said_so() -> None:
    """A17: every endpoint answered 401, and the note said no identity endpoint answered."""
    async with _server(lambda _path: (401, {"error": "Unauthorized"})) as url:
        ident = await identify(url)
    assert ident.kind is None
    assert ident.evidence.startswith(
        "its identity endpoints answered HTTP 401: they want credentials"
    )
