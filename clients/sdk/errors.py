"""The SDK's errors: one base for referee refusals and the SDK's own failures.

A wire message the SDK cannot read raises the wire's `WireError` (exported here as `ConvertError`).
"""

from __future__ import annotations


class SdkError(Exception):
    """Base of every error the bot SDK raises; the message says what happened and what to check."""


class RefereeError(SdkError):
    """The referee ended the stream with an error status (bad token, finished table, protocol error).

    `code` is the gRPC status code name (for example `UNAUTHENTICATED`), `details` the referee's message.
    """

    def __init__(self, code: str, details: str, *, what: str = "the referee") -> None:
        super().__init__(f"{what} ended the stream with {code}: {details or 'no details'}")
        self.code = code
        self.details = details


class NoAction(SdkError):
    """Raised by a bot's `decide` that could not choose an action and has logged why (the stdio bridge, on an
    answer line it cannot read): the SDK answers the referee with no action, a fault, and logs no traceback."""
