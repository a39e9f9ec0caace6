"""Sizing: the course's serving arithmetic (KV cache, capacity, slots, speed limit), done exactly.

Each module answers one question and returns a result object that carries its numbers and a
plain-words explanation a student can read. Bad input raises `SizingError` with a message that
says what was wrong and what to do.
"""

from felab_core.sizing.errors import SizingError

__all__ = ["SizingError"]
