"""The bytes one token reads, as the memo divides the bandwidth by them: the model file's size
when given, a GGUF's tensors (as `size limit` reads them, through one shared function), or the
model's weights from its tensors or its table entry and bits per weight.
"""

from __future__ import annotations

from fractions import Fraction

from felab_core.reports.memo.model import MemoError, MemoInputs
from felab_core.sizing import speed_limit
from felab_core.sizing.errors import SizingError
from felab_core.sizing.gguf_weights import gguf_weights
from felab_core.sizing.known_models import file_size_problem
from felab_core.sizing.shape import ModelShape
from felab_core.sizing.shape_agreement import Reading, hold_together
from felab_core.sizing.speed_limit import read_of_file  # a mixture of experts: the active share
from felab_core.sizing.units import MB, as_fraction, parse_model_bytes, size_text, tidy_text


def weights_read(inputs: MemoInputs, shape: ModelShape) -> tuple[Fraction, str]:
    """Bytes one token reads: the course divides by the file's size, so that comes first."""
    if inputs.model_bytes is not None:
        if isinstance(inputs.model_bytes, str):
            weights = parse_model_bytes(inputs.model_bytes)
        else:
            weights = Fraction(inputs.model_bytes)
        if weights < MB:
            raise MemoError(
                f"--model-bytes {inputs.model_bytes} is only {tidy_text(weights)} "
                f"{'byte' if weights == 1 else 'bytes'}; write the unit, e.g. --model-bytes 4.9GB"
            )
        # A model from the table has a known size: a file 1000x too small (1MB for an 8B model)
        # would raise the speed limit 1000x and hide every impossible figure.
        problem = (
            file_size_problem(inputs.model, int(weights))
            if inputs.model
            else _params_problem(shape, weights, inputs)
        )
        if problem:
            raise MemoError(problem)
        return read_of_file(shape, weights, f"the {size_text(weights)} model file, as given")
    if inputs.gguf is not None:  # its tensors, as `size limit` reads them, held to its size
        return gguf_weights(shape, inputs.gguf)
    bits = as_fraction(inputs.bits_per_weight) if inputs.bits_per_weight else None
    try:
        return speed_limit.weights_for(shape, bits)
    except SizingError:
        raise MemoError(
            f"the speed limit needs the bytes read per token, and the size of {shape.name}'s "
            "weights is unknown: pass --model-bytes with the model file's size (e.g. 4.9GB, "
            "as `ollama list` shows it), --gguf FILE, or --bits-per-weight"
        ) from None


def _params_problem(shape: ModelShape, weights: Fraction, inputs: MemoInputs) -> str | None:
    """--model-bytes held to --config/--gguf's own tensors, as `memo --model` holds it to the
    table's parameter count: --model-bytes 1GB beside 16.06 GB of tensors (1 bit a weight) had
    raised the speed limit 16x without a word. A file of 16-bit tensors' weights takes 1/11.4
    (1.4 bits a weight) to about 2.1x (34 bits) of their bytes."""
    if not shape.weights_bytes:
        return None  # a config.json alone: the typed size is the only one
    given = f"--config {inputs.config}" if inputs.config is not None else f"--gguf {inputs.gguf}"
    try:
        hold_together(
            "the model's size",
            Reading(weights, size_text(weights), "--model-bytes"),
            Reading(shape.weights_bytes, size_text(shape.weights_bytes), f"the tensors of {given}"),
            low=1 / 12,
            high=2.5,
            room="a file of these weights at 1.4 to 34 bits a weight lies between 1/12 and 2.5x "
            "of 16-bit tensors",
            then="leave --model-bytes out to read the tensors, or give the size `ls -l` shows "
            "of the file the server loads",
        )
    except SizingError as exc:
        return str(exc)
    return None
