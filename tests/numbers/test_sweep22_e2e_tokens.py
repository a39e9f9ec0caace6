"""Twenty-second sweep B10: a row whose E2E is shorter than its own tokens take (0.03 s for
32 tokens at 20.7 ms each) had been stored; rows felab bench wrote keep passing."""

from __future__ import annotations

import pytest

from felab_core.errors import Invalid
from felab_core.numbers.row_checks import check_result_row
from felab_core.numbers.row_e2e_tokens import least_tokens
from tests.numbers.test_row_checks import BENCH_ROW
from tests.numbers.test_row_rates import SWEEP_ROW

#: The sweep's honest row (a felab bench run of 4 requests of 32 tokens on llama.cpp).
HONEST = {
    **{"timestamp": "2026-12-06T02:51:40.020+00:00", "host": "vm", "target": "custom"},
    **{"server": "llamacpp", "server_version": "", "model": "m", "api": "openai-chat"},
    **{"preset": "day2+custom", "concurrency": "1", "rate": "", "burstiness": ""},
    **{"requests": "4", "ok": "4", "failed": "0", "prompt_tokens": ""},
    **{"prompt_tokens_server": "10", "shared_prefix_tokens": "0", "max_tokens": "32"},
    **{"warmup": "1", "seed": "2", "ttft_p50_s": "0.021181", "ttft_p95_s": "0.0228069"},
    **{"tpot_p50_s": "0.0206989", "tpot_p95_s": "0.0207457", "itl_p50_s": "0.0204039"},
    **{"itl_p95_s": "0.0218007", "writing_tps_p50": "48.3117", "e2e_p50_s": "0.665403"},
    **{"e2e_p95_s": "0.668345", "output_tps": "48.0859", "request_tps": "1.50269"},
    **{"goodput_rps": "", "token_source": "usage", "server_tps_p50": "", "cold_starts": "0"},
    "felab_version": "0.1.0",
}


def test_rows_felab_bench_wrote_pass() -> None:
    for row in (HONEST, SWEEP_ROW, BENCH_ROW):
        check_result_row(row)
    assert least_tokens(4, 48.0859, 1.50269, 32) == 28  # 4 x 31.97 - 3 x 33


@pytest.mark.parametrize(
    ("cells", "said"),
    [
        ({"e2e_p50_s": "0.03", "e2e_p95_s": "0.03"}, r"e2e_p50_s 0.03 beside tpot_p50_s 0.0206989"),
        (
            {"e2e_p50_s": "0.2896", "e2e_p95_s": "0.2897"},
            r"e2e_p95_s 0.2897 beside tpot_p95_s 0.0207457: each answered",
        ),
        ({"e2e_p50_s": "0.1"}, r"at least 28 tokens \(output_tps / request_tps, max_tokens 32\)"),
    ],
)
def test_an_e2e_shorter_than_its_tokens_take_is_refused(cells: dict[str, str], said: str) -> None:
    with pytest.raises(Invalid, match=said):
        check_result_row({**HONEST, **cells})


def test_no_bound_where_the_row_cannot_say_how_many_tokens_each_wrote() -> None:
    short = {"e2e_p50_s": "0.3", "e2e_p95_s": "0.3"}  # above its TTFT, below 28 tokens' time
    # Counted from chunks (no max_tokens bound on a count), or requests of 1 to 32 tokens
    # averaging 16: the fewest is not known, and the row passes as before.
    check_result_row({**HONEST, **short, "token_source": "chunks"})
    check_result_row({**HONEST, **short, "output_tps": "24.0430", "writing_tps_p50": "48.3117"})
