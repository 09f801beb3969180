"""The lobby: remote bots dial in with a bot token and are offered seats as tables are created for them.

A remote bot is registered by name with the SHA-256 of its token (the token itself is never stored). A table
seat marked remote is offered to one of that bot's connected lobby sessions with free capacity; the session
accepts (and gets `AssignmentConfirmed`, after which it joins the table's Play stream with the seat token) or
declines, or lets the offer lapse, and the seat is offered again. A seat nobody takes is absent when the
table's join timeout ends (rules §13 via the table's incident `absent`).

With a state file, the registrations (bot names and token hashes, never tokens) are written to it on every
change and read back at start, so a referee restart keeps them, and a revoked token stays revoked.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import os
import secrets
import tempfile
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mus.v1 import lobby_pb2
from referee import wire
from referee.service.table import Table, TableStatus

log = logging.getLogger(__name__)

DECLINE_RETRY_S = 1.0
"""How long a session that declined an offer is passed over for it. A remote bot declines at capacity, and its
capacity frees when one of its matches ends, which the lobby sees before the bot does: passed over for good, the
seat of a one-session bot was never offered again and the bot was charged `absent` (a newcomer's league with two
workers lost 2 of 4 matches so)."""

OFFER_RESPONSE_S = 10.0
"""How long a session has to accept or decline an offer."""

MAX_SESSIONS_PER_BOT = 8
"""Lobby sessions one bot may hold open at once; one more closes its oldest (`Lobby.connect`). A bot needs one (a
session takes up to 64 matches at once); uncapped, a review held all 4,096 of the referee's call slots with one
token, and no seat could join any table (stop 34)."""


MAX_CALLS_PER_BOT = 2 * MAX_SESSIONS_PER_BOT
"""Lobby calls of one bot the referee holds at once, sessions or not: past it the bot's next `Connect` is refused.
A session closed to make room ends only once its client has read what it was sent: a review's client kept its
receive window shut, and each closed session kept its call, and its call slot, for as long as the connection
lived; its 4,500 streams with one token held every slot of the referee (helper-84). An honest bot's closed
sessions end at once, so it never holds more than its MAX_SESSIONS_PER_BOT and a few that are ending."""


STATE_FORMAT = "mus-referee-state/1"
"""The `format` of a state file: `{"format": STATE_FORMAT, "remote_bots": {name: token_sha256, ...}}`."""


def token_sha256(token: str) -> str:
    """The hex SHA-256 under which a bot token is registered."""
    return hashlib.sha256(token.encode()).hexdigest()


def is_token_sha256(digest: str) -> bool:
    """Whether `digest` is 64 lowercase hex digits, the form a registration takes."""
    return len(digest) == 64 and all(char in "0123456789abcdef" for char in digest)


class StateError(ValueError):
    """A state file that cannot be read or written: the referee refuses to start rather than forget bots."""


def read_state(path: Path) -> dict[str, str]:
    """The registrations kept in a state file; none if the file does not exist yet."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as error:
        raise StateError(f"cannot read the state file {path}: {error}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise StateError(f"the state file {path} is not JSON: {error}") from None
    bots = data.get("remote_bots") if isinstance(data, dict) and data.get("format") == STATE_FORMAT else None
    if not isinstance(bots, dict) or not all(
        isinstance(name, str) and name and isinstance(digest, str) and is_token_sha256(digest)
        for name, digest in bots.items()
    ):
        raise StateError(
            f"the state file {path} is not a referee state file: expected "
            f'{{"format": "{STATE_FORMAT}", "remote_bots": {{NAME: TOKEN_SHA256, ...}}}}'
        )
    return dict(bots)


def write_state(path: Path, bots: dict[str, str]) -> None:
    """Replace the state file atomically (a new file, mode 0600, renamed over the old one): a crash mid-write
    leaves the old file or the new one, never half of one."""
    data = {"format": STATE_FORMAT, "remote_bots": dict(sorted(bots.items()))}
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # mode 0600
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            json.dump(data, file, indent=2)
            file.write("\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


@dataclass(eq=False)
class LobbySession:
    """One connected lobby stream of a remote bot."""

    bot_name: str
    capacity: int
    outbox: asyncio.Queue[lobby_pb2.ConnectResponse | None]
    busy: dict[str, str] = field(default_factory=dict)
    """Assignment ids offered to or confirmed by this session whose tables have not finished -> table id."""
    revoked: bool = False
    """The bot's token was revoked (RevokeRemoteBot, or a new registration): the stream ends UNAUTHENTICATED."""
    replaced: bool = False
    """The bot opened more than MAX_SESSIONS_PER_BOT sessions: this, its oldest, ends RESOURCE_EXHAUSTED."""

    def tables(self) -> set[str]:
        """The tables this session plays or is offered: `max_concurrent_matches` counts these, not seats (a
        remote bot usually holds both seats of its team)."""
        return set(self.busy.values())

    def has_room_for(self, table_id: str) -> bool:
        return table_id in self.tables() or len(self.tables()) < self.capacity


@dataclass(eq=False)
class _Offer:
    assignment_id: str
    table: Table
    seat: int
    session: LobbySession | None = None
    confirmed: bool = False
    timer: asyncio.TimerHandle | None = None
    declined_by: set[LobbySession] = field(default_factory=set)


class Lobby:
    """Registered remote bots, their sessions, and the seats waiting to be taken."""

    def __init__(
        self, rotate_token: Callable[[Table, int], None] | None = None, *, state_path: Path | None = None
    ) -> None:
        self.referee_address = ""
        self._rotate_token = rotate_token
        """Gives a seat a new token: an offer that is declined, lapses or is withdrawn takes its token with it."""
        self.state_path = state_path
        """Where the registrations are kept across restarts (`read_state`, `write_state`); None: in memory only."""
        self._bots: dict[str, str] = read_state(state_path) if state_path is not None else {}
        self._sessions: dict[str, list[LobbySession]] = {}
        self._pending: dict[str, deque[_Offer]] = {}
        self._offers: dict[str, _Offer] = {}
        self._by_seat: dict[tuple[Table, int], _Offer] = {}
        """The open offer of each lobby seat whose table has not finished."""

    def register(self, bot_name: str, token_hash: str) -> None:
        """Register a bot's token hash; a new hash for a known name revokes the old token first."""
        digest = token_hash.lower()
        known = self._bots.get(bot_name)
        if known is not None and not hmac.compare_digest(known, digest):
            self._forget(bot_name)
        self._bots[bot_name] = digest
        if known != digest:
            self._save()

    def revoke(self, bot_name: str) -> tuple[bool, int]:
        """Forget a bot's token: its lobby sessions end and the offers they hold are withdrawn (their seat tokens
        with them), to be offered again if the bot registers anew. Returns (was registered, sessions ended)."""
        was_registered, ended = self._forget(bot_name)
        if was_registered:
            self._save()
        return was_registered, ended

    def _forget(self, bot_name: str) -> tuple[bool, int]:
        """`revoke` without writing the state file."""
        was_registered = self._bots.pop(bot_name, None) is not None
        sessions = self._sessions.pop(bot_name, [])
        for session in sessions:
            session.revoked = True
            for assignment_id in list(session.busy):
                offer = self._offers.get(assignment_id)
                if offer is not None and not offer.confirmed:
                    self._requeue(offer, reason="the bot's token was revoked")
            session.outbox.put_nowait(None)
        if sessions or was_registered:
            log.info("remote bot %s: token revoked, %d lobby session(s) ended", bot_name, len(sessions))
        return was_registered, len(sessions)

    def registered(self) -> list[str]:
        """The names of the registered bots, sorted."""
        return sorted(self._bots)

    def _save(self) -> None:
        """Keep the registrations in the state file; the change holds in memory even when the write fails."""
        if self.state_path is None:
            return
        try:
            write_state(self.state_path, self._bots)
        except OSError as error:
            log.error("cannot write the state file %s: %s", self.state_path, error)
            raise StateError(f"cannot write the state file {self.state_path}: {error}") from None

    def is_registered(self, bot_name: str) -> bool:
        return bot_name in self._bots

    def authenticate(self, token: str) -> str | None:
        """The registered bot whose token this is, compared in constant time."""
        digest = token_sha256(token)
        for name, expected in self._bots.items():
            if hmac.compare_digest(digest, expected):
                return name
        return None

    def connected(self, bot_name: str) -> int:
        """How many lobby sessions of this bot are open."""
        return len(self._sessions.get(bot_name, []))

    def connect(self, session: LobbySession) -> None:
        """A new session of its bot; past MAX_SESSIONS_PER_BOT, the bot's oldest session ends to make room (rather
        than the new one refused: a bot that reconnects while its old sessions are not yet seen gone gets in)."""
        sessions = self._sessions.setdefault(session.bot_name, [])
        while len(sessions) >= MAX_SESSIONS_PER_BOT:
            oldest = sessions[0]
            oldest.replaced = True
            self.disconnect(oldest)
            oldest.outbox.put_nowait(None)
        sessions.append(session)
        self._dispatch(session.bot_name)

    def disconnect(self, session: LobbySession) -> None:
        """Offers still open on a closed session go back to the queue; confirmed ones stay with their table."""
        sessions = self._sessions.get(session.bot_name, [])
        if session in sessions:
            sessions.remove(session)
        for assignment_id in list(session.busy):
            offer = self._offers.get(assignment_id)
            if offer is not None and not offer.confirmed:
                self._requeue(offer)
        self._dispatch(session.bot_name)

    def offer(self, table: Table, seat: int) -> None:
        """Offer a remote seat of a new table to its bot."""
        offer = _Offer(secrets.token_hex(8), table, seat)
        self._offers[offer.assignment_id] = offer
        self._by_seat[table, seat] = offer
        self._pending.setdefault(table.seats[seat].name, deque()).append(offer)
        self._dispatch(table.seats[seat].name)

    def unconfirmed(self, table: Table, seat: int) -> bool:
        """Whether the seat is offered through the lobby and its offer is not confirmed: its token, sent with the
        offer, joins only once it is (lobby.proto). Joined early, a token of an offer later withdrawn kept its
        seat, past `max_concurrent_matches` and a revoked token (a review, stop 34)."""
        offer = self._by_seat.get((table, seat))
        return offer is not None and not offer.confirmed

    def busy(self, table: Table, seat: int) -> bool:
        """Whether the seat's bot is online but has no room for it: its seat is offered and not taken, and every
        session of the bot is full, one at least with a match that has begun or with a seat the bot has joined,
        waiting for its rivals. Sessions full of tables still waiting for the bot could wait on each other for
        ever; a bot at its seat has done its part. A review's bot held a shared table waiting (itself busy), and
        the honest bot that had joined it was taken for idle, absent at its next table (helper-84)."""
        offer = self._by_seat.get((table, seat))
        if offer is None or offer.confirmed:
            return False
        sessions = self._sessions.get(table.seats[seat].name, [])
        if not sessions or any(session.has_room_for(table.table_id) for session in sessions):
            return False
        return any(
            other.confirmed
            and (
                other.table.status is TableStatus.RUNNING
                or (other.table.status is TableStatus.WAITING and other.table.seats[other.seat].outbox is not None)
            )
            for session in sessions
            for assignment_id in session.busy
            if (other := self._offers.get(assignment_id)) is not None
        )

    def accept(self, session: LobbySession, assignment_id: str) -> lobby_pb2.ConnectResponse | None:
        offer = self._offers.get(assignment_id)
        if offer is None or offer.session is not session or offer.confirmed:
            return None
        if offer.timer is not None:
            offer.timer.cancel()
        offer.confirmed = True
        return lobby_pb2.ConnectResponse(confirmed=lobby_pb2.AssignmentConfirmed(assignment_id=assignment_id))

    def decline(self, session: LobbySession, assignment_id: str) -> None:
        """The offer goes to another session of the bot; this one is passed over for it for DECLINE_RETRY_S only."""
        offer = self._offers.get(assignment_id)
        if offer is None or offer.session is not session or offer.confirmed:
            return
        offer.declined_by.add(session)
        self._requeue(offer)
        offer.table.loop.call_later(DECLINE_RETRY_S, self._reconsider, offer, session)
        self._dispatch(session.bot_name)

    def _reconsider(self, offer: _Offer, session: LobbySession) -> None:
        """A session that declined an offer may be offered it again: it may have room now."""
        offer.declined_by.discard(session)
        if self._offers.get(offer.assignment_id) is offer and offer.session is None:
            self._dispatch(session.bot_name)

    def table_done(self, table: Table) -> None:
        """A table ended: free its sessions' capacity and withdraw what was never taken."""
        for assignment_id, offer in list(self._offers.items()):
            if offer.table is not table:
                continue
            del self._offers[assignment_id]
            self._by_seat.pop((table, offer.seat), None)
            if offer.timer is not None:
                offer.timer.cancel()
            session = offer.session
            if session is not None:
                session.busy.pop(assignment_id, None)
                if not offer.confirmed:
                    session.outbox.put_nowait(
                        lobby_pb2.ConnectResponse(
                            withdrawn=lobby_pb2.AssignmentWithdrawn(
                                assignment_id=assignment_id, reason=f"table {table.table_id} is {table.status.value}"
                            )
                        )
                    )
                self._dispatch(session.bot_name)
            queue = self._pending.get(table.seats[offer.seat].name)
            if queue is not None and offer in queue:
                queue.remove(offer)

    def _requeue(self, offer: _Offer, reason: str = "not accepted; offered again") -> None:
        """Take an offer back from its session: the seat token it carried is replaced, so it never joins."""
        if offer.timer is not None:
            offer.timer.cancel()
            offer.timer = None
        if offer.session is not None:
            offer.session.busy.pop(offer.assignment_id, None)
            offer.session.outbox.put_nowait(
                lobby_pb2.ConnectResponse(
                    withdrawn=lobby_pb2.AssignmentWithdrawn(assignment_id=offer.assignment_id, reason=reason)
                )
            )
            if self._rotate_token is not None:
                self._rotate_token(offer.table, offer.seat)
        offer.session = None
        if offer.table.status is TableStatus.WAITING:
            self._pending.setdefault(offer.table.seats[offer.seat].name, deque()).appendleft(offer)

    def _dispatch(self, bot_name: str) -> None:
        queue = self._pending.get(bot_name)
        while queue:
            offer = queue[0]
            table_id = offer.table.table_id
            free = [
                session
                for session in self._sessions.get(bot_name, [])
                if session.has_room_for(table_id) and session not in offer.declined_by
            ]
            if not free:
                return
            queue.popleft()
            # Keep a table's seats together on one session where possible, else the least busy session.
            session = min(free, key=lambda candidate: (table_id not in candidate.tables(), len(candidate.tables())))
            self._send(offer, session)

    def _send(self, offer: _Offer, session: LobbySession) -> None:
        table, seat = offer.table, offer.seat
        offer.session = session
        session.busy[offer.assignment_id] = table.table_id
        names = [state.name for state in table.seats]
        assignment = lobby_pb2.MatchAssignment(
            assignment_id=offer.assignment_id,
            table_id=table.table_id,
            seat_token=table.seats[seat].token,
            referee_address=self.referee_address,
            seat=seat,
            partner_name=names[(seat + 2) % 4],
            opponent_names=[names[(seat + 1) % 4], names[(seat + 3) % 4]],
            rules=wire.rules_to_map(table.rules),
            respond_within_ms=int(OFFER_RESPONSE_S * 1000),
        )
        session.outbox.put_nowait(lobby_pb2.ConnectResponse(assignment=assignment))
        offer.timer = table.loop.call_later(OFFER_RESPONSE_S, self._lapsed, offer)

    def _lapsed(self, offer: _Offer) -> None:
        offer.timer = None
        if offer.confirmed or offer.session is None:
            return
        log.info("offer %s lapsed on a session of %s", offer.assignment_id, offer.table.seats[offer.seat].name)
        session = offer.session
        offer.declined_by.add(session)
        self._requeue(offer)
        # As after a decline: passed over for DECLINE_RETRY_S only. For good, the offer at the head of the bot's
        # queue waited on its other sessions alone, and every later offer behind it (a review, stop 35).
        offer.table.loop.call_later(DECLINE_RETRY_S, self._reconsider, offer, session)
        self._dispatch(session.bot_name)
