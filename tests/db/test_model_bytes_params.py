"""`felab numbers model SERVER --bytes 8b`: a parameter count, said as one (it had been read as
8 bytes and refused as a size below any model file)."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session

from felab_core.db import models as m
from felab_core.errors import Invalid
from felab_core.people.members import set_server_model


def test_a_parameter_count_for_the_model_file_is_said_as_one(
    db: Session, student: m.Member
) -> None:
    with pytest.raises(Invalid) as exc:
        set_server_model(db, student, "mlx", "llama3.1:8b", model_bytes="8b")
    text = str(exc.value)
    assert "--bytes 8b is 8 bytes, no model file; it reads like 8 billion parameters" in text, text
    assert "--bits-per-weight" not in text  # this command has no --model
