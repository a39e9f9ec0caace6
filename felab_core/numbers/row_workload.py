"""What a results row's timings, throughputs and workload columns can hold together, past the
bounds of each cell (eighteenth sweep, a2 H5, H6, H8, L9): a first token in more than no time,
throughputs above 0 beside answered requests, the token counter the row's API has, a server's
prompt a prompt's size can make, and the knobs a named preset fixes.

`check_workload` runs on every row (row_checks); `check_preset_knobs` on a whole run's row
(`felab numbers import`), not on one machine's slice of a spread run, which holds a share.
"""

from __future__ import annotations

from collections.abc import Mapping

from felab_core.engine.apis import Api
from felab_core.engine.token_counts import COUNT_FROM_OLLAMA, TEMPLATE_TOKENS
from felab_core.engine.trace import MAX_INPUT_TOKENS
from felab_core.engine.workloads import DEFAULT_PROMPT, MAX_TOKENS, PRESETS, TOOL_PROMPT
from felab_core.errors import Invalid

#: The least a first token or a whole request can take: one round trip over a connection is
#: tens of microseconds; 1e-320 s had been stored (it shows as 0).
_LEAST_REQUEST_S = 1e-6
#: The least a time between tokens can be when it is not 0: felab's clock ticks in nanoseconds
#: (a median of two gaps may be half a tick).
_LEAST_GAP_S = 1e-10
_LEAST_SECONDS = {
    **dict.fromkeys(("ttft_p50_s", "ttft_p95_s", "e2e_p50_s", "e2e_p95_s"), _LEAST_REQUEST_S),
    **dict.fromkeys(("tpot_p50_s", "tpot_p95_s", "itl_p50_s", "itl_p95_s"), _LEAST_GAP_S),
}
#: The most bytes a token of a synthetic prompt takes (a word of at most 9 letters and its
#: space, engine.words) with room to spare, and the most a request adds around it (the nonce,
#: the JSON, a tool's schema): a server counts at most a token a byte, plus its template.
_PROMPT_BYTES_A_TOKEN = 16
_REQUEST_BYTES = 4096
#: The prompt felab sends when no --prompt-tokens is given, with its nonce ([request N xxxxxx]).
_DEFAULT_PROMPT_BYTES = max(len(p.encode()) for p in (DEFAULT_PROMPT, TOOL_PROMPT)) + 40
#: The characters of answer a turn may bring (stream_shape.most_text_chars) and the history a
#: conversation may reach before it ends early (measure.MOST_HISTORY_CHARS).
_ANSWER_CHARS_A_TOKEN, _ANSWER_CHARS_MORE = 1024, 65_536
_MOST_HISTORY_CHARS = 4 * MAX_TOKENS
#: The longest context any model has (10 Mi tokens, Llama 4 Scout's): no server takes a longer
#: prompt, so no mean of its counts is longer.
LONGEST_CONTEXT_TOKENS = 10 * 2**20


def check_workload(
    row: Mapping[str, str], figures: Mapping[str, float | None], counts: Mapping[str, int | None]
) -> None:
    """Refuse what no `felab bench` run writes together (`figures` and `counts`: the row's
    numbers and whole numbers, already checked one by one)."""
    for name, least in _LEAST_SECONDS.items():
        value = figures[name]
        if value and value < least:
            raise Invalid(
                f"{name} {value:g}: no request of felab's is timed under {least:g} s; the row "
                "was edited"
            )
    ok = counts["ok"]
    if ok:  # a count over the run's time, of requests that were answered
        if figures["request_tps"] == 0:
            raise Invalid(
                f"request_tps 0 beside {ok} answered request(s): felab writes the answered "
                "requests over the run's time; the row was edited"
            )
        if figures["output_tps"] == 0 and figures["writing_tps_p50"]:
            raise Invalid(
                "output_tps 0 beside a writing speed: the tokens written over the run's time "
                "are more than 0 when a request wrote some; the row was edited"
            )
    if figures["server_tps_p50"] == 0:
        raise Invalid("server_tps_p50 0: felab keeps no server's speed of 0; the row was edited")
    _check_token_source(row)
    _check_server_prompt(row, figures, counts)


def _check_token_source(row: Mapping[str, str]) -> None:
    """eval_count is what Ollama's own API counts with: an OpenAI API's row has none (L9)."""
    source = (row.get("token_source") or "").strip()
    if source != COUNT_FROM_OLLAMA:
        return
    api = (row.get("api") or "").strip()
    if api and api != Api.OLLAMA.value:
        raise Invalid(
            f"token_source {source} beside api {api}: eval_count is Ollama's own API's count, "
            f"which felab writes only for api {Api.OLLAMA.value}; the row was edited"
        )


def _sessions(preset: str) -> tuple[int, int] | None:
    """The conversations and turns of a multi-turn preset, None for any other."""
    if preset.startswith("sessions ") and "x" in preset:
        count, turns = preset.removeprefix("sessions ").split("x", 1)
        return int(count), int(turns)  # row_checks has read the name as felab writes it
    named = PRESETS.get(preset.removesuffix("+custom"))
    w = named.workload if named is not None else None
    return (w.sessions, w.turns) if w is not None and w.sessions is not None else None


def _check_server_prompt(
    row: Mapping[str, str], figures: Mapping[str, float | None], counts: Mapping[str, int | None]
) -> None:
    """A server counts at most a token a byte of the request, and its template: a prompt of
    10 tokens beside a server's 100,000 had been stored (L9). A trace's line asks at most
    MAX_INPUT_TOKENS of felab's words; a conversation resends its history, so its prompts grow
    with the turns, and are held to the longest context any model has (999,999,999 had been
    stored under both, the bound skipped; twentieth sweep)."""
    said, asked = figures["prompt_tokens_server"], counts["prompt_tokens"]
    if said is None:
        return
    preset = (row.get("preset") or "").strip()
    bound = ""
    if _sessions(preset):
        most = LONGEST_CONTEXT_TOKENS
        prompt = f"preset {preset[:40]} (each turn resends the conversation so far)"
        bound = f"no model's context holds more than {most:,} tokens, so no server counts more"
    elif asked is None and preset.startswith("trace:"):
        most = _PROMPT_BYTES_A_TOKEN * MAX_INPUT_TOKENS + _REQUEST_BYTES + TEMPLATE_TOKENS
        prompt = f"preset {preset[:40]} (a trace's line asks at most {MAX_INPUT_TOKENS:,} tokens)"
    elif asked is None:  # felab's fixed prompt (A2-12: 999,999,999 had been stored beside it)
        most = _DEFAULT_PROMPT_BYTES + _REQUEST_BYTES + TEMPLATE_TOKENS
        prompt = f"prompt_tokens blank (felab's own prompt of {_DEFAULT_PROMPT_BYTES} bytes)"
    else:
        most = _PROMPT_BYTES_A_TOKEN * asked + _REQUEST_BYTES + TEMPLATE_TOKENS
        prompt = f"prompt_tokens {asked:,}"
    if said > most:
        raise Invalid(
            f"prompt_tokens_server {said:g} beside {prompt}: "
            + (bound or f"such a prompt is counted as at most about {most:,} tokens by any server")
            + "; the row was edited"
        )


def _surely_sent(conversations: int, turns: int, counts: Mapping[str, int | None]) -> int:
    """The requests a multi-turn run sends when none fails: a conversation ends before its
    last turn only when its history outgrows any context, and each turn adds at most its
    message (the default one is under 64 tokens) and the longest answer max_tokens allows."""
    answer = _ANSWER_CHARS_A_TOKEN * (counts["max_tokens"] or MAX_TOKENS) + _ANSWER_CHARS_MORE
    turn = answer + _PROMPT_BYTES_A_TOKEN * (counts["prompt_tokens"] or 64)
    return conversations * min(turns, 1 + _MOST_HISTORY_CHARS // turn)


def check_preset_knobs(row: Mapping[str, str], counts: Mapping[str, int | None]) -> None:
    """A whole run's row agrees with the preset it names (H8): day2 at 32 tokens, or with 500
    requests, is no day2 run (felab writes day2+custom when a flag changes it), and it would
    compare with other people's day2 rows and count for the day's "done when"."""
    preset = (row.get("preset") or "").strip()
    named = PRESETS.get(preset)
    if named is not None:
        w = named.workload
        fixed = {
            "max_tokens": w.max_tokens,
            "warmup": w.warmup,
            "prompt_tokens": w.prompt_tokens,
            "shared_prefix_tokens": w.shared_prefix_tokens,
            "seed": w.seed,
            **({"requests": w.requests} if w.sessions is None else {}),
        }
        for name, expected in fixed.items():  # blank where felab writes it: not the preset
            if counts[name] != expected:
                raise _not_the_preset(preset, name, counts[name], expected)
        users = (row.get("concurrency") or "").strip()
        if int(users) not in w.concurrency:  # row_checks has read it as a whole number
            raise _not_the_preset(
                preset, "concurrency", users, " or ".join(map(str, w.concurrency))
            )
        rate = (row.get("rate") or "").strip()
        if rate:  # a preset runs users one request after another; --rate makes it +custom
            raise _not_the_preset(preset, "rate", rate, None)
    sessions = _sessions(preset)
    requests, failed = counts["requests"], counts["failed"]
    if sessions is None or requests is None:
        return
    conversations, turns = sessions
    most = conversations * turns
    if failed == 0:
        least, why = _surely_sent(conversations, turns, counts), "none failed"
    else:
        least, why = conversations, "each sends its first turn"
    if not least <= requests <= most:
        raise Invalid(
            f"requests {requests:,} under preset {preset}: {conversations:,} conversation(s) "
            f"of {turns:,} turns send {_span(least, most)} requests ({why}); the row was edited"
        )


def _span(least: int, most: int) -> str:
    return f"{least:,} to {most:,}" if least < most else f"{most:,}"


def _not_the_preset(preset: str, name: str, said: object, expected: object) -> Invalid:
    return Invalid(
        f"{name} {'blank' if said in (None, '') else said} under preset {preset}, which runs "
        f"{name} {'blank' if expected is None else expected} (felab presets): a run changed by "
        f"a flag is written {preset}+custom; the row was edited"
    )
