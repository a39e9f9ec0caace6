"""felab compare on large and on broken records: bounded work, and no measurement it cannot be."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from felab.cli.compare import _slow_note
from felab_core.engine.compare import (
    BOOTSTRAP_REQUESTS,
    RESAMPLES,
    THINNED_GAPS,
    _pooled_quantiles,
    _thinned,
    compare_records,
    compare_runs,
)
from felab_core.engine.record_reading import load_record
from felab_core.engine.record_requests import MOST_GAPS, CompareError, Sample
from tests.engine.test_compare import _record, _requests, write_record


def _write(tmp_path: Path, name: str, requests: list[dict[str, Any]]) -> Path:
    """The requests in a record sealed as felab writes it: its fields are checked all the same."""
    return write_record(tmp_path / name, _record([(4, requests)]))


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"ok": "yes"}, "request 3 has ok = 'yes', not true or false"),
        ({"ok": None}, "request 3 has ok = None, not true or false"),
        ({"cold": "no"}, "request 3 has cold = 'no', not true or false"),
        ({"output_tokens": -3}, "request 3 has output_tokens = -3, not a count of tokens"),
        ({"output_tokens": 2.5}, "request 3 has output_tokens = 2.5"),
        ({"e2e_s": 0.01}, "request 3 has e2e_s = 0.01, shorter than its ttft_s = 0.05"),
        ({"ttft_s": True}, "request 3 has ttft_s = True, not a time"),
        ({"itl_s": [0.01, -1.0]}, "request 3 has itl_s = -1.0, not a time"),
        ({"writing_tps": "fast"}, "request 3 has writing_tps = 'fast', not a speed"),
        # eighth sweep: a first token at the instant of sending read as "better, -100 %"
        ({"ttft_s": -0.0, "e2e_s": 0.2}, "request 3 has ttft_s = -0.0, not a time"),
        ({"ttft_s": 0, "e2e_s": 0.2}, "request 3 has ttft_s = 0, not a time"),
        ({"output_tokens": 10**30}, "request 3 has output_tokens = 1" + "0" * 30),
        # eleventh sweep: TPOT 0 beside the speed measured read as "TPOT better, -100 %"
        ({"tpot_s": 0.0}, "request 3 has tpot_s = 0.0, not a time"),
        ({"writing_tps": 0.0}, "request 3 has writing_tps = 0.0, not a speed"),
        ({"tpot_s": 1e-9}, "request 3 has writing_tps = 100.0 beside tpot_s = 1e-09"),
        ({"writing_tps": 120.0}, "request 3 has writing_tps = 120.0 beside tpot_s = 0.01"),
        ({"index": -1}, "request 3 has index = -1, not a request's number"),  # fourteenth L6
        ({"outside_window": "no"}, "request 3 has outside_window = 'no', not true or false"),
        (
            {"tpot_s": None, "writing_tps": 9999999.0},
            "request 3 has writing_tps = 9999999.0 and no",
        ),
        # seventeenth sweep (a2) H6: TPOT 100 s inside a 4 ms request was compared as "worse"
        ({"tpot_s": 100.0, "writing_tps": 0.01}, "request 3 has tpot_s = 100.0, longer than"),
        # sixteenth sweep H8: gaps that could not fit between the first token and the end
        ({"itl_s": [0.02] * 10}, "request 3 has inter-token gaps that add up to 0.2 s, longer"),
        ({"itl_s": [1e-9] * (MOST_GAPS + 1)}, f"request 3 has {MOST_GAPS + 1:,} inter-token gaps"),
    ],
)
def test_a_request_felab_could_not_have_measured_is_refused_by_number(
    tmp_path: Path, change: dict[str, Any], said: str
) -> None:
    requests = _requests([0.05] * 5)
    requests[2] = {**requests[2], **change}
    path = _write(tmp_path, "broken.json", requests)
    with pytest.raises(CompareError, match="run 1, " + said.replace("(", r"\(")) as caught:
        load_record(path, unsealed=True)
    assert "edited or broken" in str(caught.value)


def test_the_tester_s_record_is_refused_before_any_verdict(tmp_path: Path) -> None:
    """End-to-end shorter than TTFT, ok "yes", -3 tokens: once called "-100 %, better"."""
    bad = {"index": 5, "ok": "yes", "cold": False, "ttft_s": 0.5, "e2e_s": 0.0, "output_tokens": -3}
    path = _write(tmp_path, "b.json", [*_requests([0.05] * 5), bad])
    with pytest.raises(CompareError, match="run 1, request 6 has ok = 'yes'"):
        load_record(path, unsealed=True)


def test_an_end_within_a_microsecond_of_the_first_token_is_the_same_instant(
    tmp_path: Path,
) -> None:
    requests = _requests([0.05] * 5)
    requests[0] = {**requests[0], "e2e_s": 0.05 - 5e-7, "output_tokens": 1, "itl_s": [],
                   "tpot_s": None, "writing_tps": None}  # fmt: skip
    record = load_record(_write(tmp_path, "ok.json", requests))
    assert len(record["runs"][0]["requests"]) == 5


def test_a_loaded_run_keeps_only_the_numbers_of_usable_requests(tmp_path: Path) -> None:
    requests = [*_requests([0.05] * 4), {"index": 4, "ok": False, "ttft_s": 9.0}]
    requests.append({**_requests([9.0])[0], "index": 5, "cold": True})
    run = load_record(_write(tmp_path, "r.json", requests))["runs"][0]["requests"]
    assert isinstance(run, Sample) and len(run) == 4
    assert run.gaps.shape == (4 * 7,) and run.scalars["ttft_s"].tolist() == [0.05] * 4


def test_a_large_run_is_compared_quickly_on_a_stated_subsample(tmp_path: Path) -> None:
    n = 3 * BOOTSTRAP_REQUESTS
    rng = np.random.default_rng(7)
    a = _requests(list(0.050 + rng.normal(0, 0.003, n)))
    b = _requests(list(0.060 + rng.normal(0, 0.003, n)))
    started = time.monotonic()
    comparison = compare_records(
        load_record(_write(tmp_path, "a.json", a)), load_record(_write(tmp_path, "b.json", b))
    )
    assert time.monotonic() - started < 30  # was minutes and gigabytes (RESAMPLES x n)
    (pair,) = comparison.runs
    assert (pair.requests_a, pair.requests_b) == (n, n)  # the figures use every request
    ttft = {c.figure.key: c for c in pair.changes}["ttft_p50"]
    assert ttft.verdict == "worse" and ttft.low is not None and ttft.high is not None
    assert ttft.low < 10.0 < ttft.high
    note = " ".join(comparison.caveats)
    assert f"fixed random {BOOTSTRAP_REQUESTS:,}" in note and f"all {n:,} requests" in note
    again = compare_records(
        load_record(tmp_path / "a.json"), load_record(tmp_path / "b.json")
    ).runs[0]
    assert [(c.low, c.high) for c in again.changes] == [(c.low, c.high) for c in pair.changes]


def test_a_small_comparison_says_nothing_about_subsampling() -> None:
    a = _record([(4, _requests([0.05] * 50))])
    assert not any("fixed random" in c for c in compare_records(a, a).caveats)


def _pooled_everything(
    values: np.ndarray,
    counts: np.ndarray,
    weights: np.ndarray,
    q: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """The pooled quantile summed over every value, every time (what the window must equal)."""
    n = len(counts)
    owner = np.repeat(np.arange(n), counts)
    order = np.argsort(values, kind="stable")
    values, owner, weights = values[order], owner[order], weights[order]
    out = np.empty(RESAMPLES)
    for row in range(RESAMPLES):
        draws = rng.multinomial(n, np.full(n, 1 / n))
        cumulative = np.cumsum(draws[owner] * weights)
        target = q * (draws @ np.bincount(owner, weights=weights, minlength=n))
        out[row] = values[np.argmax(cumulative >= target)]
    return out


@pytest.mark.parametrize("q", [0.5, 0.95])
def test_the_windowed_pooled_quantile_equals_summing_everything(q: float) -> None:
    rng = np.random.default_rng(11)
    counts = rng.integers(0, 40, 3000)
    counts[counts == 0] = 1
    values = rng.lognormal(-4, 0.5, int(counts.sum()))
    ones = np.ones(len(values))
    fast = _pooled_quantiles(values, counts, ones, q, np.random.default_rng(3))
    slow = _pooled_everything(values, counts, ones, q, np.random.default_rng(3))
    assert np.array_equal(fast, slow)


@pytest.mark.parametrize("q", [0.5, 0.95])
def test_thinned_long_requests_are_pooled_by_their_weights_exactly(q: float) -> None:
    """Requests past THINNED_GAPS gaps enter as weighted order statistics; the windowed sum
    over them is still the sum over everything."""
    rng = np.random.default_rng(5)
    counts = np.array([3, 900, 40, 5_000, 12, 700] * 5)
    values = rng.gamma(4, 0.0025, int(counts.sum()))
    kept, kept_counts, weights = _thinned(values, counts)
    assert kept_counts.max() == THINNED_GAPS and len(kept) == kept_counts.sum()
    assert np.isclose(weights.sum(), counts.sum())  # every gap still counts once
    fast = _pooled_quantiles(kept, kept_counts, weights, q, np.random.default_rng(3))
    slow = _pooled_everything(kept, kept_counts, weights, q, np.random.default_rng(3))
    assert np.array_equal(fast, slow)


def test_long_requests_are_compared_in_bounded_time_with_the_interval_they_had() -> None:
    """Sixteenth sweep H8: 20 requests of 20,000 gaps took 44 s (one of 2,000,000: 99 s and
    2.6 GB). Thinned, the interval is that of every gap within a tenth of its width."""
    rng = np.random.default_rng(1)

    def side(n: int, gaps: int, scale: float) -> Sample:
        scalars = {k: np.full(n, 0.05) for k in ("ttft_s", "e2e_s", "tpot_s", "writing_tps")}
        return Sample(scalars, rng.gamma(4, scale / 4, n * gaps), np.full(n, gaps))

    a, b = side(20, 20_000, 0.010), side(20, 20_000, 0.0103)
    started = time.monotonic()
    itl = {c.figure.key: c for c in compare_runs(a, b)}["itl_p50"]
    assert time.monotonic() - started < 30
    assert itl.low is not None and itl.high is not None and itl.verdict == "worse"
    # every gap resampled, for the truth (slow: the windows are whole)
    everything = np.quantile(
        _pooled_everything(b.gaps, b.gap_counts, np.ones(len(b.gaps)), 0.5,
                           np.random.default_rng(4))
        - _pooled_everything(a.gaps, a.gap_counts, np.ones(len(a.gaps)), 0.5,
                             np.random.default_rng(5)),
        [0.025, 0.975],
    ) * 1e3  # fmt: skip
    width = everything[1] - everything[0]
    assert abs(itl.low - everything[0]) < 0.1 * width + 0.02
    assert abs(itl.high - everything[1]) < 0.1 * width + 0.02


def test_a_slow_step_is_said_only_when_it_is_slow() -> None:
    said: list[str] = []
    with _slow_note(said.append, "quick", after_s=5):
        pass
    with _slow_note(said.append, "slow", after_s=0.01):
        time.sleep(0.3)
    assert said == ["slow"]


@pytest.mark.parametrize("users", [-4, "many", 10**30, 2.5])
def test_a_run_whose_concurrency_is_no_count_is_called_broken(
    tmp_path: Path, users: object
) -> None:
    path = tmp_path / "r.json"
    record = _record([(1, _requests([0.2] * 10))])
    record["runs"][0]["concurrency"] = users
    path.write_text(json.dumps(record))
    with pytest.raises(CompareError, match="not a number of streams"):
        load_record(path, unsealed=True)


def test_a_load_written_twice_is_called_broken(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    record = _record([(2, _requests([0.2] * 10)), (2, _requests([0.2] * 10))])
    path.write_text(json.dumps(record))
    with pytest.raises(CompareError, match="more than once"):
        load_record(path, unsealed=True)


def test_records_with_no_answered_request_at_a_shared_load_are_not_compared(
    tmp_path: Path,
) -> None:
    """Eighth sweep: B's one run held no requests, and the table said "not measured in both"
    on every line, exit 0."""
    a = _write(tmp_path, "a.json", _requests([0.05] * 5))
    b = _write(tmp_path, "b.json", [])
    with pytest.raises(CompareError, match=r"4 streams: 5 in A, 0 in B\): nothing to compare"):
        compare_records(load_record(a), load_record(b))


def test_requests_copied_within_a_run_are_refused(tmp_path: Path) -> None:
    """Tenth sweep: a run's 20 requests copied 20,000 times narrowed its intervals, and a
    verdict came easier; felab numbers each request of a run once."""
    made = _requests([0.05 + 0.001 * i for i in range(20)])
    requests = [dict(r, index=i) for i, r in enumerate(made)]
    path = _write(tmp_path, "copied.json", requests + requests)
    with pytest.raises(CompareError, match="holds request 0 more than once"):
        load_record(path, unsealed=True)
    assert len(load_record(_write(tmp_path, "once.json", requests))["runs"][0]["requests"]) == 20


def test_a_number_of_thousands_of_digits_names_its_file(tmp_path: Path) -> None:
    path = tmp_path / "hugeint.json"
    path.write_text('{"schema": "x", "n": ' + "9" * 5000 + "}")
    with pytest.raises(CompareError, match=r"hugeint.json: holds a number of thousands"):
        load_record(path, unsealed=True)


def test_a_key_written_twice_is_refused_not_read_as_the_last(tmp_path: Path) -> None:
    """JSON keeps the last of two keys: a record edited to say `"ttft_s": 0.05, "ttft_s": 9`
    was compared on 9 without a word (twelfth sweep's known list)."""
    good = _write(tmp_path, "good.json", _requests([0.05] * 8))
    text = good.read_text()
    path = tmp_path / "twice.json"
    assert '"ttft_s":' in text  # felab writes no space after a colon
    path.write_text(text.replace('"ttft_s":', '"ttft_s":9.0,"ttft_s":', 1))
    with pytest.raises(CompareError, match=r"twice.json: holds the key 'ttft_s' twice in one"):
        load_record(path, unsealed=True)
    assert load_record(good)["runs"]  # the same file, each key once, is read


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda r: r["runs"][0].update(rate=float("nan")), "run 1 has rate nan, not a request"),
        (lambda r: r["runs"][0].update(rate="fast"), "run 1 has rate 'fast'"),
        (lambda r: r["runs"][0].update(rate=-3), "run 1 has rate -3"),
        (lambda r: r["runs"][0].update(rate=1e-300), "run 1 has rate 1e-300, not a request"),
        (lambda r: r["workload"].update(max_tokens=-5), "workload max_tokens is -5"),
        (lambda r: r["workload"].update(burstiness=True), "workload burstiness is True"),
        (lambda r: r["workload"].update(concurrency=[999]), "the workload lists [999]"),
        (lambda r: r.update(interrupted="lol"), "interrupted is 'lol', not true or false"),
    ],
    ids=[
        "rate-nan",
        "rate-text",
        "rate-negative",
        "rate-tiny",
        "max-tokens",
        "burstiness",
        "loads",
        "flag",
    ],
)
def test_a_run_or_workload_field_felab_never_writes_is_refused(
    tmp_path: Path, edit: Any, said: str
) -> None:
    """Twelfth sweep (H2, H3, M1): a run's rate and the workload's fields were believed (NaN,
    'fast', -5 tokens, a load no run had), while the concurrency beside them was checked."""
    record = _record([(4, _requests([0.05] * 5))])
    edit(record)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(record))  # NaN written as JSON's NaN, as a hand edit would
    with pytest.raises(CompareError, match=re.escape(said)) as caught:
        load_record(path, unsealed=True)
    assert "edited or broken" in str(caught.value)


def test_an_interrupted_record_is_said_before_the_figures(tmp_path: Path) -> None:
    a = tmp_path / "a.json"
    a.write_text(json.dumps(_record([(4, _requests([0.05] * 5))])))
    b = tmp_path / "b.json"
    b.write_text(json.dumps({**_record([(4, _requests([0.05] * 5))]), "interrupted": True}))
    result = compare_records(load_record(a, unsealed=True), load_record(b, unsealed=True))
    assert any("B was interrupted" in note for note in result.caveats)


def test_a_run_whose_requests_were_cut_out_is_refused(tmp_path: Path) -> None:
    """Fourteenth sweep L6: a run of ok 20 and no requests was compared as "0 requests"."""
    record = _record([(4, [])])
    record["runs"][0]["summary"] = {"ok": 20}
    path = tmp_path / "cut.json"
    path.write_text(json.dumps(record))
    with pytest.raises(CompareError, match="run 1 says 20 requests answered but lists none"):
        load_record(path, unsealed=True)


def test_a_record_of_more_values_than_a_comparison_reads_is_refused_before_parsing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seventeenth sweep (a2) H7: 60 requests of a million zero gaps (126 MB) took 2.6 GB."""
    import felab_core.engine.record_reading as reading

    monkeypatch.setattr(reading, "MOST_VALUES", 1000)
    path = _write(tmp_path, "big.json", _requests([0.05] * 100))
    with pytest.raises(CompareError, match="more than a comparison reads"):
        load_record(path, unsealed=True)


def test_a_record_of_more_runs_than_bench_writes_is_refused(tmp_path: Path) -> None:
    """Seventeenth sweep (a2) H10: 2,000 runs ran past 30 s."""
    record = _record([(c, _requests([0.05] * 2)) for c in range(1, 66)])
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(record))
    with pytest.raises(CompareError, match="holds 65 runs, and felab bench writes at most 64"):
        load_record(path, unsealed=True)


def test_requests_bench_left_out_of_its_figures_are_left_out_of_the_comparison(
    tmp_path: Path,
) -> None:
    """Seventeenth sweep (a) M9: the ramp-up's slow requests (outside_window) were compared,
    TTFT p95 317 ms against bench's own 37 ms."""
    late = [{**r, "index": 6 + r["index"], "outside_window": True} for r in _requests([0.3] * 4)]
    requests = _requests([0.05] * 6) + late
    run = load_record(_write(tmp_path, "w.json", requests))["runs"][0]["requests"]
    assert len(run) == 6 and run.scalars["ttft_s"].max() == 0.05


def _timed(count: int = 5, tokens: int = 8) -> list[dict[str, Any]]:
    """Requests as bench writes them: output tokens, the first chunk's share, and a TPOT that
    is the gaps' sum over the tokens after the first chunk."""
    return [
        {**r, "output_tokens": tokens, "first_chunk_tokens": 1.0}
        for r in _requests([0.05] * count, tokens=tokens)
    ]


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        # eighteenth sweep (a2) M1: TPOT halved and the speed doubled to match, in every request
        (
            lambda r: r.update(tpot_s=r["tpot_s"] / 2, writing_tps=2 / r["tpot_s"]),
            "has tpot_s = 0.005, but its gaps add up to 0.07 s over 7 tokens",
        ),
        (lambda r: r.update(output_tokens=1), "has tpot_s = 0.01 but no token after its first"),
        (lambda r: r.update(first_chunk_tokens=-1), "has first_chunk_tokens = -1"),
        (lambda r: r.update(first_chunk_tokens=9.5), "has first_chunk_tokens = 9.5"),
        (lambda r: r.update(first_chunk_tokens="1"), "has first_chunk_tokens = '1'"),
    ],
    ids=["tpot-halved", "one-token", "first-negative", "first-past-total", "first-text"],
)
def test_a_tpot_its_own_gaps_and_tokens_contradict_is_refused(
    tmp_path: Path, edit: Any, said: str
) -> None:
    requests = _timed()
    assert load_record(_write(tmp_path, "good.json", requests))["runs"][0]["requests"]
    for request in requests:
        edit(request)
    with pytest.raises(CompareError, match=re.escape(f"run 1, request 1 {said}")):
        load_record(_write(tmp_path, "edited.json", requests))


def test_requests_without_their_numbers_or_beside_another_count_are_refused(
    tmp_path: Path,
) -> None:
    """Eighteenth sweep (a2) M2: 20 requests copied 10 times with their `index` removed were
    compared as 200 (intervals three times narrower); a summary's count that is not the list's
    is refused too."""
    copied = [{k: v for k, v in r.items() if k != "index"} for r in _timed()] * 10
    with pytest.raises(CompareError, match="request 1 has index = None, not a request's number"):
        load_record(_write(tmp_path, "copied.json", copied))
    record = _record([(4, _timed())])
    record["runs"][0]["summary"] = {"ok": 999}
    path = tmp_path / "summary.json"
    path.write_text(json.dumps(record))
    with pytest.raises(CompareError, match="run 1 says 999 requests answered but lists 5"):
        load_record(path, unsealed=True)
    record["runs"][0]["summary"] = {"ok": 5, "duration_s": 1.0}
    path.write_text(json.dumps(record))
    assert len(load_record(path, unsealed=True)["runs"][0]["requests"]) == 5


def test_answered_requests_without_a_figure_leave_nothing_to_compare(tmp_path: Path) -> None:
    """Eighteenth sweep (a2) M3: every answered request's figures blanked gave a table of "not
    measured in both", exit 0."""
    blank = [
        {**r, "ttft_s": None, "e2e_s": None, "tpot_s": None, "writing_tps": None, "itl_s": None}
        for r in _timed()
    ]
    a = load_record(_write(tmp_path, "a.json", _timed()))
    b = load_record(_write(tmp_path, "b.json", blank))
    with pytest.raises(CompareError, match="no figure was measured in both records"):
        compare_records(a, b)


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        # nineteenth sweep (a2) H1, H2, M1: a TPOT edited where its checks' fields were dropped
        (lambda r: r.pop("first_chunk_tokens"), "without its gaps (itl_s), output_tokens and"),
        (lambda r: r.update(itl_s=[]), "without its gaps (itl_s)"),
        (lambda r: r.update(output_tokens=None), "not a share of its 0 output tokens"),
        # (a2) H5: 262,144 tokens in 16 chunks over 0.04 s
        (
            lambda r: r.update(tpot_s=1.4e-7, writing_tps=1 / 1.4e-7, itl_s=[1e-7] * 7),
            "faster than 100,000 tokens a second",
        ),
        # (a2) H7: answered requests of no tokens kept their TTFT (divided by 3: "better")
        (
            lambda r: r.update(output_tokens=0, tpot_s=None, writing_tps=None, itl_s=[]),
            "and output_tokens = 0",
        ),
    ],
    ids=["no-first-chunk", "no-gaps", "no-tokens", "millions-a-second", "zero-tokens"],
)
def test_a_tpot_without_what_proves_it_is_refused(tmp_path: Path, edit: Any, said: str) -> None:
    requests = _timed()
    for request in requests:
        edit(request)
    with pytest.raises(CompareError, match=re.escape(said)):
        load_record(_write(tmp_path, "edited.json", requests))


def test_a_run_holding_more_or_longer_requests_than_it_sent_is_refused(tmp_path: Path) -> None:
    """Nineteenth sweep (a2) H3, H4: 20 requests copied 50 times and renumbered (the workload
    said 20) narrowed an interval and flipped a verdict; an end-to-end of 86,399 s in a run of
    0.44 s was compared as "worse"."""
    record = _record([(4, _timed(30))], requests=20)
    path = tmp_path / "copied.json"
    path.write_text(json.dumps(record))
    with pytest.raises(CompareError, match="run 1 lists 30 requests, and its workload sent 20"):
        load_record(path, unsealed=True)
    record = _record([(4, _timed(5))], requests=5)
    record["runs"][0]["summary"] = {"duration_s": 0.44}
    record["runs"][0]["requests"][0]["e2e_s"] = 86_399.0
    path.write_text(json.dumps(record))
    with pytest.raises(CompareError, match="a request of 86,399 s end to end in a run that lasted"):
        load_record(path, unsealed=True)
    record["runs"][0]["requests"][0]["e2e_s"] = 0.12
    path.write_text(json.dumps(record))
    assert len(load_record(path, unsealed=True)["runs"][0]["requests"]) == 5


def test_many_loads_share_the_bootstrap_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nineteenth sweep, a2 H6: a 64-load sweep of 1,000 requests a load took 50 s to 120 s,
    one full bootstrap per load. The loads now share BOOTSTRAP_BUDGET, and the caveats say so."""
    from felab_core.engine import compare

    assert compare.resampled_per_run(1) == BOOTSTRAP_REQUESTS
    assert compare.resampled_per_run(64) == compare.BOOTSTRAP_BUDGET // 64 < 1000
    assert compare.resampled_per_run(10**6) == compare.BOOTSTRAP_LEAST
    monkeypatch.setattr(compare, "BOOTSTRAP_BUDGET", 400)
    monkeypatch.setattr(compare, "BOOTSTRAP_LEAST", 10)
    rng = np.random.default_rng(3)
    runs = [(users, _requests(list(0.05 + rng.normal(0, 0.003, 150)))) for users in (1, 2, 4)]
    slower = [(users, _requests(list(0.06 + rng.normal(0, 0.003, 150)))) for users in (1, 2, 4)]
    comparison = compare_records(_record(runs), _record(slower))
    notes = [c for c in comparison.caveats if "resample a fixed random 133 of each run" in c]
    assert len(notes) == 3 and "to keep a comparison of 3 loads quick" in notes[0]
    for pair in comparison.runs:  # the figures still use every request
        assert (pair.requests_a, pair.requests_b) == (150, 150)
        assert {c.figure.key: c for c in pair.changes}["ttft_p50"].verdict == "worse"
