"""Named targets, the targets file, URL forms and server identity."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from felab_core.engine.apis import Api
from felab_core.engine.probe import IdentityError, _a_version, check_identity, identify
from felab_core.engine.server_kinds import ServerKind
from felab_core.engine.targets import (
    DEFAULT_TARGETS,
    TargetError,
    load_targets,
    normalize_base_url,
    resolve_target,
)
from felab_core.lab.scripted_server import Script, ScriptedServer


def test_defaults_match_the_course_ports() -> None:
    ports = {n: t.url.rsplit(":", 1)[1] for n, t in DEFAULT_TARGETS.items()}
    assert ports == {
        "ollama": "11434",
        "llamacpp": "8080",
        "mlx": "8081",
        "vllm": "8000",
        "sglang": "30000",
        "trtllm": "8000",
    }
    assert DEFAULT_TARGETS["ollama"].api is Api.OLLAMA
    assert "8080" in (DEFAULT_TARGETS["mlx"].note or "")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080",
        "http://127.0.0.1:8080/",
        "http://127.0.0.1:8080/v1",
        "127.0.0.1:8080/v1/",
    ],
)
def test_base_url_forms(url: str) -> None:
    assert normalize_base_url(url) == "http://127.0.0.1:8080"


@pytest.mark.parametrize("url", ["ftp://x:1", "http://", "http://host:notaport"])
def test_bad_urls_are_refused(url: str) -> None:
    with pytest.raises(TargetError):
        normalize_base_url(url)


@pytest.mark.parametrize("url", ["javascript:alert(1)", "mailto:a@b", "file:/etc/passwd"])
def test_another_scheme_without_slashes_is_said_as_such(url: str) -> None:
    """Twelfth sweep (M4): 'javascript:alert(1)' was read as host 'javascript', port
    'alert(1)', and refused as a bad port number."""
    with pytest.raises(TargetError, match="is not an http:// or https:// address"):
        normalize_base_url(url)
    assert normalize_base_url("localhost:8080") == "http://localhost:8080"


def test_targets_file_overrides_and_adds(tmp_path: Path) -> None:
    path = tmp_path / "targets.toml"
    path.write_text(
        '[targets.mlx]\nurl = "http://127.0.0.1:9001/v1"\nmodel = "/models/llama"\n\n'
        '[targets.gpu]\nkind = "vllm"\nurl = "http://10.0.0.5:8000"\n'
    )
    targets = load_targets(path)
    assert targets["mlx"].url == "http://127.0.0.1:9001"
    assert targets["mlx"].model == "/models/llama"
    assert targets["mlx"].kind is ServerKind.MLX
    assert targets["gpu"].kind is ServerKind.VLLM and targets["gpu"].api is Api.OPENAI_CHAT
    assert targets["llamacpp"] == DEFAULT_TARGETS["llamacpp"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[targets.mlx\n", "not valid TOML"),
        ('[targets.new]\nurl = "http://x:1"\n', "needs both kind"),
        ("[targets.mlx]\nport = 1\n", r"targets\.mlx\.port"),
        ('[targets.mlx]\nkind = "tgi"\n', r"targets\.mlx\.kind"),
        ('[targets.mlx]\nurl = "ftp://x"\n', "not a server address"),
        # ninth sweep: a formula for the results CSV, refused on --model but not here
        ('[targets.mlx]\nmodel = "=cmd|x"\n', r"\[targets\.mlx\] model begins with '='"),
        ('[targets.mlx]\nmodel = "+cmd|x"\n', r"\[targets\.mlx\] model begins with '\+'"),
        # fourteenth sweep M9: rewritten to the base URL and timed as chat
        (
            '[targets.mine]\nkind = "llamacpp"\nurl = "http://h:1/v1/completions"\n',
            r"\[targets\.mine\] url: the URL ends in /v1/completions, but --api openai-chat",
        ),
        ('[targets.mlx]\nurl = "http://u:pa/ss@x:1"\n', "percent-encoded"),
        # thirteenth sweep M3: a target named =SUM(1) went into the results CSV as a formula
        ('[targets."=SUM(1)"]\nkind = "vllm"\nurl = "http://x:1"\n', "begins with '='"),
        ('[targets."@SUM(1)"]\nkind = "vllm"\nurl = "http://x:1"\n', "begins with '@'"),
        # fifteenth sweep H9: a 100,000-character note took a minute to print
        (f'[targets.mlx]\nnote = "{"x" * 501}"\n', "a note is at most 500"),
    ],
)
def test_bad_targets_files_name_the_place(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "t.toml"
    path.write_text(text)
    with pytest.raises(TargetError, match=message):
        load_targets(path)


def test_targets_file_saved_with_a_bom_or_not_utf8(tmp_path: Path) -> None:
    """Notepad's "UTF-8 with BOM" reads as TOML; a file in another encoding is named."""
    path = tmp_path / "bom.toml"
    path.write_bytes(b'\xef\xbb\xbf[targets.mlx]\nmodel = "m"\n')
    assert load_targets(path)["mlx"].model == "m"
    path.write_bytes('[targets.mlx]\nnote = "caf\u00e9"\n'.encode("latin-1"))
    with pytest.raises(TargetError, match=r"bom\.toml is not UTF-8 text \(byte 25\)"):
        load_targets(path)


def test_missing_targets_file(tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="does not exist"):
        load_targets(tmp_path / "nope.toml")


def test_flags_win_and_unknown_names_list_the_known() -> None:
    t = resolve_target("mlx", targets=DEFAULT_TARGETS, url="http://h:1", model="m")
    assert (t.url, t.model, t.kind) == ("http://h:1", "m", ServerKind.MLX)
    custom = resolve_target(None, targets=DEFAULT_TARGETS, url="http://h:2/v1")
    assert custom.kind is ServerKind.OPENAI and custom.url == "http://h:2"
    with pytest.raises(TargetError, match="known targets are llamacpp, mlx"):
        resolve_target("tgi", targets=DEFAULT_TARGETS)
    with pytest.raises(TargetError, match="or give --url"):
        resolve_target(None, targets=DEFAULT_TARGETS)


@pytest.mark.parametrize(
    ("persona", "kind"),
    [
        ("llamacpp", ServerKind.LLAMACPP),
        ("ollama", ServerKind.OLLAMA),
        ("vllm", ServerKind.VLLM),
        ("sglang", ServerKind.SGLANG),
        ("mlx", ServerKind.MLX),
        ("none", None),
    ],
)
async def test_identify_each_kind(persona: str, kind: ServerKind | None) -> None:
    async with ScriptedServer(Script(persona=persona)) as server:
        ident = await identify(server.base_url)
    assert ident.kind is kind
    assert ident.models == ["felab-scripted"]


@pytest.mark.parametrize(
    "name",
    [
        "m\x1b[31mRED\x07",
        "x" * 100_000,
        "evil\u202e",
        " padded ",
        "=HYPERLINK(1)",
        "+cmd",
        "\ud800",
    ],
)
async def test_a_model_id_that_is_no_name_is_passed_over(name: str) -> None:
    """A hostile server's model id (escape codes, 100,000 characters, a right-to-left override)
    never becomes the run's model: it would reach the terminal, the CSV and chat."""
    async with ScriptedServer(Script(persona="vllm", model=name)) as server:
        ident = await identify(server.base_url)
    assert ident.models == []


@pytest.mark.parametrize(
    "version", ["=cmd|' /C calc'!A0", "0.6\x1b[31m", "9" * 101, "-2+3", "\ud800v"]
)
async def test_a_version_that_is_no_version_is_not_kept(version: str) -> None:
    """Our own sweep: a server's version "=cmd|..." with an escape code went into the results
    CSV as it came (a live formula in the student's spreadsheet)."""
    async with ScriptedServer(Script(persona="vllm", version=version)) as server:
        ident = await identify(server.base_url)
    assert ident.version is None and ident.models == ["felab-scripted"]


def test_a_version_number_past_floats_is_not_kept() -> None:
    """A seventeenth-sweep low: /version {"version": 1e999} reads as inf and was kept as the
    run's version "inf"; a finite number is a version like any other."""
    assert _a_version(json.loads('{"v": 1e999}')["v"]) is None
    assert _a_version(float("nan")) is None
    assert _a_version(0.6) == "0.6"


async def test_mismatch_is_refused_and_unknown_is_noted() -> None:
    async with ScriptedServer(Script(persona="vllm", version="0.32.0")) as server:
        ident = await identify(server.base_url)
        assert ident.version == "0.32.0"
        mlx = resolve_target("mlx", targets=DEFAULT_TARGETS, url=server.base_url)
        with pytest.raises(IdentityError, match="felab bench vllm --url"):
            check_identity(mlx, ident)
        vllm = resolve_target("vllm", targets=DEFAULT_TARGETS, url=server.base_url)
        assert check_identity(vllm, ident) is None
    async with ScriptedServer(Script(persona="none")) as server:
        ident = await identify(server.base_url)
        note = check_identity(
            resolve_target("llamacpp", targets=DEFAULT_TARGETS, url=server.base_url), ident
        )
    assert note is not None and "could not confirm" in note


async def test_identify_an_unreachable_server(unused_tcp_port: int) -> None:
    with pytest.raises(IdentityError, match="connection refused"):
        await identify(f"http://127.0.0.1:{unused_tcp_port}")


async def test_identify_a_server_whose_body_does_not_fit_its_encoding() -> None:
    """Thirteenth sweep: a root page labelled gzip but sent plain was 'cannot reach X:
    DecodingError', as if nothing had answered."""

    async def lie(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: 5\r\n\r\nhello")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(lie, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(IdentityError, match="a body its own Content-Encoding does not fit"):
            await identify(f"http://127.0.0.1:{port}")
    finally:
        server.close()
        await server.wait_closed()


def test_an_address_longer_than_any_server_s_is_refused_at_once() -> None:
    """Thirteenth sweep: a 70,000-character --url took half a minute in httpx, then exit 70."""
    with pytest.raises(TargetError, match="is 70,022 characters long"):
        normalize_base_url("http://127.0.0.1:1/" + "a" * 70_003)


def test_a_url_naming_another_api_s_endpoint_is_refused() -> None:
    """Ninth sweep: a completions URL with --api openai-chat was timed as chat, silently."""
    with pytest.raises(TargetError, match=r"ends in /v1/completions, but --api openai-chat"):
        resolve_target(
            None, targets=DEFAULT_TARGETS, url="http://h:1/v1/completions", api=Api.OPENAI_CHAT
        )
    same = resolve_target(
        None, targets=DEFAULT_TARGETS, url="http://h:1/v1/chat/completions", api=Api.OPENAI_CHAT
    )
    assert same.url == "http://h:1"


def test_a_secret_written_in_a_note_is_masked(tmp_path: Path) -> None:
    """Seventeenth sweep (a2) M7: a note's api_key=... was printed and saved with each run."""
    from felab_core.engine.targets import load_targets

    path = tmp_path / "t.toml"
    path.write_text(
        '[targets.box]\nkind = "vllm"\nurl = "http://127.0.0.1:1"\n'
        'note = "the lab box, api_key=sk-abcdef1234567890 password=hunter22"\n'
    )
    note = load_targets(path)["box"].note or ""
    assert "sk-abcdef1234567890" not in note and "hunter22" not in note
    assert note.startswith("the lab box")


def test_a_built_in_target_given_another_kind_takes_that_kind_s_api(tmp_path: Path) -> None:
    """Seventeenth sweep (a) M12: ollama made vllm kept Ollama's /api/chat and llama3.1:8b."""
    from felab_core.engine.apis import Api
    from felab_core.engine.targets import TargetError, load_targets

    path = tmp_path / "t.toml"
    path.write_text('[targets.ollama]\nkind = "vllm"\nurl = "http://127.0.0.1:8000"\n')
    target = load_targets(path)["ollama"]
    assert target.api is Api.OPENAI_CHAT and target.model is None
    path.write_text('[targets.ollama]\nkind = "vllm"\n')
    with pytest.raises(TargetError, match="is another kind than felab's own target"):
        load_targets(path)


async def test_a_model_id_that_is_an_at_formula_is_passed_over() -> None:
    """Eighteenth sweep (a) M4: a server's id "@SUM(1)" became the run's model and its CSV cell."""
    async with ScriptedServer(Script(persona="vllm", model="@SUM(1)")) as server:
        assert (await identify(server.base_url)).models == []
    async with ScriptedServer(Script(persona="vllm", model="@cf/meta/llama-3.1-8b")) as server:
        assert (await identify(server.base_url)).models == ["@cf/meta/llama-3.1-8b"]


def test_a_targets_file_of_thousands_of_targets_is_refused_in_words(tmp_path: Path) -> None:
    """Eighteenth sweep (a2) H4: 10,000 targets (530 kB, under the file's 1 MiB) took
    `felab targets` past 30 s; a file names at most 256 (one machine's servers)."""
    path = tmp_path / "many.toml"
    entry = '[targets.t{}]\nkind = "vllm"\nurl = "http://127.0.0.1:8000"\n'
    path.write_text("".join(entry.format(i) for i in range(257)))
    with pytest.raises(TargetError, match="names 257 targets; a targets file holds at most 256"):
        load_targets(path)
    path.write_text("".join(entry.format(i) for i in range(256)))
    assert len(load_targets(path)) >= 256


def test_a_version_or_model_id_repeating_the_urls_password_is_not_kept() -> None:
    """Nineteenth sweep (a) H1: /props build_info "b4000 alice:s3cretPW@host" (a server, or a
    proxy, repeating the URL's credentials) was written to the record and the results CSV."""
    from felab_core.engine.probe import _a_name
    from felab_core.redact import add_url_secrets

    add_url_secrets("http://alice:s3cretPW9@127.0.0.1:1")
    assert _a_version("b4000 alice:s3cretPW9@host") is None
    assert _a_version("b1 s3cretPW9") is None
    assert not _a_name("model-s3cretPW9")
    assert _a_version("b4000-abcdef12") == "b4000-abcdef12"


def test_a_refused_query_is_quoted_with_every_value_masked() -> None:
    """Twentieth sweep, c C15: `?access=KEY` (a name other than api_key/token/...) was quoted
    whole in the refusal; felab refuses any query, so no value of it need be shown."""
    with pytest.raises(TargetError) as refused:
        normalize_base_url("http://127.0.0.1:41001/?access=SECRETXYZ123&plain#SECRETFRAG99")
    said = str(refused.value)
    assert "SECRETXYZ123" not in said and "SECRETFRAG99" not in said, said
    assert "'http://127.0.0.1:41001/?access=***&***#***' has a ?query or #fragment" in said


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('[targets.x]\nmodle = "m"\n', "targets.x.modle: not a key of a target (kind, url, api, "
         "model, note): did you mean model?"),
        ('[target.x]\nurl = "http://127.0.0.1:9"\n', "target: not a key of the file (targets): "
         "did you mean targets?"),
        ('[targets.x]\nzzz = 1\n', "targets.x.zzz: not a key of a target (kind, url, api, model, "
         "note)"),
    ],
)  # fmt: skip
def test_an_unknown_key_names_the_keys_and_the_nearest(
    tmp_path: Path, text: str, said: str
) -> None:
    """Twentieth sweep (a2) A2-22: pydantic's "Extra inputs are not permitted" named no key."""
    path = tmp_path / "targets.toml"
    path.write_text(text)
    with pytest.raises(TargetError) as caught:
        load_targets(path)
    assert str(caught.value).endswith(said)


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://127.0.0.1:8000/v1/models", "ends in /v1/models, an endpoint of the server"),
        ("http://127.0.0.1:8000/v1/models/", "ends in /v1/models"),
        ("http://127.0.0.1:8000/health", "ends in /health"),
        ("http://127.0.0.1:8000/metrics", "ends in /metrics"),
        ("http://127.0.0.1:8000/v%31", "writes '%31' in its path for a plain letter"),
    ],
)
def test_a_url_ending_in_another_endpoint_is_refused(url: str, said: str) -> None:
    """Twentieth sweep (a) A08: --url .../v1/models was taken as a base, felab posted to
    /v1/models/v1/chat/completions and said only "HTTP 404: Not Found"."""
    with pytest.raises(TargetError, match=said):
        normalize_base_url(url)
    assert normalize_base_url("http://h:1/my-models/v1") == "http://h:1/my-models"
    assert normalize_base_url("http://h:1/a%20b") == "http://h:1/a%20b"


async def test_a_connection_never_made_is_said_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """Twentieth sweep (a) A07: a connect that never completed was worded as a host that
    "took the connection but sent no whole answer" (is it HTTP, has it finished starting?)."""
    import httpx

    from felab_core.engine import probe

    async def never(*_args: object, **_kw: object) -> None:
        raise httpx.ConnectTimeout("no connection")

    monkeypatch.setattr(probe, "aget_bounded", never)
    with pytest.raises(IdentityError, match="the connection was never made") as err:
        await identify("http://[fe80::1%25lo]:47641")
    assert "took the connection" not in str(err.value) and "firewall" in str(err.value)


def test_a_named_target_given_another_kind_is_refused() -> None:
    """Twentieth sweep (a) A33: `felab bench vllm --kind ollama` stored a row named vllm with
    server ollama, without a word."""
    with pytest.raises(TargetError, match="the target 'vllm' is vLLM, but --kind ollama"):
        resolve_target("vllm", targets=DEFAULT_TARGETS, kind=ServerKind.OLLAMA)
    same = resolve_target("vllm", targets=DEFAULT_TARGETS, kind=ServerKind.VLLM)
    assert same.kind is ServerKind.VLLM
