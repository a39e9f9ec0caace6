"""felab_core.files: a path a person names is used only when it is a regular file that fits."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from felab_core.files import (
    BENCH_RECORD,
    COMPARE_CHART,
    MEMBER_EXPORT,
    MEMO,
    MEMO_CHART,
    MiB,
    NamedFileError,
    broken_link,
    chart_metadata,
    kind_of,
    read_named_bytes,
    read_named_text,
    refuse_overwrite,
    refuse_special,
    write_whole,
)


def test_refuse_special_lets_a_regular_file_and_a_missing_one_through(tmp_path: Path) -> None:
    regular = tmp_path / "a.csv"
    regular.write_text("x\n")
    info = refuse_special(regular, what="results CSV")
    assert info is not None and info.st_size == 2
    assert refuse_special(tmp_path / "missing.csv", what="results CSV") is None
    # A path under a regular file cannot exist either: the caller says what that means.
    assert refuse_special(regular / "below", what="results CSV") is None


def test_refuse_special_names_a_folder_a_pipe_and_a_device(tmp_path: Path) -> None:
    pipe = tmp_path / "a-pipe"
    os.mkfifo(pipe)
    with pytest.raises(NamedFileError, match="is a folder: give the results CSV itself"):
        refuse_special(tmp_path, what="results CSV")
    with pytest.raises(NamedFileError, match=r"not a regular file \(a device or a pipe\)"):
        refuse_special(pipe, what="results CSV")  # returns at once: a FIFO is never opened
    with pytest.raises(NamedFileError, match="give a file name for the backup"):
        refuse_special(Path("/dev/null"), what="backup", to_write=True)


def test_a_link_loop_and_a_dangling_link_are_said_as_links(tmp_path: Path) -> None:
    loop = tmp_path / "day-03.yaml"
    loop.symlink_to("day-03.yaml")
    dangling = tmp_path / "day-04.yaml"
    dangling.symlink_to("gone.yaml")
    with pytest.raises(NamedFileError, match="leads back to itself"):
        read_named_bytes(loop, what="pack", limit=100)
    with pytest.raises(NamedFileError, match=r"is a link to gone\.yaml, which does not exist"):
        read_named_bytes(dangling, what="pack", limit=100)
    assert broken_link(loop) is not None and "loop of links" in (broken_link(loop) or "")
    assert broken_link(tmp_path / "nothing") is None and broken_link(tmp_path) is None
    under = tmp_path / "day-05.yaml" / "x"
    (tmp_path / "day-05.yaml").write_text("a file")
    with pytest.raises(NamedFileError, match=r"cannot exist: .*day-05\.yaml is a file, not a"):
        read_named_bytes(under, what="pack", limit=100)


def test_read_named_refuses_what_is_too_big_and_what_is_not_utf8(tmp_path: Path) -> None:
    big = tmp_path / "big.toml"
    big.write_bytes(b"x" * (MiB + 1))
    with pytest.raises(NamedFileError, match="is 1,048,577 bytes: a targets file is at most"):
        read_named_bytes(big, what="targets file", limit=MiB)
    latin = tmp_path / "latin.toml"
    latin.write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(NamedFileError, match=r"not UTF-8 text \(byte 3\)"):
        read_named_text(latin, what="targets file", limit=MiB)
    bom = tmp_path / "bom.toml"
    bom.write_bytes(b"\xef\xbb\xbfa = 1\n")
    assert read_named_text(bom, what="targets file", limit=MiB) == "a = 1\n"
    with pytest.raises(NamedFileError, match="does not exist: give the path of the trace"):
        read_named_text(tmp_path / "none.jsonl", what="trace", limit=MiB)


def test_a_write_replaces_its_own_kind_and_no_one_elses_file(tmp_path: Path) -> None:
    """A typo in --json, --out or --chart must not replace a person's notes: an existing file
    that is not empty is replaced only when it is felab's file of the kind written."""
    notes = tmp_path / "notes.txt"
    notes.write_text("important notes\n")
    with pytest.raises(NamedFileError, match=r"is not a felab bench record .*move it aside"):
        refuse_overwrite(notes, what="JSON record", writes=BENCH_RECORD)
    refuse_overwrite(notes, what="export", writes=BENCH_RECORD, replaces_others=True)  # --force
    refuse_overwrite(notes, what="export")  # no kind named: the caller decides
    (tmp_path / "empty.json").touch()
    refuse_overwrite(tmp_path / "empty.json", what="JSON record", writes=BENCH_RECORD)
    record = tmp_path / "run.json"
    record.write_text('{"schema": "felab.bench/3", "runs": []}')
    refuse_overwrite(record, what="JSON record", writes=BENCH_RECORD)
    export = tmp_path / "me.json"
    export.write_text('{\n "format": "felab.member-export/1",\n "member": {}}')
    assert kind_of(export) == MEMBER_EXPORT
    refuse_overwrite(export, what="export", writes=MEMBER_EXPORT)
    with pytest.raises(NamedFileError, match="is a felab numbers export"):
        refuse_overwrite(export, what="JSON record", writes=BENCH_RECORD, replaces_others=True)
    memo = tmp_path / "memo.md"
    memo.write_text("# Llama on an M4\n\nWritten by `felab memo` from `r.csv`: 3 rows.\n")
    refuse_overwrite(memo, what="memo", writes=MEMO)
    with pytest.raises(NamedFileError, match="is a felab memo"):
        refuse_overwrite(memo, what="chart", writes=COMPARE_CHART)


@pytest.mark.parametrize("suffix", ["png", "svg", "pdf"])
def test_felab_knows_its_own_charts_again(tmp_path: Path, suffix: str) -> None:
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([1, 2])
    ours, theirs = tmp_path / f"ours.{suffix}", tmp_path / f"theirs.{suffix}"
    fig.savefig(ours, format=suffix, metadata=chart_metadata(COMPARE_CHART, suffix))
    fig.savefig(theirs, format=suffix)
    memo_chart = tmp_path / f"memo.{suffix}"
    fig.savefig(memo_chart, format=suffix, metadata=chart_metadata(MEMO_CHART, suffix))
    plt.close(fig)
    assert kind_of(ours) == COMPARE_CHART and kind_of(theirs) is None
    assert kind_of(memo_chart) == MEMO_CHART
    refuse_overwrite(ours, what="chart", writes=COMPARE_CHART)
    with pytest.raises(NamedFileError, match="is not a felab compare chart"):
        refuse_overwrite(theirs, what="chart", writes=COMPARE_CHART)
    with pytest.raises(NamedFileError, match="is a felab memo chart: the chart would replace"):
        refuse_overwrite(memo_chart, what="chart", writes=COMPARE_CHART)


def test_no_write_goes_through_a_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    link = tmp_path / "run.json"
    link.symlink_to(outside)
    with pytest.raises(NamedFileError, match=r"is a link .*give the file's own path"):
        refuse_overwrite(link, what="JSON record", writes=BENCH_RECORD)
    dangling = tmp_path / "chart.png"
    dangling.symlink_to(tmp_path / "nowhere" / "x.png")
    with pytest.raises(NamedFileError, match="is a link"):
        refuse_overwrite(dangling, what="chart", writes=COMPARE_CHART)


def test_one_missing_folder_is_made_a_missing_tree_is_not(tmp_path: Path) -> None:
    """Sixteenth sweep (b) F3 / fifteenth L15: /nonexistent/dir/x.db made the whole tree."""
    from felab_core.files import NamedFileError, make_folder_for

    make_folder_for(tmp_path / "backups" / "x.bak", what="backup")
    assert (tmp_path / "backups").is_dir()
    with pytest.raises(NamedFileError, match="does not exist, so felab will not make the backup"):
        make_folder_for(tmp_path / "no" / "tree" / "x.bak", what="backup")
    assert not (tmp_path / "no").exists()


def test_a_refusal_shows_a_paths_control_characters_as_question_marks(tmp_path: Path) -> None:
    """The message is printed to a terminal: an escape code in the path (or in a link's
    target) must not reach it raw."""
    bad = tmp_path / "x\x1b[31m" / "out.json"
    with pytest.raises(NamedFileError) as caught:
        refuse_overwrite(bad, what="record", writes=None)
    assert "\x1b" not in str(caught.value)
    assert "x?[31m" in str(caught.value)
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "t\x1b[2Jt.json")
    with pytest.raises(NamedFileError) as caught:
        refuse_overwrite(link, what="record", writes=None)
    assert "\x1b" not in str(caught.value)


def test_write_whole_leaves_the_old_file_when_the_write_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eighteenth sweep (c H2): a memo that failed midway had left 0 bytes where the last memo
    was. A character UTF-8 cannot hold is written as '?'."""
    path = tmp_path / "memo.md"
    path.write_text("the last memo\n")

    def refuse(self: Path, target: Path) -> Path:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(Path, "replace", refuse)
        with pytest.raises(OSError):
            write_whole(path, "the new memo\n")
    assert path.read_text() == "the last memo\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memo.md"]
    write_whole(path, "from \udcffhf\n")
    assert path.read_text() == "from ?hf\n"


@pytest.mark.parametrize(
    ("variable", "field"),
    [
        ("FELAB_DATA_DIR", "data_dir"),
        ("FELAB_CACHE_DIR", "cache_dir"),
        ("FELAB_TARGETS_FILE", "targets_file"),
        ("FELAB_BROKER_CA_FILE", "broker_ca_file"),
    ],
)
def test_a_path_settings_leading_tilde_is_the_home_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, field: str
) -> None:
    """Twentieth sweep (b) B21: FELAB_DATA_DIR='~/felab' (an .env file expands nothing) had
    made a folder named '~' wherever the command ran."""
    from pydantic import ValidationError

    from felab_core.settings import Settings

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv(variable, "~/felab")
    assert getattr(Settings(), field) == tmp_path / "felab"
    monkeypatch.setenv(variable, "~no-such-user-here/felab")
    with pytest.raises(ValidationError, match="~no-such-user-here, a home folder felab cannot"):
        Settings()
