"""Numbers: reading a typed speed, the speed limit per server, measured runs, "done when"."""

from __future__ import annotations

import itertools
import math
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.engine.results import CSV_COLUMNS
from felab_core.engine.workloads import PRESETS
from felab_core.errors import Invalid, NotFound
from felab_core.numbers.importing import import_results
from felab_core.numbers.progress import (
    day_fields,
    day_numbers,
    done_when,
    field_key_for,
    numbers_day,
)
from felab_core.numbers.recording import (
    create_job,
    record_entered,
    record_measured,
    same_model,
    speed_limit_for,
)
from felab_core.numbers.speeds import MAX_PLAUSIBLE_TPS, MIN_PLAUSIBLE_TPS, parse_speed
from felab_core.numbers.verdict import rejudge_waiting
from felab_core.people.members import (
    set_hardware,
    set_server_model,
    update_server_model,
)
from tests.db_support import NOW

# ----------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("44.6", 44.6),
        ("44.6 tok/s", 44.6),
        (" 44.6  tokens per second ", 44.6),
        ("1,200 tokens/s", 1200.0),
        ("20 ms/token", 50.0),
        (".5", 0.5),
        (44, 44.0),
    ],
)
def test_reads_speeds(text: str | int, want: float) -> None:
    assert parse_speed(text).tokens_per_s == pytest.approx(want)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("0", "more than zero"),
        ("-3", "more than zero"),
        ("fast", "could not read"),
        ("44,6", "could not read"),
        ("33 words/s", "not words"),
        ("44 furlongs", "unknown unit"),
        ("1_0", "has a '_' between digits: write .* such as 10 "),  # 13th: "unknown unit"
        ("22_4 ms/token", "such as 224 ms/token"),
        ("1e9", "beyond any single conversation"),
        (str(MAX_PLAUSIBLE_TPS * 2), "beyond any single conversation"),
        (math.inf, "finite"),
        (math.nan, "finite"),
        (True, "yes/no"),
    ],
)
def test_refuses_what_is_not_a_speed(text: str | float, match: str) -> None:
    with pytest.raises(Invalid, match=match):
        parse_speed(text)


@given(st.floats(min_value=MIN_PLAUSIBLE_TPS, max_value=MAX_PLAUSIBLE_TPS, allow_nan=False))
def test_every_plausible_positive_number_round_trips(value: float) -> None:
    assert parse_speed(value).tokens_per_s == value
    assert parse_speed(f"{value!r} tok/s").tokens_per_s == pytest.approx(value)


@given(
    st.one_of(
        st.floats(max_value=MIN_PLAUSIBLE_TPS * 0.9999),
        st.floats(min_value=MAX_PLAUSIBLE_TPS * 1.0001),
    )
)
def test_every_implausible_number_is_refused(value: float) -> None:
    with pytest.raises(Invalid):
        parse_speed(value)


@given(st.text(max_size=20))
def test_any_text_is_read_or_refused_with_invalid(text: str) -> None:
    try:
        speed = parse_speed(text)
    except Invalid:
        return
    assert 0 < speed.tokens_per_s <= MAX_PLAUSIBLE_TPS and math.isfinite(speed.tokens_per_s)


# ----------------------------------------------------------------------------- speed limit


def test_entered_speed_is_set_against_the_machines_limit(
    db: Session, student: m.Member, day2: None
) -> None:
    out = record_entered(db, student, "ollama", "44.6")
    assert out.number.source == "entered" and out.comparison.check is None
    assert "does not know your machine" in out.comparison.explanation
    set_hardware(db, student, chip="m4 pro")
    out = record_entered(db, student, "ollama", "44.6")
    assert "size of the model file ollama runs" in out.comparison.explanation
    set_server_model(db, student, "ollama", "llama3.1:8b", model_bytes="4.9GB")
    out = record_entered(db, student, "ollama", "44.6 tok/s", field_key="d02.num.ollama-writing")
    check = out.comparison.check
    assert check is not None
    assert float(check.ceiling.tokens_per_second) == pytest.approx(273 / 4.9)
    assert check.verdict == "typical" and "80 %" in check.explanation
    assert out.number.model == "llama3.1:8b" and out.number.field_key == "d02.num.ollama-writing"
    assert out.number.verdict == "ok"
    impossible = record_entered(db, student, "ollama", "70")
    assert impossible.comparison.check is not None and impossible.comparison.check.impossible
    # thirteenth sweep M8: said "flagged" but stored "ok", so the typed-in board ranked it
    assert impossible.number.verdict == "flagged"
    assert "126 %" in (impossible.number.verdict_note or "")


def test_limit_uses_each_servers_own_model_file(db: Session, student: m.Member) -> None:
    set_hardware(db, student, bandwidth_gb_s="273")
    set_server_model(db, student, "mlx", "Llama-3.1-8B-Instruct-4bit", model_bytes="4.5GB")
    set_server_model(db, student, "llamacpp", "llama-3.1-8b.Q4_K_M.gguf", model_bytes="4.9GB")
    mlx, cpp = speed_limit_for(db, student, "mlx"), speed_limit_for(db, student, "llamacpp")
    assert not isinstance(mlx, str) and not isinstance(cpp, str)
    assert mlx.tokens_per_second > cpp.tokens_per_second


def test_field_must_match_the_server(db: Session, student: m.Member, day2: None) -> None:
    with pytest.raises(Invalid, match="asks for mlx"):
        record_entered(db, student, "ollama", "40", field_key="d02.num.mlx-writing")
    with pytest.raises(NotFound):
        record_entered(db, student, "ollama", "40", field_key="nope")
    with pytest.raises(Invalid, match="use one of"):
        record_entered(db, student, "lmstudio", "40")


def test_day_fields_come_from_the_pack_with_hints(
    db: Session, student: m.Member, day2: None
) -> None:
    record_entered(db, student, "mlx", "61.2")
    fields = day_fields(db, student, 2)
    assert [f.server for f in fields] == ["ollama", "llamacpp", "mlx"]
    assert fields[0].example == 44.6 and "44.6" in (fields[0].hint or "")
    assert fields[2].latest is not None and fields[2].latest.value == pytest.approx(61.2)
    assert day_fields(db, student, 3) == []


# ----------------------------------------------------------------------------- measured, done when


_RUNS = itertools.count(1)


def _row(server: str, model: str, preset: str = "day2", tps: str = "41.5") -> dict[str, str]:
    """A results-CSV row as `felab bench` writes it (the columns the checks read set)."""
    row = dict.fromkeys(CSV_COLUMNS, "")
    row.update(
        host="my-mac",
        target=server,
        api="openai-chat",
        server=server,
        model=model,
        preset=preset,
        concurrency="1",
        writing_tps_p50=tps,
    )
    named = PRESETS.get(preset)
    if named is not None:  # what the preset fixes, as felab bench writes it
        w = named.workload
        row.update(
            max_tokens=str(w.max_tokens),
            warmup=str(w.warmup),
            seed=str(w.seed),
            shared_prefix_tokens=str(w.shared_prefix_tokens),
            prompt_tokens="" if w.prompt_tokens is None else str(w.prompt_tokens),
        )
    if _is_speed(tps):  # the timings felab bench writes beside every speed it measures
        tpot = f"{1 / float(tps):.6g}"
        row.update(
            timestamp=NOW.isoformat(),
            requests="8",
            ok="8",
            failed="0",
            ttft_p50_s="0.2",
            tpot_p50_s=tpot,
            tpot_p95_s=tpot,
            # each run's own (no two runs measure alike to all digits: a copy is refused)
            e2e_p50_s=f"{9 + next(_RUNS) / 1e5:.6g}",
            request_tps="0.111",
            output_tps="22.2",
        )
    return row


def _is_speed(text: str) -> bool:
    try:
        return 0 < float(text) < 1e6
    except ValueError:
        return False


def _measure(db: Session, member: m.Member, server: str, model: str, preset: str = "day2") -> None:
    job = create_job(db, member, server, preset, now=NOW)
    record_measured(db, job, _row(server, model, preset), now=NOW)


def test_done_when_needs_three_measured_servers_same_preset_same_model(
    db: Session, student: m.Member, day2: None
) -> None:
    for server in ("ollama", "llamacpp", "mlx"):
        record_entered(db, student, server, "40")
    status = done_when(db, student, 2)
    assert not status.done and set(status.entered_only) == {"ollama", "llamacpp", "mlx"}
    assert "do not count" in status.message

    _measure(db, student, "ollama", "llama3.1:8b")
    _measure(db, student, "llamacpp", "llama-3.1-8b-q4.gguf")
    _measure(db, student, "mlx", "Llama-3.1-8B-4bit", preset="quick")
    status = done_when(db, student, 2)
    assert not status.done  # three names, and one preset differs

    label = "llama-3.1-8b-q4"
    set_server_model(db, student, "ollama", "llama3.1:8b", model_label=label)
    set_server_model(db, student, "llamacpp", "llama-3.1-8b-q4.gguf", model_label=label)
    set_server_model(db, student, "mlx", "Llama-3.1-8B-4bit", model_label=label)
    status = done_when(db, student, 2)
    assert not status.done and status.missing == ("mlx",)
    _measure(db, student, "mlx", "Llama-3.1-8B-4bit", preset="day2")
    status = done_when(db, student, 2)
    assert status.done and status.preset == "day2" and status.model == label
    assert set(status.best) == {"ollama", "llamacpp", "mlx"}


def test_measured_row_is_checked(db: Session, student: m.Member) -> None:
    job = create_job(db, student, "mlx", "day2")
    with pytest.raises(Invalid, match="no model"):
        record_measured(db, job, _row("mlx", ""))
    with pytest.raises(Invalid, match="asked for mlx"):
        record_measured(db, job, _row("ollama", "m"))
    result = record_measured(db, job, _row("mlx", "m", tps=""))
    assert result.writing_tps_p50 is None and job.status == "ready"


def test_day_without_done_when_is_done(db: Session, student: m.Member) -> None:
    assert done_when(db, student, 9).done


def test_done_when_says_when_runs_differ_only_by_model_name(
    db: Session, student: m.Member, day2: None
) -> None:
    _measure(db, student, "ollama", "llama3.1:8b")
    _measure(db, student, "mlx", "Llama-3.1-8B-4bit")
    status = done_when(db, student, 2)
    assert "llamacpp" in status.missing and len(status.missing) == 2  # the largest group wins
    assert "measured with another preset or model name" in status.message
    assert "the same label" in status.message


# ----------------------------------------------------------------------------- the day's table


def test_day_numbers_sets_entered_and_measured_side_by_side(
    db: Session, student: m.Member, day2: None
) -> None:
    set_hardware(db, student, chip="M4 Pro")
    set_server_model(db, student, "ollama", "llama3.1:8b", model_bytes="4.9GB")
    record_entered(db, student, "ollama", "44.6", now=NOW)
    record_entered(db, student, "llamacpp", "70", now=NOW)
    _measure(db, student, "ollama", "llama3.1:8b")
    view = day_numbers(db, student, 2)
    assert view.day == 2 and [r.field.server for r in view.rows] == ["ollama", "llamacpp", "mlx"]
    ollama, cpp, mlx = view.rows
    assert ollama.entered is not None and ollama.entered.value == pytest.approx(44.6)
    assert ollama.measured is not None and ollama.measured.value == pytest.approx(41.5)
    assert ollama.entered_check is not None and ollama.entered_check.verdict == "typical"
    assert ollama.measured_check is not None and ollama.flags == ()
    assert cpp.entered_check is None and isinstance(cpp.limit, str)  # no model file for it
    assert cpp.flags == ("typed in only",) and "size of the model file" in cpp.notes[0]
    assert mlx.entered is None and mlx.flags == () and mlx.notes == ()
    set_server_model(db, student, "llamacpp", "x.gguf", model_bytes="4.9GB")
    cpp = day_numbers(db, student, 2).rows[1]
    assert cpp.flags == ("entered: above the speed limit", "typed in only")
    assert "above the physical limit" in cpp.notes[0]
    assert not view.done.done and view.done.missing
    with pytest.raises(NotFound, match=r"day 9 is not in the loaded content \(it has day 2\)"):
        day_numbers(db, student, 9)


def test_the_default_day_is_the_latest_reached_that_asks_for_numbers(
    db: Session, student: m.Member, day2: None
) -> None:
    # The cohort started on Monday 2 March: NOW is day 2, the Monday before is not started.
    assert numbers_day(db, student, NOW) == 2
    assert numbers_day(db, student, datetime(2026, 2, 20, tzinfo=UTC)) == 2
    assert numbers_day(db, student, datetime(2026, 3, 20, tzinfo=UTC)) == 2
    assert field_key_for(db, 2, "MLX") == "d02.num.mlx-writing"
    assert field_key_for(db, 2, "vllm") is None  # the day asks for no such figure
    with pytest.raises(NotFound, match="day 9 is not in the loaded content"):
        field_key_for(db, 9, "mlx")  # a typed --day that is not in the course is not kept
    with pytest.raises(Invalid, match="use one of"):
        field_key_for(db, 2, "lmstudio")


# ----------------------------------------------------------------------------- importing a CSV


def test_import_groups_runs_into_jobs_and_never_stores_a_row_twice(
    db: Session, student: m.Member
) -> None:
    sweep = [  # day2 at -c 1,4: day2+custom, one start
        {**_row("ollama", "llama3.1:8b", "day2+custom"), "timestamp": "2026-03-03T10:00:00+00:00"},
        {
            **_row("ollama", "llama3.1:8b", "day2+custom", tps="30"),
            "timestamp": "2026-03-03T10:00:00+00:00",
            "concurrency": "4",
        },
        {**_row("mlx", "m", tps="52"), "timestamp": "2026-03-03T10:10:00+00:00"},
        _row("mlx", "m", preset=""),
        {**_row("mlx", "m"), "concurrency": "many"},
        {
            **_row("mlx", "m", "day2+custom"),
            "concurrency": "0",
            "rate": "2",
            "burstiness": "1",
            "timestamp": "2026-03-03T10:20:00+00:00",
        },
    ]
    with pytest.raises(Invalid, match="line 6: concurrency 'many' is not a whole number"):
        import_results(db, student, sweep, now=NOW)  # all or nothing by default
    assert db.scalar(select(func.count(m.BenchResult.id))) == 0
    report = import_results(db, student, sweep, now=NOW, skip_invalid=True)
    outcomes = [(r.line, r.outcome) for r in report.rows]
    assert outcomes == [
        (2, "recorded"),
        (3, "result only"),
        (4, "recorded"),
        (5, "skipped"),
        (6, "skipped"),
        (7, "result only"),
    ]
    assert "4 users at once" in report.rows[1].reason
    assert "no preset named" in report.rows[3].reason
    assert "not a whole number" in report.rows[4].reason
    assert "no cap on how many run at once" in report.rows[5].reason
    jobs = db.scalars(select(m.BenchJob).where(m.BenchJob.member_id == student.id)).all()
    assert sorted(j.server for j in jobs) == ["mlx", "mlx", "ollama"]  # the sweep is one job
    assert all(j.status == "ready" and j.worker_id is None for j in jobs)
    mlx = db.scalar(select(m.Number).where(m.Number.server == "mlx", m.Number.preset == "day2"))
    assert mlx is not None and mlx.recorded_at.replace(tzinfo=UTC) == datetime(
        2026, 3, 3, 10, 10, tzinfo=UTC
    )  # measured when the row says

    again = import_results(db, student, sweep, now=NOW, skip_invalid=True)
    assert [r.outcome for r in again.rows][:3] == ["already imported"] * 3 and not again.new
    assert db.scalar(select(func.count(m.BenchResult.id))) == 4


@pytest.mark.parametrize(
    ("column", "value", "reason"),
    [
        ("writing_tps_p50", "-41.8", "cannot be negative"),
        ("writing_tps_p50", "-0.0", "cannot be negative"),  # ninth sweep: stored as a result
        ("writing_tps_p50", "nan", "not a finite number"),
        ("writing_tps_p50", "1e309", "not a finite number"),
        ("writing_tps_p50", "inf", "not a finite number"),
        ("writing_tps_p50", "5e9", "not real"),
        ("ttft_p50_s", "-1", "cannot be negative"),
        ("concurrency", "-3", "not from 0 to"),
        ("concurrency", "10000000000", "not from 0 to"),
        # thirteenth sweep M1: int() read 1_0 as 10 and a fullwidth digit as 1
        ("concurrency", "1_0", "concurrency '1_0' is not a whole number"),
        ("concurrency", "\uff11", "is not a whole number"),
        ("model", "m" * 400, "longer than 300"),
        ("model", "\x1b[31mevil", "control characters"),
        ("host", "h\x00", "control characters"),
        ("preset", "../../x", "not a name felab writes"),
        ("timestamp", "2099-01-01T00:00:00+00:00", "in the future"),
        ("ok", "0", "from 0 answered requests"),
    ],
)
def test_import_refuses_impossible_values_with_the_line_and_stores_nothing(
    db: Session, student: m.Member, column: str, value: str, reason: str
) -> None:
    odd = {**_row("mlx", "m"), column: value}
    if column == "ok":  # the counts still add up: the speed from no answer is what is refused
        odd["failed"] = odd["requests"]
    rows = [_row("ollama", "llama3.1:8b"), odd]
    with pytest.raises(Invalid, match=f"line 3: .*{reason}.*nothing was stored|nothing was st"):
        import_results(db, student, rows, now=NOW)
    assert db.scalar(select(func.count(m.BenchResult.id))) == 0
    assert db.scalar(select(func.count(m.Number.id))) == 0
    report = import_results(db, student, rows, now=NOW, skip_invalid=True)
    assert [r.outcome for r in report.rows] == ["recorded", "skipped"]
    assert reason in report.rows[1].reason
    assert db.scalar(select(func.count(m.BenchResult.id))) == 1


def test_import_knows_rows_the_worker_already_sent(db: Session, student: m.Member) -> None:
    job = create_job(db, student, "ollama", "day2")
    sent = _row("ollama", "llama3.1:8b")
    record_measured(db, job, {str(k): str(v) for k, v in sent.items()})
    report = import_results(db, student, [sent])
    assert [r.outcome for r in report.rows] == ["already imported"]


def test_import_refuses_a_file_without_the_columns(db: Session, student: m.Member) -> None:
    with pytest.raises(Invalid, match="no server, model, preset, concurrency"):
        import_results(db, student, [{"name": "ollama", "speed": "44.6"}])
    assert import_results(db, student, []).rows == ()


def test_update_server_model_keeps_what_is_not_given(db: Session, student: m.Member) -> None:
    with pytest.raises(Invalid, match="which model ollama runs"):
        update_server_model(db, student, "ollama", model_bytes="4.9GB")
    _measure(db, student, "ollama", "llama3.1:8b")
    row = update_server_model(db, student, "ollama", model_bytes="4.9GB")
    assert (row.model, row.model_bytes, row.model_label) == ("llama3.1:8b", 4_900_000_000, None)
    row = update_server_model(db, student, "ollama", model_label="l8b")
    assert (row.model, row.model_bytes, row.model_label) == ("llama3.1:8b", 4_900_000_000, "l8b")
    row = update_server_model(db, student, "ollama", model="other", model_label="")
    assert (row.model, row.model_bytes, row.model_label) == ("other", 4_900_000_000, None)


def test_a_unit_in_the_value_and_another_beside_it_is_refused() -> None:
    """Fifteenth sweep H12: `numbers enter ollama '44.6 ms/token' tok/s` stored 22.4 tok/s (the
    value's unit won without a word)."""
    with pytest.raises(Invalid, match="holds its unit and 'tok/s' names another"):
        parse_speed("44.6 ms/token", "tok/s")
    assert parse_speed("44.6 TOK/S", "tok/s").tokens_per_s == 44.6


@pytest.mark.parametrize(
    ("text", "typed"),
    [
        ("44.6", ("44.6", "tok/s")),
        ("1,234.50 tok/s", ("1234.50", "tok/s")),
        ("22.4 ms/token", ("22.4", "ms/token")),
        (".5 t/s", (".5", "tok/s")),
    ],
)
def test_a_typed_speed_keeps_its_digits_and_unit(text: str, typed: tuple[str, str]) -> None:
    speed = parse_speed(text)
    assert (speed.typed_value, speed.typed_unit) == typed


def test_an_unchanged_figure_is_not_stored_again(db: Session, student: m.Member) -> None:
    first = record_entered(db, student, "llamacpp", "22.4 ms/token", skip_unchanged=True)
    assert not first.unchanged and first.number.typed_value == "22.4"
    same = record_entered(db, student, "llamacpp", "22.40 ms/token", skip_unchanged=True)
    assert same.unchanged and same.number.id == first.number.id
    other_unit = record_entered(db, student, "llamacpp", "22.4", skip_unchanged=True)
    assert not other_unit.unchanged  # 22.4 tok/s is another figure
    # A figure stored before the typing was kept: the same as the text it was shown back as.
    legacy = record_entered(db, student, "mlx", "61.2")
    legacy.number.typed_value = legacy.number.typed_unit = None
    legacy.number.value = 1000 / 22.4
    db.flush()
    assert record_entered(db, student, "mlx", "44.6429", skip_unchanged=True).unchanged


def test_an_imported_speed_above_the_machine_limit_is_flagged_not_ok(
    db: Session, student: m.Member
) -> None:
    """A results file is the member's own disk: its figures face the speed limit as a worker's
    do (a hand-edited 500 tok/s on an M4 Pro is 9x what memory allows)."""
    set_hardware(db, student, chip="M4 Pro")
    set_server_model(db, student, "ollama", "llama3.1:8b", model_bytes="4.9GB")
    rows = [_row("ollama", "llama3.1:8b", tps="500"), _row("ollama", "llama3.1:8b", tps="40")]
    rows[1]["timestamp"] = "2026-03-03T10:00:00+00:00"
    report = import_results(db, student, rows, now=NOW)
    assert [r.outcome for r in report.rows] == ["recorded", "recorded"]
    assert report.rows[0].reason.startswith("flagged:") and report.rows[1].reason == ""
    stored = db.scalars(select(m.Number).where(m.Number.server == "ollama"))
    verdicts = sorted((n.value, n.verdict) for n in stored)
    assert verdicts == [(40.0, "ok"), (500.0, "flagged")]


def test_an_imported_speed_of_another_model_waits_for_that_models_size(
    db: Session, student: m.Member
) -> None:
    """Fourteenth sweep M11: a row measured on another model than the one whose size is
    recorded was judged against that size, with no word (a 1B model's limit passed a 70B's
    speed). It waits, unranked, until that model's size is recorded; the same model written
    as another server writes it counts as the same."""
    set_hardware(db, student, chip="M4 Pro")
    set_server_model(db, student, "ollama", "llama3.2:1b", model_bytes="1.3GB")  # ~210 tok/s
    rows = [_row("ollama", "llama3.3:70b", tps="150"), _row("ollama", "llama3.2:1b", tps="150")]
    rows[1]["timestamp"] = "2026-03-03T10:00:00+00:00"
    report = import_results(db, student, rows, now=NOW)
    assert report.rows[0].reason.startswith("unverified: felab does not know the size of the")
    assert "llama3.3:70b on ollama (the size recorded is llama3.2:1b's)" in report.rows[0].reason
    assert report.rows[1].reason == ""
    set_server_model(db, student, "ollama", "llama3.3:70b", model_bytes="42GB")  # ~6.5 tok/s
    changed = rejudge_waiting(db, student)
    assert [(n.model, n.verdict) for n in changed] == [("llama3.3:70b", "flagged")]
    recorded = set_server_model(
        db, student, "llamacpp", "Llama-3.1-8B.Q4.gguf", model_bytes="4.9GB"
    )
    for same in ("/models/llama-3.1-8b.q4.gguf", "llama-3.1-8B.Q4.gguf/"):
        assert same_model(same, recorded)
    ollama = set_server_model(db, student, "ollama", "llama3.1", model_bytes="4.9GB")
    assert same_model("llama3.1:latest", ollama) and not same_model("llama3.1:70b", ollama)


def test_a_speed_typed_into_a_results_file_is_not_measured(db: Session, student: m.Member) -> None:
    """Fourteenth sweep H4: a row with every column and only writing_tps_p50 filled passed each
    check (a check passes over a blank cell) and was stored as a measured 55.5 tok/s."""
    typed = dict.fromkeys(CSV_COLUMNS, "")
    typed.update(host="vm", target="ollama", server="ollama", model="llama3.1:8b", preset="day2")
    typed.update(concurrency="1", writing_tps_p50="55.5")
    with pytest.raises(Invalid, match=r"line 2: a writing speed with timestamp, requests, ok"):
        import_results(db, student, [typed], now=NOW)
    assert db.scalar(select(func.count(m.Number.id))) == 0


@pytest.mark.parametrize("typed", ["0x10", "0o17", "0b101"])
def test_a_speed_in_another_base_is_said_so(typed: str) -> None:
    """Seventeenth sweep (b) L3: 0x10 was "unknown unit 'x10'"."""
    with pytest.raises(Invalid, match="is a number in another base"):
        parse_speed(typed)


def test_a_flagged_measured_figure_is_marked_and_does_not_count_until_approved(
    db: Session, student: m.Member, day2: None
) -> None:
    """Twentieth sweep (b) B15: a measured figure flagged for review (its request records
    disagreed) showed with an empty Flags column and ticked the day's "done when"."""
    for server in ("ollama", "llamacpp", "mlx"):
        _measure(db, student, server, "llama3.1:8b")
    assert done_when(db, student, 2).done
    flagged = db.scalars(
        select(m.Number).where(m.Number.member_id == student.id, m.Number.server == "mlx")
    ).one()
    flagged.verdict, flagged.verdict_note = "flagged", "the figures do not agree"
    db.flush()
    status = done_when(db, student, 2)
    assert not status.done and status.missing == ("mlx",)
    assert "mlx are flagged for review and count once an instructor approves" in status.message
    (mlx,) = [r for r in day_numbers(db, student, 2).rows if r.measured is flagged]
    assert "measured: flagged for review" in mlx.flags
    assert any("the figures do not agree" in note for note in mlx.notes)
    flagged.verdict = "approved"
    db.flush()
    assert done_when(db, student, 2).done
