"""`felab numbers`: the Day 2 wrap-up's "Your numbers" from a terminal, on an embedded SQLite.

The terminal's own learner by default (as `felab drill`), the course's Day 2 pack loaded from
content/; each test has its own data folder, results folder and database.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
from sqlalchemy import func, select
from typer.testing import CliRunner

from felab.cli.main import app
from felab_core.db import models as m
from felab_core.db.session import default_sessions, session_scope
from felab_core.engine.results import CSV_COLUMNS, append_csv
from felab_core.people.members import add_member, create_cohort
from felab_core.settings import get_settings
from tests.db_support import CONTENT

runner = CliRunner()


@pytest.fixture(autouse=True)
def _own_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("FELAB_DATABASE_URL", raising=False)
    monkeypatch.setenv("FELAB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("FELAB_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("TZ", "Europe/London")
    monkeypatch.setenv("COLUMNS", "200")  # one table row a line, so cells read whole
    get_settings.cache_clear()
    loaded = runner.invoke(app, ["content", "load", str(CONTENT)])
    assert loaded.exit_code == 0, loaded.output
    yield
    get_settings.cache_clear()


def felab(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["numbers", *args])
    return result.exit_code, result.output


def numbers(source: str | None = None) -> list[m.Number]:
    with session_scope(default_sessions()) as s:
        query = select(m.Number).order_by(m.Number.id)
        if source is not None:
            query = query.where(m.Number.source == source)
        return list(s.scalars(query))


def count(model: type[m.Base]) -> int:
    with session_scope(default_sessions()) as s:
        return int(s.scalar(select(func.count()).select_from(model)) or 0)


_RUNS = itertools.count(1)


def row(server: str, model: str, tps: str = "41.5", **changes: str) -> dict[str, str]:
    """A results-CSV row as `felab bench` writes it (only the columns the import reads set)."""
    out = dict.fromkeys(CSV_COLUMNS, "")
    out.update(
        timestamp="2026-03-03T10:00:00+00:00",
        host="my-mac",
        target=server,
        server=server,
        model=model,
        preset="day2",
        concurrency="1",
        writing_tps_p50=tps,
        felab_version="0.1.0",
        max_tokens="256",  # what day2 fixes
        warmup="1",
        seed="2",
        shared_prefix_tokens="0",
    )
    try:  # the timings felab bench writes beside every speed it measures
        tpot = f"{1 / float(tps):.6g}"
    except (ValueError, ZeroDivisionError):
        tpot = ""
    # what felab bench writes in every row (a run's counts and throughputs)
    out.update(requests="8", ok="8", failed="0", request_tps="0.111", output_tps="22.2")
    if tpot:  # each run's own TTFT: no two runs measure alike to all digits (a copy is refused)
        ttft = f"{0.2 + next(_RUNS) / 1e6:.6g}"
        out.update(ttft_p50_s=ttft, tpot_p50_s=tpot)
    out.update(changes)
    return out


# ----------------------------------------------------------------------------- help


def test_help_teaches_with_the_courses_figures() -> None:
    code, out = felab("--help")
    assert code == 0
    assert "273 GB/s" in out and "4.9 GB" in out and "about 56" in out and "44.6" in out
    for cmd in ("machine", "model", "enter", "import", "show", "privacy", "export", "delete"):
        assert cmd in out
    code, out = felab("enter", "--help")
    assert code == 0 and "felab numbers enter ollama 44.6" in out and "done when" in out
    code, out = felab("machine", "--help")
    assert code == 0 and "273 ÷ 4.9 = about 56" in out


# ----------------------------------------------------------------------------- the flow


def test_machine_model_enter_three_then_show() -> None:
    code, out = felab("machine")
    assert code == 0 and "does not know your machine" in out
    code, out = felab("machine", "--bandwidth", "3.35 TB/s")  # read as `size limit` reads it
    assert code == 0 and "Machine: given by bandwidth, 3,350 GB/s." in out, out
    code, out = felab("machine", "--chip", "M4 Pro")
    assert code == 0, out
    assert "Machine: M4 Pro, 273 GB/s." in out and "Next: the model file" in out

    code, out = felab("model", "ollama", "--bytes", "4.9GB", "--name", "llama3.1:8b")
    assert code == 0, out
    assert "ollama runs llama3.1:8b, a 4.9 GB file." in out
    assert "273 GB/s ÷ 4.9 GB = about 56 tokens per second" in out
    for server, name in (("llamacpp", "llama-3.1-8b-q4.gguf"), ("mlx", "Llama-3.1-8B-4bit")):
        code, out = felab("model", server, "--bytes", "4.9GB", "--name", name)
        assert code == 0, out
    code, out = felab("machine")
    assert code == 0 and out.count("about 56 tokens per second") == 3

    code, out = felab("enter", "ollama", "44.6")
    assert code == 0, out
    assert "Recorded 44.6 tok/s for Day 2, Ollama: writing speed (typed in)." in out
    assert "80 % of the about 56 tokens per second" in out and "in range" in out
    assert "do not count" in out
    code, out = felab("enter", "llamacpp", "70")  # above 56: kept, flagged, with the causes
    assert code == 0, out
    assert "Kept, but flagged: 70.0 tokens per second is 126 %" in out
    assert "above the physical limit" in out and "prompt tokens were counted" in out
    code, out = felab("enter", "mlx", "20", "ms/token")  # converted: 1000 ÷ 20 = 50
    assert code == 0, out
    assert "20 ms per token = 50.0 tokens per second" in out and "90 %" in out

    entered = numbers("entered")
    assert [(n.server, n.value, n.field_key) for n in entered] == [
        ("ollama", 44.6, "d02.num.ollama-writing"),
        ("llamacpp", 70.0, "d02.num.llamacpp-writing"),
        ("mlx", 50.0, "d02.num.mlx-writing"),
    ]
    assert [n.model for n in entered] == [
        "llama3.1:8b",
        "llama-3.1-8b-q4.gguf",
        "Llama-3.1-8B-4bit",
    ]

    code, out = felab("show")
    assert code == 0, out
    assert "Day 2: your numbers" in out
    lines = out.splitlines()
    ollama = next(line for line in lines if "Ollama: writing speed" in line)
    assert "44.6 tok/s" in ollama and "about 56 tok/s" in ollama and "entered 80 %" in ollama
    assert "typed in only" in ollama
    cpp = next(line for line in lines if "llama.cpp: writing speed" in line)
    assert "entered 126 %" in cpp and "entered: above the speed limit" in cpp
    mlx = next(line for line in lines if "MLX: writing speed" in line)
    assert "50.0 tok/s" in mlx and "entered: very close to the limit" in mlx
    assert "llama.cpp: writing speed: Entered: 70.0 tokens per second is 126 %" in out
    assert "Done when: One timing script (felab bench) has measured all three servers" in out
    assert "Not yet: still to measure with felab: ollama, llamacpp, mlx" in out
    assert "typed-in figures for ollama, llamacpp, mlx are kept but do not count" in out


def test_show_before_anything_gives_the_courses_hints() -> None:
    code, out = felab("show", "--day", "2")
    assert code == 0, out
    assert "hint: Day 1's sample Ollama row measured 44.6 tokens per second" in out
    assert "273 GB/s ÷ 4.9 GB ≈ 56 tokens per second" in out
    assert "Not yet" in out


def test_enter_without_machine_or_model_still_records_and_says_what_is_missing() -> None:
    code, out = felab("enter", "ollama", "44.6 tok/s")
    assert code == 0, out
    assert "does not know your machine yet" in out
    code, out = felab("machine", "--bandwidth", "273")
    assert code == 0 and "Machine: given by bandwidth, 273 GB/s." in out
    code, out = felab("enter", "ollama", "44.6")
    assert code == 0 and "does not know the size of the model file ollama runs" in out
    assert len(numbers("entered")) == 2


# ----------------------------------------------------------------------------- import


def test_import_records_measured_rows_explains_skips_and_is_idempotent(tmp_path: Path) -> None:
    csv_path = tmp_path / "results" / "01-latency.csv"  # felab bench's default, in the tmp dir
    append_csv(
        csv_path,
        [
            row("ollama", "llama3.1:8b", "41.5"),
            row(
                "ollama",
                "llama3.1:8b",
                "120.3",
                concurrency="4",
                preset="day2+custom",
                timestamp="2026-03-03T10:02:00+00:00",
            ),
            row("llamacpp", "llama-3.1-8b-q4.gguf", "43.0", timestamp="2026-03-03T10:05:00+00:00"),
            row("mlx", "Llama-3.1-8B-4bit", "52.1", timestamp="2026-03-03T10:10:00+00:00"),
            row("mlx", "Llama-3.1-8B-4bit", "", timestamp="2026-03-03T10:12:00+00:00"),
            row("ollama", "llama3.1:8b", "40.0", preset=""),
            row("lmstudio", "some-model", "40.0"),
            row("mlx", "", "50.0"),
        ],
    )
    code, out = felab("import")
    assert code == 2 and "line 8: 'lmstudio' is not a server felab knows" in out
    assert "nothing was stored" in out and "--skip-invalid" in out and count(m.BenchResult) == 0
    code, out = felab("import", "--skip-invalid")
    assert code == 0, out
    assert "line 2: ollama llama3.1:8b (preset day2): recorded 41.5 tok/s" in out
    assert "line 3: ollama llama3.1:8b (preset day2+custom): result only: 4 users at once" in out
    assert "line 4: llamacpp llama-3.1-8b-q4.gguf (preset day2): recorded 43.0 tok/s" in out
    assert "line 5: mlx Llama-3.1-8B-4bit (preset day2): recorded 52.1 tok/s" in out
    assert "line 6:" in out and "result only: no writing speed in the row" in out
    assert "line 7:" in out and "skipped: no preset named" in out and "--preset day2" in out
    assert "line 8: lmstudio" in out and "'lmstudio' is not a server felab knows" in out
    assert "line 9:" in out and "skipped: no model named" in out
    assert "3 recorded, 2 result only, 3 skipped" in out
    # Three servers measured, but under three model names: not yet, and the service says why.
    assert "Not yet:" in out and "measured with another preset or model name" in out

    measured = numbers("measured")
    assert sorted((n.server, n.value, n.preset) for n in measured) == [
        ("llamacpp", 43.0, "day2"),
        ("mlx", 52.1, "day2"),
        ("ollama", 41.5, "day2"),
    ]
    assert count(m.BenchResult) == 5 and count(m.BenchJob) == 5  # one job per bench run

    code, out = felab("import", str(csv_path), "--skip-invalid")
    assert code == 0, out
    assert "Already imported, not recorded again: 5 row(s) (line 2, 3, 4, 5, 6)." in out
    assert "Nothing new from" in out and "recorded" not in out.replace("not recorded", "")
    assert len(numbers("measured")) == 3 and count(m.BenchResult) == 5

    # The same model on three servers: one label each (the name comes from the measured run).
    for server in ("ollama", "llamacpp", "mlx"):
        code, out = felab("model", server, "--bytes", "4.9GB", "--label", "llama-3.1-8b-q4")
        assert code == 0, out
    assert "mlx runs Llama-3.1-8B-4bit, a 4.9 GB file, labelled llama-3.1-8b-q4." in out
    felab("machine", "--chip", "M4 Pro")
    code, out = felab("show")
    assert code == 0, out
    ollama = next(line for line in out.splitlines() if "Ollama: writing speed" in line)
    assert "41.5 tok/s" in ollama and "measured 74 %" in ollama and "typed in only" not in ollama
    assert "day2 llama3.1:8b" in out
    assert (
        "Done: all measured with one preset and model (preset day2, model llama-3.1-8b-q4): "
        "llamacpp 43.0 tok/s, mlx 52.1 tok/s, ollama 41.5 tok/s." in out
    )


def test_a_model_that_is_a_formula_is_refused_and_an_older_one_shown_as_text(
    tmp_path: Path,
) -> None:
    """Eighteenth sweep (a2) M6: a model "@SUM(1+1)*cmd|' /C calc'!A0" was imported and written
    raw into `numbers show -o csv`; '@cf/...' (Cloudflare's) is a model name."""
    dde = "@SUM(1+1)*cmd|' /C calc'!A0"
    csv_path = tmp_path / "dde.csv"
    append_csv(csv_path, [row("ollama", dde)])
    code, out = felab("import", str(csv_path))
    assert code == 2 and "the result row's model begins with '@', a spreadsheet formula" in out
    append_csv(cf := tmp_path / "cf.csv", [row("ollama", "@cf/meta/llama-3.1-8b")])
    code, out = felab("import", str(cf))
    assert code == 0, out
    with session_scope(default_sessions()) as s:  # as an older felab had stored it
        for number in s.scalars(select(m.Number)):
            number.model = dde
    code, out = felab("show", "-o", "csv")
    assert code == 0 and f"'{dde}" in out and f",{dde}" not in out, out
    code, out = felab("show", "-o", "json")
    assert code == 0 and '"measured_model": "@SUM(1+1)' in out, out


def test_import_appended_rows_adds_only_the_new_ones(tmp_path: Path) -> None:
    csv_path = tmp_path / "runs.csv"
    append_csv(csv_path, [row("ollama", "llama3.1:8b", "41.5")])
    code, out = felab("import", str(csv_path))
    assert code == 0 and "1 recorded" in out
    append_csv(
        csv_path, [row("ollama", "llama3.1:8b", "42.0", timestamp="2026-03-04T09:00:00+00:00")]
    )
    code, out = felab("import", str(csv_path))
    assert code == 0, out
    assert "line 3: ollama llama3.1:8b (preset day2): recorded 42.0 tok/s" in out
    assert "Already imported, not recorded again: 1 row(s) (line 2)." in out
    assert [n.value for n in numbers("measured")] == [41.5, 42.0]


def test_import_reads_a_file_saved_with_a_byte_order_mark(tmp_path: Path) -> None:
    """A spreadsheet's "CSV UTF-8" save starts with a BOM: the first column is still timestamp."""
    csv_path = tmp_path / "saved.csv"
    append_csv(csv_path, [row("ollama", "llama3.1:8b", "41.5")])
    csv_path.write_text(csv_path.read_text(encoding="utf-8"), encoding="utf-8-sig")
    assert csv_path.read_bytes().startswith(b"\xef\xbb\xbf")
    code, out = felab("import", str(csv_path))
    assert code == 0 and "1 recorded" in out, out
    [number] = numbers("measured")
    assert number.recorded_at.date() == date(2026, 3, 3)  # the row's time, not the import's
    append_csv(
        csv_path, [row("ollama", "llama3.1:8b", "42.0", timestamp="2026-03-04T09:00:00+00:00")]
    )
    code, out = felab("import", str(csv_path))
    assert code == 0 and "1 row(s) (line 2)" in out, out


def test_import_refuses_what_is_not_a_results_file(tmp_path: Path) -> None:
    code, out = felab("import")
    assert code == 2 and "no results file at" in out and "felab bench" in out
    other = tmp_path / "other.csv"
    other.write_text("name,speed\nollama,44.6\n")
    code, out = felab("import", str(other))
    assert code == 2 and "not a results file written by `felab bench`" in out
    assert "server, model, preset, concurrency, writing_tps_p50" in out
    empty = tmp_path / "empty.csv"
    append_csv(empty, [])
    code, out = felab("import", str(empty))
    assert code == 0 and "has no rows yet" in out
    assert numbers() == []


def test_import_refuses_a_file_lacking_any_column_felab_writes(tmp_path: Path) -> None:
    """Thirteenth sweep H3: a hand-typed five-column file was stored as a measured run (each
    check of an edited row reads a column, and skipped itself when the column was missing)."""
    typed = tmp_path / "typed.csv"
    typed.write_text("server,model,preset,concurrency,writing_tps_p50\nllamacpp,m,day2,1,41.5\n")
    code, out = felab("import", str(typed))
    said = " ".join(out.split())
    assert code == 2 and "lacks the column(s) timestamp, host, target" in said, out
    full = ",".join(CSV_COLUMNS)
    spaced = tmp_path / "spaced.csv"  # one header with a trailing space: its column is missing
    spaced.write_text(
        full.replace("host,", "host ,", 1) + "\n" + ",".join(row("ollama", "m").values()) + "\n"
    )
    code, out = felab("import", str(spaced))
    assert code == 2 and "lacks the column(s) host" in " ".join(out.split()), out
    assert numbers() == []


def test_import_refuses_columns_felab_never_writes_naming_them(tmp_path: Path) -> None:
    """Eighteenth sweep (a2) H7: 200 extra columns of 130,000 characters were stored with the
    row (26 MB), and exported again."""
    joined = tmp_path / "joined.csv"
    extra = [f"x{i}" for i in range(7)]
    joined.write_text(
        ",".join([*CSV_COLUMNS, *extra])
        + "\n"
        + ",".join([*row("ollama", "m").values(), *["y" * 1000] * len(extra)])
        + "\n"
    )
    code, out = felab("import", str(joined))
    said = " ".join(out.split())
    assert code == 2, out
    assert "has the column(s) 'x0', 'x1', 'x2', 'x3', 'x4' and 2 more that `felab bench`" in said
    assert "delete those columns" in said and count(m.BenchResult) == 0


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("fast", "could not read 'fast' as a writing speed"),
        ("-3", "must be more than zero"),
        ("0", "must be more than zero"),
        ("1e9", "beyond any single conversation"),
        ("1000000000", "beyond any single conversation"),
        ("33 words/s", "not words"),
    ],
)
def test_nonsense_speeds_get_the_services_message_and_exit_2(value: str, message: str) -> None:
    code, out = felab("enter", "ollama", value)
    assert code == 2, out
    assert message in out
    assert numbers() == []


def test_other_bad_input_exits_2_with_a_clear_line() -> None:
    cases = [
        (("enter", "lmstudio", "40"), "use one of ollama, llamacpp, mlx"),
        (("machine", "--chip", "M4 Pro", "--bandwidth", "273"), "give the machine one way"),
        (("machine", "--chip", "M9 Ultra"), "not in felab's bandwidth table"),
        (("machine", "--bandwidth", "fast"), "as a memory bandwidth"),
        (("model", "ollama", "--bytes", "4.9GB"), "does not know which model ollama runs"),
        (("model", "ollama", "--bytes", "lots", "--name", "m"), "lots"),
        (("show", "--day", "9"), "day 9 is not in the loaded content"),
        (("enter", "ollama", "40", "--member", "1001"), "--member needs --cohort"),
        (("show", "--member", "1001", "--cohort", "99"), "no cohort 99"),
        (("delete",), "run again with --yes"),
    ]
    for args, message in cases:
        code, out = felab(*args)
        assert code == 2, (args, out)
        assert message in out, (args, out)
    assert numbers() == [] and count(m.MemberServer) == 0


def test_member_and_cohort_pick_a_discord_member() -> None:
    with session_scope(default_sessions()) as s:
        cohort = create_cohort(s, "Spring", timezone="Europe/London", start_date=date(2026, 3, 2))
        add_member(s, cohort, "1001", display_name="Ada")
        cohort_id = cohort.id
    code, out = felab("enter", "mlx", "61.2", "--member", "1001", "--cohort", str(cohort_id))
    assert code == 0, out
    code, out = felab("show", "--member", "1001", "--cohort", str(cohort_id))
    assert code == 0 and "61.2 tok/s" in out
    code, out = felab("show")  # the terminal's own learner has nothing yet
    assert code == 0 and "61.2" not in out
    with session_scope(default_sessions()) as s:
        owners = s.scalars(select(m.Member.discord_id).join(m.Number)).all()
    assert owners == ["1001"]


# ----------------------------------------------------------------------------- privacy


def test_privacy_export_and_delete(tmp_path: Path) -> None:
    assert felab("machine", "--chip", "M4 Pro")[0] == 0
    assert felab("model", "ollama", "--bytes", "4.9GB", "--name", "llama3.1:8b")[0] == 0
    assert felab("enter", "ollama", "44.6")[0] == 0
    append_csv(tmp_path / "runs.csv", [row("ollama", "llama3.1:8b", "41.5")])
    assert felab("import", str(tmp_path / "runs.csv"))[0] == 0

    code, out = felab("privacy")
    assert code == 0 and "Your numbers are public" in out
    code, out = felab("privacy", "--private")
    assert code == 0 and "private: kept off public leaderboards" in out
    with session_scope(default_sessions()) as s:
        assert s.scalar(select(m.Member.public_numbers)) is False

    target = tmp_path / "me.json"
    code, out = felab("export", str(target))
    assert code == 0, out
    assert "2 numbers" in out and "1 bench job," in out
    data = json.loads(target.read_text())
    assert data["format"] == "felab.member-export/1"
    assert data["member"]["chip"] == "M4 Pro" and data["member"]["public_numbers"] is False
    assert data["servers"][0]["model"] == "llama3.1:8b"
    assert sorted(n["source"] for n in data["numbers"]) == ["entered", "measured"]
    assert data["bench_results"][0]["row"]["writing_tps_p50"] == "41.5"
    assert felab("export", str(target))[0] == 0  # its own earlier export: replaced
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    code, out = felab("export", str(notes))
    assert code == 2 and "is not a felab numbers export" in out and "--force" in out
    assert notes.read_text() == "my notes\n"
    assert felab("export", str(notes), "--force")[0] == 0
    assert json.loads(notes.read_text())["format"] == "felab.member-export/1"
    code, out = felab("export", "-")
    assert code == 0 and json.loads(out)["numbers"]

    code, out = felab("delete")
    assert code == 2 and "--yes" in out and len(numbers()) == 2
    code, out = felab("delete", "--yes")
    assert code == 0, out
    assert "Deleted everything felab held about me: 2 numbers" in out
    assert "the member record" in out
    assert numbers() == [] and count(m.BenchJob) == 0 and count(m.BenchResult) == 0
    assert count(m.MemberServer) == 0 and count(m.Member) == 0


def test_show_in_every_format_says_the_same() -> None:
    assert felab("machine", "--chip", "M4 Pro")[0] == 0
    assert felab("model", "ollama", "--bytes", "4.9GB", "--name", "llama3.1:8b")[0] == 0
    assert felab("enter", "ollama", "44.6")[0] == 0
    shown = {f: runner.invoke(app, ["numbers", "show", "-o", f]) for f in ("json", "csv", "md")}
    assert all(r.exit_code == 0 for r in shown.values())
    records = json.loads(shown["json"].stdout)
    ollama = next(r for r in records if r["server"] == "ollama")
    assert (ollama["entered_tps"], ollama["limit_tps"], ollama["entered_pct"]) == (44.6, 55.71, 80)
    csv_lines = shown["csv"].stdout.splitlines()
    assert csv_lines[0].startswith("field,server,entered_tps,measured_tps")
    assert "Ollama: writing speed,ollama,44.6,,,,55.71,80,,typed in only" in csv_lines
    md = [line for line in shown["md"].stdout.splitlines() if line.startswith("|")]
    assert md[1].startswith("|---|") and "| Ollama: writing speed | 44.6 tok/s |" in md[2]
    assert "Done when" in shown["json"].stderr and "Done when" not in shown["json"].stdout


@pytest.mark.parametrize("name", ["me.csv", "me.CSV", "me.xlsx"])
def test_export_refuses_a_table_name_for_its_json(tmp_path: Path, name: str) -> None:
    """Eighteenth sweep (a2) L10: `numbers export me.csv` wrote JSON under a .csv name."""
    code, out = felab("export", str(tmp_path / name))
    said = " ".join(out.split())
    assert code == 2 and "writes JSON, and the name ends in ." in said and "name it .json" in said
    assert not (tmp_path / name).exists()
    code, out = felab("export", str(tmp_path / "me.json"))
    assert code == 0, out


def test_a_small_model_file_is_said_in_its_own_unit() -> None:
    """Twentieth sweep (a2) A2-14: a 1 MB model read 'a 0.0 GB file' in its speed limit."""
    assert felab("machine", "--chip", "M4 Pro")[0] == 0
    code, out = felab("model", "vllm", "--name", "tiny", "--bytes", "1MB")
    assert code == 0, out
    assert "Weights: tiny, a 1 MB file." in out and "0.0 GB" not in out
