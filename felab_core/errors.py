"""The errors service functions raise: each message says what was wrong and what to do next.

The bot, the CLI and the workers catch `ServiceError` and show its message as it is.
"""

from __future__ import annotations


class ServiceError(ValueError):
    """A request the service cannot carry out as asked.

    `reason` is a short, fixed word for counting refusals (felab's metrics), never shown to
    anyone: the message is what people read."""

    def __init__(self, message: str = "", *, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or type(self).__name__.lower()


class NotFound(ServiceError):
    """The member, card, cohort or job named does not exist."""


class Invalid(ServiceError):
    """A value was given in a form felab cannot accept."""


class Forbidden(ServiceError):
    """The caller may not do this (a student acting as an instructor, rating their own answer)."""
