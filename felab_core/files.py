"""Reading a file a person named: a regular file, of a size that fits what it should hold.

A path can name a device (/dev/zero never ends), a FIFO (waits for a writer), a folder, or a
file far larger than any targets file, config or trace: read whole, each would hang felab or
fill its memory. `read_named_file` looks before it reads and says which of these it is.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from felab_core.text import holds_hidden, with_hidden_shown

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


#: The first 16 bytes of every SQLite database file: felab's own, or a backup of it.
SQLITE_MAGIC = b"SQLite format 3\x00"


class NamedFileError(ValueError):
    """The named file cannot be what it should be; the message names it and says why."""

    def __init__(self, path: Path, reason: str) -> None:
        # A path's (or a link target's) escape codes or newlines would act on the terminal the
        # message reaches: each shows as '?'.
        super().__init__(with_hidden_shown(f"{path} {reason}"))
        self.path = path
        #: The message without the path, for lists that already show it.
        self.reason = reason


def refuse_special(path: Path, *, what: str, to_write: bool = False) -> os.stat_result | None:
    """Refuse a path naming a folder, a device or a pipe; its stat when it is a regular file,
    None when nothing is there (the caller says what a missing file means for it).

    Read, a device never ends and a FIFO waits for a writer; written, a device or a pipe would
    be replaced by the file (as root) or would swallow it. One check, one wording, everywhere a
    person names a path.
    """
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NamedFileError(
                path, "is a link that leads back to itself (a loop of links): link to the file"
            ) from None
        raise NamedFileError(path, f"cannot be used: {exc.strerror or exc}") from None
    hint = f"give a file name for the {what}" if to_write else f"give the {what} itself"
    if stat.S_ISDIR(info.st_mode):
        raise NamedFileError(path, f"is a folder: {hint}")
    if not stat.S_ISREG(info.st_mode):
        raise NamedFileError(path, f"is not a regular file (a device or a pipe): {hint}")
    return info


def blocking_file(folder: Path) -> Path | None:
    """The file (or device) that stands where `folder` or a folder above it should be, so no
    folder can be made there; None when the nearest part there is a folder. The one rule behind
    every "X is not a folder" felab says: settings, the database, output paths."""
    above = next((p for p in (folder, *folder.parents) if p.exists()), None)
    return above if above is not None and not above.is_dir() else None


def make_folder_for(path: Path, *, what: str) -> None:
    """Make the folder `path` goes in when only that last folder is missing (backups/ beside
    the data); a deeper missing tree is a typo, and making it (/nonexistent/dir, as root) would
    hide it."""
    folder = path.parent
    if folder.is_dir():
        return
    if (above := blocking_file(folder)) is not None:  # mkdir -p would fail there too
        raise NamedFileError(
            above,
            f"is not a folder (a file or a device), so felab cannot make the {what} under it: "
            "choose another path",
        )
    if not folder.parent.is_dir():
        raise NamedFileError(
            folder.parent,
            f"does not exist, so felab will not make the {what} there: check the path, or "
            "make the folder first (mkdir -p)",
        )
    folder.mkdir(exist_ok=True)


def write_whole(path: Path, text: str) -> None:
    """Write `text` to `path` whole or not at all: into a file beside it, then renamed over it,
    so a failure leaves the file that was there (a memo cut off midway had left 0 bytes in
    place of the last one). A character UTF-8 cannot hold (a file name's byte that was not
    UTF-8) is written as '?', as the terminal shows it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8", errors="replace")
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def broken_link(path: Path) -> str | None:
    """Why a path that names nothing is a link gone wrong (a loop of links, or a link to
    nothing), as NamedFileError's reason; None when it is no such link. A loop otherwise reads
    as "does not exist", which sends a person looking for a file that is there."""
    if not path.is_symlink():
        return None
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a link that leads back to itself (a loop of links): link to the file"
        return f"is a link to {os.readlink(path)}, which does not exist: fix the link"
    return None


def read_named_bytes(path: Path, *, what: str, limit: int) -> bytes:
    """The file's bytes, refusing anything but a regular file of at most `limit` bytes."""
    info = refuse_special(path, what=what)
    if info is None:
        if (link := broken_link(path)) is not None:
            raise NamedFileError(path, link)
        if (above := blocking_file(path.parent)) is not None:
            raise NamedFileError(path, f"cannot exist: {above} is a file, not a folder")
        raise NamedFileError(path, f"does not exist: give the path of the {what}")
    if info.st_size > limit:
        raise NamedFileError(
            path,
            f"is {info.st_size:,} bytes: a {what} is at most {limit:,}; is this the right file?",
        )
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise NamedFileError(path, f"cannot be read: {exc.strerror or exc}") from None
    if len(data) > limit:  # it grew while being read
        raise NamedFileError(path, f"is over {limit:,} bytes: a {what} is at most that")
    return data


def read_named_text(path: Path, *, what: str, limit: int) -> str:
    """The file as UTF-8 text (a byte-order mark is fine), or a NamedFileError saying where
    it is not."""
    data = read_named_bytes(path, what=what, limit=limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise NamedFileError(
            path, f"is not UTF-8 text (byte {exc.start}): save the {what} as UTF-8"
        ) from None


def _same(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
        return a.resolve() == b.resolve()
    except OSError:
        return False


#: Kinds of file felab writes and knows again by their first bytes: writing one kind over
#: another destroys it (a JSON record over the results CSV, a backup over an export).
SQLITE_DATABASE = "an SQLite database (felab's, or a backup)"
RESULTS_CSV = "felab's results CSV"
BENCH_RECORD = "a felab bench record (JSON)"
MEMO = "a felab memo (Markdown)"
MEMO_CHART = "a felab memo chart"
COMPARE_CHART = "a felab compare chart"
MEMBER_EXPORT = "a felab numbers export (JSON)"
#: What each command's charts carry as their Software (PNG) or Creator (SVG, PDF) metadata, so
#: a second run knows its own chart again and replaces it, and nothing else (not another
#: command's chart: a compare chart over a memo's would leave the memo showing it).
CHART_CREATORS = {MEMO_CHART: "felab memo", COMPARE_CHART: "felab compare"}


def chart_metadata(kind: str, fmt: str) -> dict[str, str | None]:
    """What matplotlib writes into a chart of `kind` in `fmt` (png, svg, pdf): the creator, and
    no date (the same chart, the same bytes)."""
    creator = CHART_CREATORS[kind]
    by_format: dict[str, dict[str, str | None]] = {
        "png": {"Software": creator},
        "svg": {"Date": None, "Creator": creator},
        "pdf": {"CreationDate": None, "Creator": creator},
    }
    return by_format[fmt]


def kind_of(path: Path) -> str | None:
    """Which of felab's own kinds of file `path` holds, from its first (and, for a PDF, last)
    bytes; None for any other file (or an unreadable one: the write itself will say why)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
            tail = b""
            if head.startswith(b"%PDF"):  # its metadata is at the end
                fh.seek(max(0, os.fstat(fh.fileno()).st_size - 4096))
                tail = fh.read(4096)
    except OSError:
        return None
    if head.startswith(SQLITE_MAGIC):
        return SQLITE_DATABASE
    for chart, creator in CHART_CREATORS.items():
        mark = creator.encode()
        if head.startswith(b"\x89PNG") and b"Software\x00" + mark in head:
            return chart
        if head.startswith(b"%PDF") and b"/Creator (" + mark + b")" in tail:
            return chart
    text = head.decode("utf-8", "replace").lstrip("\ufeff")
    if text.startswith("timestamp,host,target,"):
        return RESULTS_CSV
    if text.lstrip().startswith("{") and '"felab.bench/' in text[:256]:
        return BENCH_RECORD
    if text.lstrip().startswith("{") and '"felab.member-export/' in text[:256]:
        return MEMBER_EXPORT
    for chart, creator in CHART_CREATORS.items():
        if "<svg" in text and f"<dc:title>{creator}</dc:title>" in text:
            return chart
    if text.startswith("# ") and "Written by `felab memo`" in text[:2048]:
        return MEMO
    return None


def refuse_overwrite(
    path: Path,
    *,
    what: str,
    inputs: Iterable[tuple[Path | None, str]] = (),
    writes: str | None = None,
    replaces_others: bool = False,
) -> None:
    """Refuse writing `what` to `path` where it would destroy something: a file of one of
    felab's kinds other than the one written (`writes`: a backup replaces an earlier backup, a
    record a record; nothing replaces the database or the results CSV), any other file that is
    not empty when `writes` names the kind written (a person's notes named by a typo), unless
    `replaces_others` (the caller asked with --force, or appends rather than replaces), or a
    file this command reads or writes as something else (`--json` onto the `--csv` history,
    `--out` onto the results it reads). Also a link (the file would land wherever it points),
    a name with control characters (a newline pasted into it) and a folder, device or pipe.
    """
    if holds_hidden(str(path)):
        raise NamedFileError(
            path,
            "holds control characters or bytes that are not UTF-8 (a pasted newline?): give a "
            "plain name",
        )
    if path.is_symlink():
        raise NamedFileError(
            path,
            f"is a link (to {os.readlink(path)}): felab writes no {what} through a link, "
            "where it would replace whatever the link points to; give the file's own path",
        )
    info = refuse_special(path, what=what, to_write=True)
    for other, role in inputs:
        if other is not None and _same(path, other):
            raise NamedFileError(
                path, f"is also the {role}: the {what} would replace it; give another name"
            )
    held = kind_of(path) if info is not None and info.st_size > 0 else None
    if held is not None and held != writes:
        raise NamedFileError(path, f"is {held}: the {what} would replace it; give another name")
    if held is None and info is not None and info.st_size > 0 and writes and not replaces_others:
        raise NamedFileError(
            path,
            f"already exists and is not {writes}: the {what} would replace it; move it aside "
            "or give another name",
        )


def expand_home(value: object) -> object:
    """A path setting's leading ~ expanded, as a shell would have: an .env file, Compose or
    systemd expand none, and FELAB_DATA_DIR='~/felab' had made a folder named '~' in whatever
    folder the command ran in (twentieth sweep, b B21)."""
    if not (isinstance(value, str) and value.startswith("~")):
        return value
    try:
        return str(Path(value).expanduser())
    except RuntimeError:  # ~name of no user, or no home to expand ~ to
        head = with_hidden_shown(value.split("/")[0][:40])
        raise ValueError(
            f"starts with {head}, a home folder felab cannot find: write the full path"
        ) from None
