"""The engine's Enum base: members hashed by identity, like any object compared by identity."""

from __future__ import annotations

import enum


class Enum(enum.Enum):
    """An `enum.Enum` whose members hash by identity.

    Members are singletons compared by identity, so identity hashing is consistent with equality. The engine and the
    referee key caches, sets and dicts by enum members at every decision, and `enum.Enum.__hash__` (the hash of
    the member's name, computed in Python) showed as the top function of the referee's profile. Neither hash is
    stable across processes (strings are hash-randomised), so no set order changes behaviour.
    """

    __hash__ = object.__hash__
