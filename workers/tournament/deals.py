"""Match seeds nobody can know in advance: derived from a league's secret, committed to when it is created.

**The secret.** Every league gets 256 random bits (`new_secret`), kept in the database and never printed or
exported before the league finishes. `mus league create` prints `commitment(secret)`, the SHA-256 of the secret's
32 bytes, so the deals are fixed in advance: once the league finishes, the secret is revealed and anyone can check
that it hashes to the commitment and that every match's seed derives from it (`mus replay verify --league`).

**A match's seed** is the first candidate, for attempt = 0, 1, 2, ..., of

    HMAC-SHA256(key=secret, message=seed_message(league, deal_key, deal, attempt))[:8] as a big-endian
    unsigned integer, shifted right by one bit (63 bits, so it fits a signed 64-bit database column)

whose first dealer (`referee.engine.chance.first_dealer_of`) is the match's `first_dealer_target`. The message is
the UTF-8 text

    mus-arena/match-seed/v1\\n<league name>\\n<deal key>\\ndeal <deal>\\nattempt <attempt>

with `<deal key>` `pair:<duplicate_pair>` for the twins of a duplicate pair (both get the same seed) and
`match:<index>` for a match dealt on its own, and `<deal>` the match's deal number (0, then one more each time
the match is replayed on a fresh deal). League names never contain a newline, so the message is unambiguous.

**Why a seat cannot recover it.** The engine's seeded streams (`random.Random("mus/deal/<seed>/<hand>")`) are
fixed by the seed, so a seed that could be guessed could be checked against a seat's own cards: 31-bit league
seeds were. Here a seat would have to guess either the 63-bit seed itself (not derivable from the others, since
HMAC-SHA256 is a pseudo-random function of the 256-bit secret) or the secret.

**The first dealer** of a match is public: `first_dealer_target(slot, pairings)`, with `slot` the duplicate pair
id (or `index // 2` for a match dealt on its own) and `pairings` the league's number of pairings, is the
`(pairing + round) % 4` of the schedule (`workers/tournament/schedule.py`), so the mano stays balanced. It
leaves the operator no choice: `verify_seed` checks it too.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from itertools import count

from referee.engine.chance import first_dealer_of
from workers.tournament.errors import TournamentError

SECRET_BYTES = 32
"""256 bits."""

SEED_MESSAGE_PREFIX = "mus-arena/match-seed/v1"


def new_secret() -> bytes:
    """A fresh league secret: 32 bytes from the operating system's CSPRNG."""
    return secrets.token_bytes(SECRET_BYTES)


def commitment(secret: bytes) -> str:
    """The public commitment to a secret: the SHA-256 of its bytes, as hex (`sha256sum` of the raw bytes)."""
    _check_secret(secret)
    return hashlib.sha256(secret).hexdigest()


def parse_secret(text: str) -> bytes:
    """A secret as stored and revealed (64 hex digits) back to its bytes."""
    try:
        secret = bytes.fromhex(text)
    except (TypeError, ValueError):
        raise TournamentError("a league secret is 64 hex digits") from None
    _check_secret(secret)
    return secret


def deal_key(*, duplicate_pair: int | None, index: int) -> str:
    """What identifies a match's deals within its league: its duplicate pair (shared by the twins) or its index."""
    return f"pair:{duplicate_pair}" if duplicate_pair is not None else f"match:{index}"


def deal_slot(*, duplicate_pair: int | None, index: int) -> int:
    """The schedule slot the match's first dealer is fixed by: its pair id, else `index // 2`."""
    return duplicate_pair if duplicate_pair is not None else index // 2


def first_dealer_target(slot: int, pairings: int) -> int:
    """The first dealer of the schedule's slot: `(pairing + round) % 4` (see `schedule.py`)."""
    if pairings < 1 or slot < 0:
        raise TournamentError(f"no first dealer for slot {slot} of {pairings} pairings")
    return (slot % pairings + slot // pairings) % 4


def seed_message(league: str, key: str, deal: int, attempt: int) -> bytes:
    """The HMAC message of one candidate seed (see the module docstring)."""
    if "\n" in league or "\n" in key:
        raise TournamentError("a league name or deal key cannot contain a newline")
    return f"{SEED_MESSAGE_PREFIX}\n{league}\n{key}\ndeal {deal}\nattempt {attempt}".encode()


def match_seed(secret: bytes, *, league: str, key: str, deal: int, first_dealer: int) -> int:
    """The seed of a match's deal `deal`: the first HMAC candidate whose first dealer is `first_dealer`.

    Takes four candidates on average. Changing anything here changes every league's deals and breaks
    `mus replay verify` of the leagues already played: add a new message version instead.
    """
    _check_secret(secret)
    if deal < 0 or first_dealer not in range(4):
        raise TournamentError(f"no seed for deal {deal} with first dealer {first_dealer}")
    for attempt in count():
        digest = hmac.new(secret, seed_message(league, key, deal, attempt), hashlib.sha256).digest()
        seed = int.from_bytes(digest[:8], "big") >> 1
        if first_dealer_of(seed) == first_dealer:
            return seed
    raise AssertionError("unreachable: count() never ends")


def derived_seed(
    secret: bytes, *, league: str, duplicate_pair: int | None, index: int, deal: int, pairings: int
) -> int:
    """The seed of a match (by its identity in the league) on its deal number `deal`."""
    target = first_dealer_target(deal_slot(duplicate_pair=duplicate_pair, index=index), pairings)
    key = deal_key(duplicate_pair=duplicate_pair, index=index)
    return match_seed(secret, league=league, key=key, deal=deal, first_dealer=target)


def _check_secret(secret: bytes) -> None:
    if not isinstance(secret, bytes) or len(secret) != SECRET_BYTES:
        raise TournamentError(f"a league secret is {SECRET_BYTES} bytes")
