"""The slot trap from flags, and from a (scripted) llama-server's /props and /slots."""

from __future__ import annotations

import contextlib
import re
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from felab_core.sizing import SizingError, slots, slots_live
from felab_core.sizing.errors import BadAnswer
from felab_core.sizing.known_models import known_model

LLAMA = known_model("llama-3.1-8b")


def test_split_cache_shares_out_the_context() -> None:
    v = slots.check_flags(8192, 4, False, need=8000, shape=LLAMA)
    assert (v.slots, v.per_slot, v.shared_total, v.unified) == (4, 2048, 8192, False)
    assert v.fits is False and v.verdict == "does not fit"
    assert v.fix is not None and v.fix.flags == "-c 32768 --parallel 4"
    assert "and no -kvu" in v.assumption


def test_unified_cache_lets_one_seat_use_all_but_not_every_seat() -> None:
    v = slots.check_flags(8192, 4, True, need=8000, shape=LLAMA)
    assert (v.per_slot, v.shared_total) == (8192, 8192)
    assert v.fits is True and v.all_seats_fit is False
    assert v.verdict == "fits one at a time, not on every seat at once"
    assert "4 x 8,000 = 32,000 tokens" in v.explanation
    assert v.fix is not None and v.fix.flags == "-c 32768 --parallel 4 -kvu"


def test_parallel_left_out_assumes_recent_default_and_says_so() -> None:
    v = slots.check_flags(8192, None, False)
    assert (v.slots, v.unified, v.per_slot) == (4, True, 8192)
    assert "--parallel was left out" in v.assumption and "older builds" in v.assumption


def test_enough_room_fits_and_offers_no_fix() -> None:
    v = slots.check_flags(32768, 4, False, need=8000)
    assert v.per_slot == 8192 and v.fits and v.all_seats_fit
    assert "The fix" not in v.explanation


def test_rounding_to_256_is_modelled_and_explained() -> None:
    v = slots.check_flags(8000, 3, False)
    assert (v.shared_total, v.per_slot) == (8448, 2816)
    assert "multiples of 256" in v.explanation


def test_seat_is_capped_at_the_trained_length() -> None:
    v = slots.check_flags(1_000_000, 1, False, shape=LLAMA)
    assert v.per_slot == 131_072
    assert "trained for 131,072 tokens" in v.explanation


def test_fix_defaults_to_need_rounded_up() -> None:
    v = slots.check_flags(8192, 4, False, need=8000)
    assert v.fix is not None and v.fix.tokens_each == 8192


@pytest.mark.parametrize(
    ("ctx", "parallel", "message"),
    [
        (0, 4, "-c 0 tells llama-server"),
        (-8192, 4, r"-c \(the cache length in tokens\) must be more than zero"),
        (8192, 0, r"--parallel \(the number of seats\) must be more than zero"),
        (8192, -1, r"--parallel \(the number of seats\) must be more than zero"),
    ],
)
def test_bad_flags_are_refused(ctx: int, parallel: int, message: str) -> None:
    with pytest.raises(SizingError, match=message):
        slots.check_flags(ctx, parallel, False)


def test_bad_need_is_refused() -> None:
    with pytest.raises(SizingError, match="must be more than zero"):
        slots.check_flags(8192, 4, False, need=0)


def test_a_need_past_the_models_length_is_refused_not_fixed() -> None:
    """Thirteenth sweep: --need 200000 on Llama 3.1 8B (131,072 tokens) printed the fix
    -c 800768, which llama-server would cap at the model's length anyway."""
    shape = known_model("llama-3.1-8b")
    with pytest.raises(SizingError, match=r"--need 200,000 is longer than Llama 3.1 8B reads"):
        slots.check_flags(131072, 4, False, need=200_000, shape=shape)
    with pytest.raises(SizingError, match=r"--each 140,000 is longer than .* caps each seat"):
        slots.check_flags(131072, 4, False, need=100_000, tokens_each=140_000, shape=shape)
    fits = slots.check_flags(131072, 4, False, need=131_072, shape=shape)
    assert fits.fix is not None and fits.fix.flags == "-c 524288 --parallel 4"


@given(ctx=st.integers(1, 2**20), parallel=st.integers(1, 64))
def test_split_seats_never_exceed_the_cache_nor_unified_seats(ctx: int, parallel: int) -> None:
    split = slots.check_flags(ctx, parallel, False)
    unified = slots.check_flags(ctx, parallel, True)
    assert split.per_slot * split.slots == split.shared_total
    assert split.per_slot % slots.LLAMA_CTX_PAD == 0
    assert unified.per_slot >= ctx
    assert split.per_slot <= unified.per_slot


# ---------------------------------------------------------------- live, scripted


def _llama_like(
    per_slot: int, n_slots: int, *, slots_on: bool = True, train: int = 4096
) -> httpx.MockTransport:
    """Answers shaped like llama-server's /props, /slots and /v1/models (per its source)."""

    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/props":
            body: Any = {
                "default_generation_settings": {"params": {}, "n_ctx": per_slot},
                "total_slots": n_slots,
                "model_path": "/models/tiny.gguf",
                "build_info": "b0000-test",
            }
            return httpx.Response(200, json=body)
        if path == "/slots":
            if not slots_on:
                return httpx.Response(
                    501, json={"error": {"message": "This server does not support slots endpoint."}}
                )
            return httpx.Response(
                200,
                json=[{"id": i, "n_ctx": per_slot, "is_processing": False} for i in range(n_slots)],
            )
        if path == "/v1/models":
            return httpx.Response(
                200,
                json={"data": [{"id": "tiny", "meta": {"n_ctx_train": train, "size": 700_000}}]},
            )
        return httpx.Response(404)

    return httpx.MockTransport(handler)


def test_live_split_server_is_recognised_from_ctx() -> None:
    client = httpx.Client(transport=_llama_like(512, 4))
    v = slots_live.read_live("http://llama", ctx=2048, need=1000, client=client)
    assert (v.slots, v.per_slot, v.unified, v.shared_total) == (4, 512, False, 2048)
    assert v.fits is False
    assert "/slots says 4 seats of 512 tokens" in v.assumption
    assert "b0000-test" in v.source


def test_live_unified_server_is_recognised_from_ctx() -> None:
    client = httpx.Client(transport=_llama_like(2048, 4))
    v = slots_live.read_live("http://llama", ctx=2048, client=client)
    assert v.unified is True and v.shared_total == 2048


def test_live_without_ctx_says_mode_is_unknown() -> None:
    client = httpx.Client(transport=_llama_like(512, 4, slots_on=False))
    v = slots_live.read_live("http://llama", client=client)
    assert v.unified is None and v.shared_total is None
    assert "/props says 4 seats" in v.assumption
    assert "not whether they share one cache" in v.explanation


def test_live_notes_the_training_cap() -> None:
    client = httpx.Client(transport=_llama_like(4096, 1, train=4096))
    v = slots_live.read_live("http://llama", ctx=8192, client=client)
    assert "trained for 4,096 tokens" in v.explanation


def _vllm_like(request: httpx.Request) -> httpx.Response:
    if request.url.path == "/v1/models":
        return httpx.Response(200, json={"data": [{"id": "m", "max_model_len": 2048}]})
    return httpx.Response(404, json={"detail": "Not Found"})


def test_a_non_llama_server_is_refused_clearly() -> None:
    client = httpx.Client(transport=httpx.MockTransport(_vllm_like))
    with pytest.raises(
        SizingError, match=r"does not look like llama-server \(GET /props answered HTTP 404\)"
    ):
        slots_live.read_live("http://vllm", client=client)


def test_props_without_slot_fields_is_refused() -> None:
    client = httpx.Client(
        transport=httpx.MockTransport(lambda r: httpx.Response(200, json={"hello": 1}))
    )
    with pytest.raises(SizingError, match="no total_slots"):
        slots_live.read_live("http://other", client=client)


@pytest.mark.parametrize(
    ("props", "says"),
    [
        ({"total_slots": 10**30, "default_generation_settings": {"n_ctx": 4096}}, "total_slots"),
        ({"total_slots": 4.5, "default_generation_settings": {"n_ctx": 4096}}, "total_slots = 4.5"),
        ({"total_slots": 4, "default_generation_settings": {"n_ctx": 10**40}}, "n_ctx = 1000"),
        ({"total_slots": 4, "default_generation_settings": {"n_ctx": "4096"}}, "n_ctx = '4096'"),
    ],
)
def test_figures_no_llama_server_reports_are_said_as_such(props: Any, says: str) -> None:
    """Eighth sweep: there but impossible read as "gives no n_ctx" (exit 2), not the server's
    fault (BadAnswer, exit 3)."""
    client = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200, json=props)))
    with pytest.raises(BadAnswer, match=re.escape(says)):
        slots_live.read_live("http://odd", client=client)


def test_unreachable_server_is_said_plainly() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    client = httpx.Client(transport=httpx.MockTransport(refuse))
    with pytest.raises(
        SizingError, match=r"connection refused: nothing listens at http://127.0.0.1:9"
    ):
        slots_live.read_live("http://127.0.0.1:9", client=client)


def test_a_fix_past_llama_server_s_largest_c_offers_fewer_seats() -> None:
    """-c is a 32-bit integer in llama-server: 4 seats of 10^9 tokens is no -c it takes."""
    fix = slots.SlotFix(seats=4, tokens_each=1_000_000_000, memory=None, unified=False)
    assert fix.most_seats == 2
    assert fix.flags == "-c 2000000000 --parallel 2 (fewer seats)"
    assert "past the largest -c llama-server takes (2,147,483,647)" in fix.explanation
    alone = slots.SlotFix(seats=1, tokens_each=3_000_000_000, memory=None, unified=False)
    assert alone.flags.startswith("none")
    assert "No fix on llama-server" in alone.explanation
    usual = slots.SlotFix(seats=4, tokens_each=8_192, memory=None, unified=False)
    assert usual.flags == "-c 32768 --parallel 4"


def test_a_password_in_url_and_escapes_in_build_never_reach_the_terminal() -> None:
    """Seventh sweep: `size slots --url http://alice:PW@host` printed the password on every
    path, and a build_info holding escape codes went to the terminal raw."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/props":
            settings = {"n_ctx": 4096}
            build = "\x1b[31mRED\x1b[0m\x07"
            body = {"total_slots": 4, "default_generation_settings": settings, "build_info": build}
            return httpx.Response(200, json=body)
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": 5})  # not a list: passed over
        return httpx.Response(404)

    client = httpx.Client(transport=httpx.MockTransport(handler))
    live = slots_live.read_slots("http://alice:S3cretPW@llama", client=client)
    assert "S3cretPW" not in live.base_url and live.base_url == "http://alice:***@llama"
    assert live.build == "?[31mRED?[0m?"

    def not_llama(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"foo": 1})

    other = httpx.Client(transport=httpx.MockTransport(not_llama))
    with pytest.raises(SizingError) as caught:
        slots_live.read_slots("http://alice:S3cretPW@llama", client=other)
    assert "S3cretPW" not in str(caught.value)


def test_a_c_that_fits_neither_cache_is_said_not_dropped() -> None:
    """Ninth sweep: -c 100 beside 4 seats of 2,048 was dropped, and the answer still asked for
    the -c."""
    client = httpx.Client(transport=_llama_like(2048, 4))
    verdict = slots_live.read_live("http://llama", ctx=100, client=client)
    assert "-c 100 fits neither a unified cache" in verdict.assumption
    assert "8,192 in all" in verdict.assumption


def _props_then_slots(n_ctx: int, total_slots: int, slots: Any) -> httpx.Client:
    """A server whose /props says `total_slots` seats of `n_ctx`, and whose /slots says `slots`."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/props":
            settings = {"n_ctx": n_ctx}
            return httpx.Response(
                200, json={"default_generation_settings": settings, "total_slots": total_slots}
            )
        if request.url.path == "/slots":
            return httpx.Response(200, json=slots)
        return httpx.Response(404)

    return httpx.Client(transport=httpx.MockTransport(handler))


def test_a_server_whose_slots_contradict_its_props_is_not_believed() -> None:
    """Ninth sweep: /props 4 seats of 8,192, /slots 3 seats of 999,999: reported as fact."""
    client = _props_then_slots(8192, 4, [{"id": i, "n_ctx": 999_999} for i in range(3)])
    with pytest.raises(BadAnswer, match="contradicts itself: /props says 4 seats"):
        slots_live.read_live("http://odd", client=client)


@pytest.mark.parametrize(
    ("seats", "says"),
    [
        ([4096, 4096, 4096, 1], "/slots lists 4 of 1 to 4,096"),  # "4 seats of 1 tokens"
        ([4096] * 70_000, "/slots lists 70,000 of 4,096"),  # was "lists 65536"
    ],
)
def test_seats_shorter_or_more_than_props_says_are_not_believed(
    seats: list[int], says: str
) -> None:
    """Seventeenth sweep (c) M9, L10."""
    client = _props_then_slots(4096, 4, [{"n_ctx": n} for n in seats])
    with pytest.raises(BadAnswer, match=says):
        slots_live.read_live("http://odd", client=client)


def test_slots_listing_no_seat_objects_is_refused_in_words() -> None:
    """Thirteenth sweep H1: /slots [1, 2] ended in 'max() arg is an empty sequence' (exit 70)."""
    client = _props_then_slots(4096, 2, [1, 2])
    with pytest.raises(SizingError, match="/slots lists no seat objects"):
        slots_live.read_live("http://odd", client=client)


def test_a_dripping_server_is_given_one_deadline_for_all_its_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seventeenth sweep (c) H8: /props, /slots and /v1/models dripped a byte at a time had
    10 s each, one after another (past 30 s). Now the three share one deadline."""
    import json
    import socketserver
    import threading
    import time

    import felab_core.bounded_get as bounded

    props = json.dumps({"default_generation_settings": {"n_ctx": 4096}, "total_slots": 4})

    class Drip(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            asked = self.request.recv(4096)
            if asked.startswith(b"GET /props "):
                body = props.encode()
                self.request.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                return
            try:
                self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
                for _ in range(200):  # a byte every 0.2 s: 40 s, never whole
                    self.request.sendall(b" ")
                    time.sleep(0.2)
            except OSError:
                pass

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Drip)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr(bounded, "WHOLE_ASK_S", 2.0)
    began = time.monotonic()
    try:
        live = slots_live.read_slots(f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
        server.server_close()
    assert time.monotonic() - began < 5  # one 2 s deadline (and a second to close), not 10 s each
    assert live.total_slots == 4 and not live.slots_endpoint  # /props alone: /slots never came


@pytest.fixture
def raw_answer() -> Iterator[Callable[[bytes], str]]:
    """A socket on 127.0.0.1 that answers every connection with the same raw bytes, then
    closes: what httpx sees from a server cut off mid-body or a broken gzip."""
    listeners: list[socket.socket] = []

    def serve(answer: bytes) -> str:
        listener = socket.create_server(("127.0.0.1", 0))
        listeners.append(listener)

        def run() -> None:
            with contextlib.suppress(OSError):
                while True:
                    conn, _ = listener.accept()
                    with conn:
                        conn.recv(65_536)
                        conn.sendall(answer)

        threading.Thread(target=run, daemon=True).start()
        return f"http://127.0.0.1:{listener.getsockname()[1]}"

    yield serve
    for listener in listeners:
        listener.close()


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (b'HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{"total', "cut off: "),
        (b'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\n{"to', "cut off: "),
        (
            b"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: 5\r\n\r\nhello",
            "bad body: ",
        ),
    ],
)
def test_a_body_cut_off_or_not_decodable_is_not_called_a_connect_error(
    raw_answer: Callable[[bytes], str], answer: bytes, says: str
) -> None:
    """A seventeenth-sweep low (c L17): a server that answered, then cut its body short or sent
    gzip that was not, was reported as a "connect error", which sends a person to the port."""
    url = raw_answer(answer)
    with pytest.raises(SizingError) as caught:
        slots_live.read_live(url)
    said = str(caught.value)
    assert said.startswith(says) and "connect error" not in said, said
    assert "answered" in said


def test_a_lone_surrogate_in_build_info_is_shown_not_a_crash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Eighteenth sweep (c) H3: /props build_info "\\ud800x" (a JSON escape json.loads keeps as
    a lone surrogate) stopped `size slots --url` with exit 70 in the terminal's encoder."""
    from typer.testing import CliRunner

    from felab.cli.main import app

    props = (
        b'{"total_slots": 4, "default_generation_settings": {"n_ctx": 2048}, '
        b'"build_info": "\\ud800x"}'
    )

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/props":
            return httpx.Response(200, content=props)
        return httpx.Response(404)

    monkeypatch.setattr(
        slots_live,
        "direct_client",
        lambda timeout: httpx.Client(transport=httpx.MockTransport(handler)),
    )
    result = CliRunner().invoke(app, ["size", "slots", "--url", "http://llama"])
    assert result.exit_code == 0, result.output
    assert "(build ?x)" in result.output
