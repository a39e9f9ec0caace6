"""A FELAB_*_DIR setting checked as it is read: every command then says a wrong one in the
same words, not only the command that first writes there."""

from __future__ import annotations

from pathlib import Path

from felab_core.files import blocking_file, expand_home
from felab_core.text import holds_hidden


def _not_a_folder(path: Path) -> str | None:
    """Why the folder `path` cannot be (or be made): it, or the nearest part of it there is, is
    a file or a device. None when it is a folder, or could become one."""
    try:
        if (above := blocking_file(path)) is None:
            return None
    except OSError:  # a part felab may not look into: the command that uses it says so
        return None
    if above == path:
        return f"{path} is not a folder (a file or a device): give a folder"
    return (
        f"{above} is not a folder (a file or a device), so no folder can be made under it: give "
        "a folder"
    )


def checked_folder(value: object) -> object:
    """A folder setting's value, ~ expanded, or a ValueError saying what is wrong with it:
    empty, holding control characters, or a file where the folder should be (FELAB_CACHE_DIR
    set to a file had `felab lab where` say "not installed" and exit 0)."""
    if isinstance(value, str) and not value.strip():
        raise ValueError("is empty: give a folder")  # "or unset it": said after
    if isinstance(value, str) and holds_hidden(value):  # had been blamed on the database URL
        raise ValueError(
            "holds control or invisible characters (a pasted line?): give the folder's path plainly"
        )
    value = expand_home(value)
    if isinstance(value, str | Path):
        problem = _not_a_folder(Path(value))
        if problem is not None:
            raise ValueError(problem)
    return value
