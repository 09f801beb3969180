"""The SDK's errors: one base, with wire data the SDK cannot read kept apart from referee refusals."""

from __future__ import annotations


class SdkError(Exception):
    """Base of every error the bot SDK raises; the message says what happened and what to check."""


class ConvertError(SdkError, ValueError):
    """A wire message cannot be read as an engine value: an unset or unknown enum, a malformed card.

    It subclasses `ValueError` because it is bad input, like the engine's `MalformedError`.
    """


class RefereeError(SdkError):
    """The referee ended the stream with an error status (bad token, finished table, protocol error).

    `code` is the gRPC status code name (for example `UNAUTHENTICATED`), `details` the referee's message.
    """

    def __init__(self, code: str, details: str, *, what: str = "the referee") -> None:
        super().__init__(f"{what} ended the stream with {code}: {details or 'no details'}")
        self.code = code
        self.details = details
