"""The stdio line protocol's JSON (docs/stdio.md): the lines the bridge writes, and the answer it reads.

Every line is built from the SDK's values (`BotView`, engine `Event`, `MatchOutcome`), never from the wire, so a
program sees the engine's vocabulary and notation, the same as replays and `mus rules`: action kinds such as
`envido`, cards such as `12o`, events exactly as `Event.to_json` writes them. The wire mapping
(`referee.wire`) stays the one place that reads protobuf.

Actions are JSON objects with the fields of the engine's `Action`: `kind`, and as its kind needs `amount`,
`cards` (notation), `has_jugada`, `senas` (names). Every entry of a request's `legal` list is such an object with
no nested object, written compactly, so a program may send one back verbatim (a shell script can cut it out of
the line at its first `}`).
"""

from __future__ import annotations

import json
from typing import Any

from clients.sdk.view import BotView
from referee.engine.actions import Action, ActionKind, parse_sena
from referee.engine.cards import parse_cards, sort_hand
from referee.engine.errors import MalformedError
from referee.engine.events import Event
from referee.engine.outcome import MatchOutcome
from referee.engine.seats import team_of

PROTOCOL = 1
"""The version of the line protocol, sent in the `hello` line; a change an old program could not read bumps it."""

MAX_LINE_BYTES = 64 * 1024
"""The longest answer line read; the same bound as a gRPC message from a bot."""


class AnswerError(ValueError):
    """An answer line that is not an action: not JSON, not an object, an unknown kind, a malformed field."""


def dump(line: dict[str, Any]) -> bytes:
    """One protocol line: compact JSON (ASCII only, no spaces), then a newline."""
    return json.dumps(line, separators=(",", ":"), ensure_ascii=True).encode() + b"\n"


def action_to_json(action: Action) -> dict[str, Any]:
    """An action as a flat JSON object with only the fields its kind takes (the form a program answers with)."""
    out: dict[str, Any] = {"kind": action.kind.value}
    if action.kind in (ActionKind.ENVIDO, ActionKind.MAS):
        out["amount"] = action.amount
    elif action.kind is ActionKind.DISCARD:
        out["cards"] = [str(card) for card in action.cards]
    elif action.kind is ActionKind.DECLARE:
        out["has_jugada"] = action.has_jugada
    if action.senas or action.kind is ActionKind.SENAS:
        out["senas"] = [sena.value for sena in action.senas]
    return out


def action_from_json(text: str) -> Action:
    """The action of one answer line; `AnswerError` says what cannot be read. Whether it is legal now is the
    referee's to say."""
    try:
        data = json.loads(text)
    except ValueError as error:
        raise AnswerError(f"not JSON ({error})") from None
    except RecursionError:  # `[[[[...` a few thousand deep (a review's answer, stop 39)
        raise AnswerError("not a JSON object: nested too deep") from None
    if not isinstance(data, dict):
        raise AnswerError("not a JSON object")
    known = ", ".join(kind.value for kind in ActionKind)
    raw_kind = data.get("kind")
    if not isinstance(raw_kind, str):
        raise AnswerError(f'no "kind": an action is an object such as {{"kind":"paso"}}; kinds are {known}')
    try:
        kind = ActionKind(raw_kind)
    except ValueError:
        raise AnswerError(f"unknown kind {raw_kind!r}; kinds are {known}") from None
    amount = data.get("amount", 0)
    if not isinstance(amount, int) or isinstance(amount, bool):
        raise AnswerError(f'"amount" must be an integer; got {amount!r}')
    has_jugada = data.get("has_jugada", False)
    if not isinstance(has_jugada, bool):
        raise AnswerError(f'"has_jugada" must be true or false; got {has_jugada!r}')
    try:
        cards = parse_cards(_words(data.get("cards", []), "cards"))
        senas = tuple(parse_sena(name) for name in _words(data.get("senas", []), "senas"))
    except MalformedError as error:
        raise AnswerError(str(error)) from None
    if kind is ActionKind.DISCARD:
        cards = sort_hand(cards)
    action = Action(kind, amount=amount, cards=cards, has_jugada=has_jugada, senas=senas)
    malformed = action.malformed()
    if malformed is not None:
        raise AnswerError(malformed)
    return action


def answer_number(text: str) -> int | None:
    """The request `number` an answer line echoes, if it is a JSON object that has one (answers need not)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    number = data.get("number") if isinstance(data, dict) else None
    return number if isinstance(number, int) and not isinstance(number, bool) else None


def _words(value: object, field: str) -> list[str]:
    """A list of strings, or one string of space-separated words (`"12o 3c"`, the engine's notation)."""
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list) and all(isinstance(word, str) for word in value):
        return list(value)
    raise AnswerError(f'"{field}" must be a list of strings; got {value!r}')


def kinds_json(view: BotView) -> list[dict[str, Any]]:
    """One entry per legal kind with its range, as the wire's `LegalAction` says it (docs/protocol.md): amounts
    `min_amount..max_amount` (null: no cap), discard sizes, the true declaration, the acceptable señas."""
    out: list[dict[str, Any]] = []
    seen: dict[ActionKind, dict[str, Any]] = {}
    uncapped = view.rules.stake_cap is None
    senas_allowed = view.rules.senas_per_window
    for action in view.legal_actions:
        entry = seen.get(action.kind)
        if entry is None:
            entry = {"kind": action.kind.value}
            seen[action.kind] = entry
            out.append(entry)
            if action.kind in (ActionKind.MUS, ActionKind.NO_MUS):
                entry["senas"] = [sena.value for sena in view.mus_senas]
                entry["max_senas"] = senas_allowed
            elif action.kind is ActionKind.SENAS:
                entry["senas"] = []
                entry["max_senas"] = senas_allowed
            elif action.kind is ActionKind.DECLARE:
                entry["has_jugada"] = action.has_jugada
        if action.kind in (ActionKind.ENVIDO, ActionKind.MAS):
            entry["min_amount"] = min(entry.get("min_amount", action.amount), action.amount)
            entry["max_amount"] = None if uncapped else max(entry.get("max_amount") or 0, action.amount)
        elif action.kind is ActionKind.DISCARD:
            entry["min_cards"] = min(entry.get("min_cards", 4), len(action.cards))
            entry["max_cards"] = max(entry.get("max_cards", 0), len(action.cards))
        elif action.kind is ActionKind.SENAS:
            entry["senas"] += [sena.value for sena in action.senas]
    return out


def request_json(view: BotView, *, number: int, attempt: int, rejection: str | None = None) -> dict[str, Any]:
    """A `request` line: the seat's whole view, the legal actions twice (ready-made answers in `legal`, one entry
    per kind with its range in `kinds`), the rules and the time left. Self-contained: a program may read nothing
    else. `rejection`: why the last answer to this request was refused (the `rejected` line's reason)."""
    return {
        "type": "request",
        "decision": view.decision.value,
        "legal": [action_to_json(action) for action in view.legal_actions],
        "kinds": kinds_json(view),
        "number": number,
        "attempt": attempt,
        "rejection": rejection,
        "seat": view.seat,
        "team": view.team,
        "partner": view.partner,
        "mano": view.mano,
        "dealer": view.dealer,
        "position": view.position,
        "hand": view.hand_number,
        "vaca": view.vaca,
        "game": view.game,
        "score": list(view.score),
        "games": list(view.games),
        "vacas": list(view.vacas),
        "faults": list(view.faults),
        "cards": [str(card) for card in view.cards],
        "lance": view.lance.value if view.lance is not None else None,
        "discard_rounds": view.discard_rounds,
        "accepted_total": view.accepted_total,
        "pending_total": view.pending_total,
        "ordago_pending": view.ordago_pending,
        "decision_time_left_ms": round(view.decision_time_left_s * 1000),
        "bank_time_left_ms": round(view.bank_time_left_s * 1000),
        "senas_received": [
            {
                "seat": received.seat,
                "sena": received.sena.value,
                "lance": received.lance.value if received.lance is not None else None,
                "mus_round": received.mus_round,
            }
            for received in view.senas_received
        ],
        "events": [event.to_json() for event in view.hand_events],
        "rules": view.rules.to_options(),
    }


def event_json(event: Event) -> dict[str, Any]:
    """An `event` line: the event as replays write it (`Event.to_json`), tagged with its line type."""
    return {"type": "event", **event.to_json()}


def rejected_json(reason: str, *, answer: str | None, number: int) -> dict[str, Any]:
    """A `rejected` line: the last answer to request `number` was not applied, and why; the request follows."""
    return {"type": "rejected", "number": number, "reason": reason, "answer": answer}


def outcome_json(outcome: MatchOutcome, seat: int | None) -> dict[str, Any]:
    """The `outcome` line, the last one: the engine's outcome (`MatchOutcome.to_json`) and whether you won."""
    won = None if seat is None else outcome.winner == team_of(seat)
    return {"type": "outcome", "won": won, **outcome.to_json()}


def hello_json(name: str) -> dict[str, Any]:
    """The `hello` line, the first one, written before the bridge joins its seat."""
    return {"type": "hello", "protocol": PROTOCOL, "name": name}
