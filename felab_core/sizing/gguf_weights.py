"""A GGUF's weights, one reading for every command: the tensors it lists, held to the file's size.

`felab memo --gguf` had divided the bandwidth by the file's size on disk while `size limit`
divided by its tensors' sum: 10,000x apart for a padded file, or a file named as a shard of a
split model. Both now read the tensors, through `gguf_weights`, and the file's size (all its
shards) is held to their sum: a file smaller than its tensors is cut short, and one far larger
holds something besides the weights. Either is refused with both figures named.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

from felab_core.sizing.errors import SizingError
from felab_core.sizing.gguf_shape import gguf_file_bytes
from felab_core.sizing.shape import ModelShape
from felab_core.sizing.speed_limit import weights_for
from felab_core.sizing.units import MB, both_ways
from felab_core.text import with_hidden_shown

#: What a GGUF holds beside its tensors: the header, the vocabulary (a few MB even for 256,000
#: tokens) and each tensor's alignment padding. More than this past the tensors, plus a tenth
#: of them, is not a model file's metadata.
METADATA_SLACK = 256 * MB
_SHARE_SLACK = Fraction(1, 10)


def file_size_problem(file_bytes: int, tensor_bytes: int | Fraction, where: str) -> str | None:
    """Why a GGUF of `file_bytes` on disk cannot hold tensors of `tensor_bytes`; None when it can.

    `where` names the file (and its shards) as the message shows it."""
    tensors = Fraction(tensor_bytes)
    if file_bytes < tensors:
        return (
            f"{where} is {both_ways(file_bytes)} on disk, but its tensors list "
            f"{both_ways(tensors)}: the file is cut short (a download that stopped?); download "
            "it again, or give the model's size with --model-bytes"
        )
    if file_bytes > tensors * (1 + _SHARE_SLACK) + METADATA_SLACK:
        return (
            f"{where} is {both_ways(file_bytes)} on disk, but its tensors hold only "
            f"{both_ways(tensors)}: the rest is not weights (padding, data after them, or shards "
            "named for another split); check the file, or give the size a token reads with "
            "--model-bytes"
        )
    return None


def gguf_weights(
    shape: ModelShape, path: str | Path, bits_per_weight: Fraction | None = None
) -> tuple[Fraction, str]:
    """Bytes a token reads from a GGUF (its tensors; a mixture's active experts) and the note,
    as `weights_for` gives them, once the file's size on disk agrees with its tensors."""
    weights, note = weights_for(shape, bits_per_weight)
    if shape.weights_bytes:
        where = with_hidden_shown(str(path))
        problem = file_size_problem(gguf_file_bytes(path), shape.weights_bytes, where)
        if problem:
            raise SizingError(problem)
    return weights, note
