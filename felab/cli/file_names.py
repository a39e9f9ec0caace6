"""A file named with a folder's trailing '/' (`--json out/`, `numbers import runs.csv/`) is
refused unless that folder exists.

A path library drops the slash, so `--json results/` would quietly write a file called
`results` where the person meant a folder, and `x.csv/` would read x.csv. A folder that exists
is left to each command (some take one; the rest say it is a folder). Options that name a
folder to create use felab.cli.folders, not a file type, so they are not touched here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from typer import _click as click  # typer's own copy of click: its commands are these
from typer._click.exceptions import BadParameter
from typer.core import TyperGroup

_MARK = "_felab_refuses_folder_mark"


def _names_a_file(param: click.Parameter) -> bool:
    """A parameter typed as a path with no parser of its own (folder options have one)."""
    desc = getattr(param, "type_descriptor", None)
    return desc is not None and bool(desc.is_path) and desc.parameter_info.parser is None


def refuse_folder_marks(cmd: click.Command) -> None:
    """Make every file-typed parameter of `cmd` (and of the commands under a group) refuse a
    value that ends in a separator and names no existing folder."""
    if isinstance(cmd, TyperGroup):
        for sub in cmd.commands.values():
            refuse_folder_marks(sub)
        return
    for param in cmd.params:
        if not _names_a_file(param) or getattr(param, _MARK, False):
            continue
        process = param.process_value

        def checked(
            ctx: click.Context, value: Any, param: Any = param, process: Any = process
        ) -> Any:
            if isinstance(value, str) and not value.strip():  # Path('') is '.', the folder
                raise BadParameter("is empty: give a file's name", ctx=ctx, param=param)
            if (
                isinstance(value, str)
                and len(value) > 1
                and value.endswith(("/", os.sep))
                and not Path(value).is_dir()
            ):
                bare = value.rstrip("/" + os.sep)
                raise BadParameter(
                    f"{value} ends in '/', a folder's mark, but {bare} is a file: name it "
                    "without the '/'"
                    if bare and Path(bare).is_file()
                    else f"{value} ends in '/', a folder's mark, but there is no such folder: "
                    "name a file without the '/', or create the folder first",
                    ctx=ctx,
                    param=param,
                )
            return process(ctx, value)

        param.process_value = checked  # type: ignore[method-assign]
        setattr(param, _MARK, True)
