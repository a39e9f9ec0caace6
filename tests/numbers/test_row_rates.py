"""Twentieth sweep (a2) A2-9, A2-10, A2-23: throughputs and latencies a run's own requests
cannot give were stored: 999,999 req/s beside a rate, 9,999,999 tok/s beside a blank
max_tokens, p95s of a day in a run of 10 requests at 5.7 a second."""

from __future__ import annotations

import re

import pytest

from felab_core.errors import Invalid
from felab_core.numbers.row_checks import check_result_row

#: The row `felab bench` wrote in the sweep: vLLM, one user, 10 requests of 0.17 s.
SWEEP_ROW = {
    **{"timestamp": "2026-12-05T22:56:43.193+00:00", "host": "vm", "target": "custom"},
    **{"server": "vllm", "server_version": "", "model": "m", "api": "openai-chat"},
    **{"preset": "day2+custom", "concurrency": "1", "rate": "", "burstiness": ""},
    **{"requests": "10", "ok": "10", "failed": "0", "prompt_tokens": ""},
    **{"prompt_tokens_server": "10", "shared_prefix_tokens": "0", "max_tokens": "32"},
    **{"warmup": "1", "seed": "2", "ttft_p50_s": "0.00565265", "ttft_p95_s": "0.00616669"},
    **{"tpot_p50_s": "0.00534819", "tpot_p95_s": "0.00566266", "itl_p50_s": "0.00523312"},
    **{"itl_p95_s": "0.00595771", "writing_tps_p50": "186.985", "e2e_p50_s": "0.171878"},
    **{"e2e_p95_s": "0.182001", "output_tps": "183.252", "request_tps": "5.72663"},
    **{"goodput_rps": "", "token_source": "usage", "server_tps_p50": "", "cold_starts": "0"},
    "felab_version": "0.1.0",
}


def _row(**cells: str) -> dict[str, str]:
    return {**SWEEP_ROW, **cells}


@pytest.mark.parametrize(
    ("cells", "said"),
    [
        (  # A2-9: a rate beside one user skipped the bound
            {"rate": "5", "burstiness": "1", "request_tps": "999999", "output_tps": "9999999"},
            "request_tps 999999 sent at rate 5 with at most 1 in flight, whose median request "
            "took 0.171878 s: they finish at most about 23.3 a second",
        ),
        (  # A2-9: no cap on those in flight: the run still lasted its longest request
            {"rate": "5", "burstiness": "1", "concurrency": "0", "request_tps": "999999"},
            "ttft_p50_s 0.00565265 beside ok 10 at request_tps 999999: the run lasted about",
        ),
        (  # A2-10
            {"max_tokens": "", "output_tps": "9999999"},
            "output_tps 1e+07 beside request_tps 5.72663: with max_tokens blank (the server's "
            "own limit), a request of felab's (at most max_tokens 262,144) brings at most "
            "1,048,832 tokens",
        ),
        (  # A2-23
            {"itl_p95_s": "86399"},
            "itl_p95_s 86399 beside ok 10 at request_tps 5.72663: the run lasted about 1.746 s "
            "(10 / 5.72663), and every request took less",
        ),
        ({"ttft_p95_s": "86399", "e2e_p95_s": "86399.5"}, "ttft_p95_s 86399 beside ok 10"),
        ({"tpot_p95_s": "86399"}, "tpot_p95_s 86399 beside ok 10"),
        (
            {"e2e_p95_s": "", "itl_p50_s": "80000", "itl_p95_s": "80000"},
            "itl_p50_s 80000 beside ok 10",
        ),
    ],
)
def test_a_throughput_or_latency_the_requests_cannot_give_is_refused(
    cells: dict[str, str], said: str
) -> None:
    with pytest.raises(Invalid, match=re.escape(said)):
        check_result_row(_row(**cells))


@pytest.mark.parametrize(
    "cells",
    [
        {},
        {"rate": "5", "burstiness": "1"},
        {"rate": "5", "burstiness": "0.01", "concurrency": "0"},
        {"max_tokens": ""},
        {"e2e_p95_s": "1.746"},  # the slowest request took the whole run
    ],
)
def test_what_the_run_gives_passes(cells: dict[str, str]) -> None:
    check_result_row(_row(**cells))
