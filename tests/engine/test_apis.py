"""The three wire formats: what each message means, and that no input crashes the reader."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from felab_core.engine.apis import (
    Api,
    GenerationRequest,
    StreamProtocolError,
    adapter_for,
)
from felab_core.engine.framing import Frame

chat = adapter_for(Api.OPENAI_CHAT)
completions = adapter_for(Api.OPENAI_COMPLETIONS)
ollama = adapter_for(Api.OLLAMA)


def frame(obj: object) -> Frame:
    return Frame(json.dumps(obj))


def test_chat_role_only_chunk_carries_no_text() -> None:
    info = chat.interpret(frame({"choices": [{"delta": {"role": "assistant", "content": None}}]}))
    assert info.text == "" and not info.done


def test_chat_content_with_finish_reason_on_the_same_chunk() -> None:
    info = chat.interpret(
        frame({"choices": [{"delta": {"content": "Hi"}, "finish_reason": "length"}]})
    )
    assert (info.text, info.finish_reason) == ("Hi", "length")


def test_reasoning_tokens_count_as_generated_text() -> None:
    info = chat.interpret(frame({"choices": [{"delta": {"reasoning_content": "hmm"}}]}))
    assert info.text == "hmm"


def test_usage_only_final_chunk_and_llamacpp_timings() -> None:
    info = chat.interpret(
        frame(
            {
                "choices": [],
                "usage": {"prompt_tokens": 9, "completion_tokens": 128, "total_tokens": 137},
                "timings": {"predicted_per_second": 70.4, "predicted_n": 128, "note": "x"},
            }
        )
    )
    assert info.text == ""
    assert info.usage == {"prompt_tokens": 9, "completion_tokens": 128}
    assert info.timings == {"predicted_per_second": 70.4, "predicted_n": 128.0}


def test_done_marker_and_completions_text() -> None:
    assert chat.interpret(Frame("[DONE]")).done
    assert completions.interpret(frame({"choices": [{"text": "abc"}]})).text == "abc"


def test_error_object_inside_the_stream() -> None:
    info = chat.interpret(frame({"error": {"message": "context too long", "code": 400}}))
    assert info.error == "context too long"


def test_an_error_field_of_null_beside_a_token_is_no_error() -> None:
    """Seventeenth sweep (a2) M8: "server error in stream: None"."""
    info = chat.interpret(frame({"error": None, "choices": [{"delta": {"content": "a"}}]}))
    assert info.error is None and info.text == "a"


def test_an_openai_event_stream_read_as_ollama_says_which_api_it_is() -> None:
    """Thirteenth sweep: --kind ollama against an OpenAI-style server said only 'not JSON'."""
    line = 'data: {"choices": [{"delta": {"content": "a"}}]}'
    with pytest.raises(StreamProtocolError, match="speaks the OpenAI API; use --api openai-chat"):
        ollama.interpret(Frame(line))


def test_ollama_final_object_with_fields_missing_when_zero() -> None:
    # prompt_eval_count vanishes on a cache hit; load_duration when the model was warm.
    info = ollama.interpret(
        frame(
            {
                "model": "llama3.1:8b",
                "message": {"role": "assistant", "content": ""},
                "done": True,
                "done_reason": "length",
                "total_duration": 2_000_000_000,
                "eval_count": 100,
                "eval_duration": 1_800_000_000,
            }
        )
    )
    assert info.done and info.finish_reason == "length"
    assert info.usage == {"completion_tokens": 100}
    assert info.timings is not None and "load_duration" not in info.timings
    assert info.timings["eval_duration"] == 1.8e9


@pytest.mark.parametrize("said", [True, -5, 10**12, "three"])
def test_an_ollama_count_that_cannot_be_true_is_not_believed(said: object) -> None:
    """Fifteenth sweep H10/M7: `eval_count: true` was read as 1 token (the record then held
    `output_tokens: true`, and compare called felab's own file edited); an eval_duration of
    10**400 failed every request as a client error."""
    from felab_core.engine.apis import UNBELIEVABLE_COUNT

    final = {"done": True, "eval_count": said, "eval_duration": 10**400, "prompt_eval_count": -1}
    info = ollama.interpret(frame({"message": {"content": ""}, **final}))
    assert info.usage == {"completion_tokens": UNBELIEVABLE_COUNT}
    assert info.timings is None or "eval_duration" not in info.timings


def test_payloads_ask_for_usage_and_length() -> None:
    req = GenerationRequest("hi", max_tokens=64, model="m", seed=3, extra={"ignore_eos": True})
    body = chat.payload(req)
    assert body["stream_options"] == {"include_usage": True}
    assert body["ignore_eos"] is True and body["max_tokens"] == 64
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert completions.payload(req)["prompt"] == "hi"
    o = ollama.payload(GenerationRequest("hi", max_tokens=64, model="m"))
    assert o["options"]["num_predict"] == 64 and o["stream"] is True
    # No model: the field is left out (MLX sends unknown names to the hub).
    assert "model" not in chat.payload(GenerationRequest("hi"))


@pytest.mark.parametrize("data", ["{not json", "[1, 2]", '"text"', '{"choices": 5}'])
def test_malformed_messages_raise_the_protocol_error(data: str) -> None:
    with pytest.raises(StreamProtocolError):
        chat.interpret(Frame(data))


def test_a_chunk_nested_thousands_deep_is_the_server_s_fault_in_words() -> None:
    with pytest.raises(StreamProtocolError, match="nested too deeply to be a token"):
        chat.interpret(Frame("[" * 100_000 + "]" * 100_000))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
shaped = st.fixed_dictionaries(
    {},
    optional={
        "choices": st.lists(
            st.fixed_dictionaries(
                {},
                optional={"delta": json_values, "text": json_values, "finish_reason": json_values},
            )
            | json_values,
            max_size=2,
        ),
        "usage": json_values,
        "timings": json_values,
        "message": json_values,
        "done": json_values,
        "eval_count": json_values,
        "error": json_values,
    },
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(json_values, shaped), st.sampled_from(list(Api)))
def test_any_json_gives_info_or_a_protocol_error(value: object, api: Api) -> None:
    with contextlib.suppress(StreamProtocolError):
        adapter_for(api).interpret(Frame(json.dumps(value)))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200), st.sampled_from(list(Api)))
def test_any_text_gives_info_or_a_protocol_error(text: str, api: Api) -> None:
    with contextlib.suppress(StreamProtocolError):
        adapter_for(api).interpret(Frame(text))


def test_a_usage_count_past_any_context_is_not_believed() -> None:
    """Ninth sweep: 10^30 prompt tokens reached the results CSV as 1e+30."""
    from felab_core.engine.apis import _usage

    got = _usage({"usage": {"prompt_tokens": 10**30, "completion_tokens": 7}})
    assert got == {"completion_tokens": 7}
    cached = {"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 10**30}}
    assert _usage({"usage": cached}) == {"prompt_tokens": 5}


def test_an_impossible_output_count_is_said_to_be_disbelieved() -> None:
    """Tenth sweep: completion_tokens -5, 10^12, "three" or NaN was dropped without a word
    (token_source "chunks"), where Ollama's bad eval_count says the count was not believed."""
    from felab_core.engine.apis import UNBELIEVABLE_COUNT, _usage
    from felab_core.engine.timeline import Chunk, RequestTimeline
    from felab_core.engine.token_counts import COUNT_FROM_CHUNKS_DISBELIEVED, output_tokens

    for said in (-5, 10**12, "three", float("nan"), True):
        usage = _usage({"usage": {"prompt_tokens": 4, "completion_tokens": said}})
        assert usage == {"prompt_tokens": 4, "completion_tokens": UNBELIEVABLE_COUNT}
        tl = RequestTimeline(index=0)
        tl.chunks = [Chunk(t_ns=1, nbytes=9, text="hi"), Chunk(t_ns=2, nbytes=9, text=" you")]
        tl.usage = usage
        assert output_tokens(tl, api_is_ollama=False) == (2, COUNT_FROM_CHUNKS_DISBELIEVED)
    assert _usage({"usage": {"prompt_tokens": 4}}) == {"prompt_tokens": 4}  # none sent: none


@pytest.mark.parametrize(("said", "believed"), [(24, True), (48, True), (49, False), (144, False)])
def test_an_output_count_past_a_token_a_byte_is_disbelieved(said: int, believed: bool) -> None:
    """Eighteenth sweep (a) H1: 144 tokens beside 8 chunks of "tok " (32 bytes) were believed
    (four tokens a byte had been allowed), and stored a writing speed 4.5 times the stream's.
    Every token is a byte of text at least, beside the few a server counts unseen (16)."""
    from felab_core.engine.timeline import Chunk, RequestTimeline
    from felab_core.engine.token_counts import COUNT_FROM_CHUNKS_DISBELIEVED, output_tokens

    tl = RequestTimeline(index=0)
    tl.chunks = [Chunk(t_ns=i + 1, nbytes=40, text="tok ") for i in range(8)]
    tl.usage = {"completion_tokens": said}
    got = output_tokens(tl, api_is_ollama=False)
    assert got == ((said, "usage") if believed else (8, COUNT_FROM_CHUNKS_DISBELIEVED)), got


def test_server_timings_that_cannot_be_true_are_not_kept() -> None:
    """Ninth sweep: predicted_per_second -1e308 and prompt_ms -5 were stored as sent."""
    from felab_core.engine.apis import _number_fields

    got = _number_fields(
        {"predicted_per_second": -1e308, "prompt_ms": -5, "predicted_n": 12, "x": 10**400,
         "y": float("nan"), "z": True, "predicted_ms": 250.5, "x\x1b[31m": 3}
    )  # fmt: skip
    assert got == {"predicted_n": 12.0, "predicted_ms": 250.5}  # 17th (a) L2: no escape key


def test_timing_figures_no_request_can_have_are_not_kept() -> None:
    """Nineteenth sweep (a) H1, H3: predicted_per_second 1e12 and 1e-300, cache_n 5.7, and a
    key repeating the URL's password were kept in the record's server_timings."""
    from felab_core.engine.apis import _number_fields
    from felab_core.redact import add_url_secrets

    add_url_secrets("http://bob:Zq8Wv3Kp5Rt7@127.0.0.1:1")
    got = _number_fields(
        {"predicted_per_second": 1e12, "prompt_per_second": 1e-300, "cache_n": 5.7,
         "Zq8Wv3Kp5Rt7": 1, "predicted_n": 8}
    )  # fmt: skip
    assert got == {"predicted_n": 8.0}
    kept = {"predicted_per_second": 41.5, "prompt_per_second": 2500.0, "cache_n": 4}
    assert _number_fields(kept) == {k: float(v) for k, v in kept.items()}


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (
            '{"type": "error", "error": {"type": "overloaded", "message": "Overloaded"}}',
            "Overloaded",
        ),
        ('{"message": "rate limited"}', "rate limited"),
        ("upstream went away", "upstream went away"),
        ("", "(no words)"),
    ],
)
def test_an_sse_error_event_is_the_servers_error_in_its_words(data: str, said: str) -> None:
    """A seventeenth-sweep low: `event: error` with data that held no "error" key was read as
    an empty chunk, and its words were lost."""
    for adapter in (chat, adapter_for(Api.OPENAI_COMPLETIONS)):
        info = adapter.interpret(Frame(data, "error"))
        assert info.error == said and not info.text


def test_a_lone_surrogate_in_a_streams_text_is_counted_not_a_crash() -> None:
    """Nineteenth sweep (a) H2: JSON's "\\ud800" in a chunk's content, beside a usage count,
    stopped the run with UnicodeEncodeError (exit 70) and lost it."""
    from felab_core.engine.timeline import Chunk, RequestTimeline
    from felab_core.engine.token_counts import output_tokens

    text = chat.interpret(Frame('{"choices": [{"delta": {"content": "a\\ud800b"}}]}')).text
    tl = RequestTimeline(index=0)
    tl.chunks = [Chunk(t_ns=1, nbytes=40, text=text), Chunk(t_ns=2, nbytes=40, text="c")]
    tl.usage = {"completion_tokens": 3}
    assert output_tokens(tl, api_is_ollama=False) == (3, "usage")


def test_an_output_count_past_the_tokens_asked_is_disbelieved() -> None:
    """Nineteenth sweep (a) H4: completion_tokens 17 for --max-tokens 1 (one chunk of one
    byte) was believed, and stored an output speed 17 times the real one."""
    from felab_core.engine.timeline import Chunk, RequestTimeline
    from felab_core.engine.token_counts import COUNT_FROM_CHUNKS_DISBELIEVED, output_tokens

    tl = RequestTimeline(index=0, asked_tokens=8)
    tl.chunks = [Chunk(t_ns=i + 1, nbytes=40, text="word ") for i in range(8)]
    tl.usage = {"completion_tokens": 10}
    assert output_tokens(tl, api_is_ollama=False) == (8, COUNT_FROM_CHUNKS_DISBELIEVED)
    tl.usage = {"completion_tokens": 9}  # max_tokens and the end token
    assert output_tokens(tl, api_is_ollama=False) == (9, "usage")


@pytest.mark.parametrize(
    ("obj", "said"),
    [
        # SGLang's ErrorResponse, and vLLM's before it nested one (twentieth sweep (a) A27)
        ({"object": "error", "message": "engine dead", "code": 500}, "engine dead"),
        ({"object": "error", "type": "BadRequestError", "code": 400}, "BadRequestError"),
        ({"detail": "Not authenticated"}, "Not authenticated"),  # FastAPI's
    ],
)
def test_an_error_object_in_the_stream_is_the_servers_error(obj: object, said: str) -> None:
    for adapter in (chat, completions):
        info = adapter.interpret(frame(obj))
        assert info.error is not None and said in info.error, info


def test_a_chunk_with_choices_and_a_detail_key_is_no_error() -> None:
    info = chat.interpret(frame({"detail": "x", "choices": [{"delta": {"content": "Hi"}}]}))
    assert (info.text, info.error) == ("Hi", None)


@pytest.mark.parametrize("index", [1, 2])
def test_a_choice_other_than_the_first_is_refused_not_counted(index: int) -> None:
    """Twentieth sweep (a) A13: choices 0 and 1 interleaved were counted as one answer of twice
    the tokens, and a stream of index 1 alone was counted too."""
    chunk = {"choices": [{"index": index, "delta": {"content": "t"}}]}
    with pytest.raises(StreamProtocolError, match=f"choice index {index}"):
        chat.interpret(frame(chunk))
    both = {"choices": [{"index": 0, "delta": {"content": "t"}}, {"index": index, "text": "u"}]}
    with pytest.raises(StreamProtocolError, match="felab asks for one choice"):
        completions.interpret(frame(both))
    assert chat.interpret(frame({"choices": [{"index": 0, "delta": {"content": "t"}}]})).text


@pytest.mark.parametrize(("reason", "fails"), [("abort", True), ("error", True), ("length", False)])
def test_an_answer_the_server_cut_short_is_an_error(reason: str, fails: bool) -> None:
    """Twentieth sweep (a) A28: finish_reason "abort" (vLLM's for a request its engine aborted)
    was timed as a good answer."""
    info = chat.interpret(frame({"choices": [{"delta": {}, "finish_reason": reason}]}))
    assert info.finish_reason == reason
    assert (info.error is not None) is fails
    if fails:
        assert info.error is not None and f"finish_reason {reason!r}" in info.error


def test_a_stream_of_another_api_names_the_api_to_use() -> None:
    """Twentieth sweep (a) A14: each of these read as "empty answer" or "truncated", which
    blamed the model or the connection where the --api (or the endpoint) was wrong."""
    with pytest.raises(StreamProtocolError, match="use --api openai-completions"):
        chat.interpret(frame({"choices": [{"index": 0, "text": "a"}]}))
    with pytest.raises(StreamProtocolError, match="use --api openai-chat"):
        completions.interpret(frame({"choices": [{"index": 0, "delta": {"content": "a"}}]}))
    for event, api in (("content_block_delta", "Anthropic"), ("response.created", "Responses")):
        with pytest.raises(StreamProtocolError, match=f"this is .*{api}.* does not time"):
            chat.interpret(Frame('{"type": "x"}', event=event))
    parts = {"choices": [{"index": 0, "delta": {"content": [{"type": "text", "text": "hi"}]}}]}
    assert chat.interpret(frame(parts)).text == "hi"  # content as a list of parts is read
