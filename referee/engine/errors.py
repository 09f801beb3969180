"""The engine's errors: one base, with malformed input kept apart from actions that are illegal now."""

from __future__ import annotations


class MusError(ValueError):
    """Base of every error the rules engine raises on bad input."""


class MalformedError(MusError):
    """The input cannot mean anything in Mus: an unknown card, action, seña or option syntax."""


class RulesError(MusError):
    """A rules option is unknown, out of range, or unsupported in v1 (rules §14)."""


class IllegalActionError(MusError):
    """A well-formed action that is not legal now: wrong seat, wrong phase, or not in the legal set.

    The message names why and, where a seat was asked, what is legal.
    """


class MatchOverError(IllegalActionError):
    """The match has ended; nothing more can be applied."""
