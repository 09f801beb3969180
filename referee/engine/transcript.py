"""A readable text transcript of a match, hand by hand, from its event log (omniscient or one seat's).

People count vacas and games from 1; the events count them from 0.
"""

from __future__ import annotations

from collections.abc import Iterable

from referee.engine.actions import ActionKind
from referee.engine.cards import format_cards
from referee.engine.events import (
    Bet,
    CardsDealt,
    CardsDiscarded,
    CardsReplaced,
    Declared,
    DiscardCounted,
    Event,
    Fault,
    Forfeit,
    GameEnded,
    GameStarted,
    HandsShown,
    HandStarted,
    LanceClosed,
    LanceDecided,
    LanceStarted,
    MatchEnded,
    MatchStarted,
    MusCalled,
    MusCut,
    PointsScored,
    SenaDelivered,
    SenaRejected,
    StockReshuffled,
    VacaEnded,
)
from referee.engine.outcome import GameTermination, LanceOutcome, MusCutReason

TEAM_LABEL = ("team 0 (seats 0+2)", "team 1 (seats 1+3)")


def _team(team: int | None) -> str:
    return TEAM_LABEL[team] if team is not None else "nobody"


def _lance_closed(event: LanceClosed) -> str | None:
    lance, outcome = event.lance.value, event.outcome
    if outcome in (LanceOutcome.PASSED, LanceOutcome.ORDAGO_ACCEPTED):
        return None
    if outcome is LanceOutcome.ACCEPTED:
        return f"    {lance}: {event.stake} accepted"
    if outcome is LanceOutcome.REJECTED:
        return f"    {lance}: refused, won by {_team(event.winner_team)}"
    if outcome is LanceOutcome.NO_BETTING:
        return f"    {lance}: one team only, no betting"
    return f"    {lance}: nobody holds it"


def describe_event(event: Event) -> str | None:
    """One line for an event, or None for events that a transcript leaves out."""
    payload = event.payload
    match payload:
        case MatchStarted():
            return f"Match: first dealer seat {payload.first_dealer}"
        case GameStarted():
            return f"\n=== Vaca {payload.vaca + 1}, game {payload.game + 1} ==="
        case HandStarted():
            return f"\n--- Hand {payload.hand}: mano seat {payload.mano}, dealer seat {payload.dealer} ---"
        case CardsDealt():
            return f"  seat {payload.seat} is dealt {format_cards(payload.cards)}"
        case MusCalled():
            return f"  seat {payload.seat}: {'mus' if payload.mus else 'no mus'}"
        case CardsDiscarded():
            return f"  seat {payload.seat} discards {format_cards(payload.cards)}"
        case DiscardCounted():
            return f"  seat {payload.seat} asks for {payload.count}"
        case CardsReplaced():
            return f"  seat {payload.seat} receives {format_cards(payload.cards)}"
        case StockReshuffled():
            return "  the stock ran out: discards reshuffled"
        case MusCut():
            reason = "cut" if payload.reason is MusCutReason.NO_MUS else "cut after max_mus_rounds discards"
            return f"  mus {reason}"
        case LanceStarted():
            return f"  [{payload.lance.value}]"
        case Declared():
            return f"    seat {payload.seat}: {payload.lance.value} {'yes' if payload.has else 'no'}"
        case SenaDelivered():
            seen = "public" if event.to is None else "to partner"
            return f"    seat {payload.seat} signals {payload.sena.value} ({seen})"
        case SenaRejected():
            return "\n".join(
                f"    seña {item.to_json()['sena']} of seat {payload.seat} rejected: {item.reason}"
                for item in payload.senas
            )
        case Bet():
            amount = f" {payload.amount}" if payload.action in (ActionKind.ENVIDO, ActionKind.MAS) else ""
            return f"    seat {payload.seat}: {payload.action.value}{amount}"
        case LanceClosed():
            return _lance_closed(payload)
        case PointsScored():
            where = f" ({payload.reason.value} {payload.lance.value})" if payload.lance else ""
            score = payload.score
            return f"    {_team(payload.team)} +{payload.points}{where} -> {score[0]}-{score[1]}"
        case HandsShown():
            shown = " | ".join(f"seat {seat}: {format_cards(cards)}" for seat, cards in enumerate(payload.hands))
            return "  hands shown: " + shown
        case LanceDecided():
            return f"    órdago in {payload.lance.value} won by seat {payload.seat}"
        case GameEnded():
            score = payload.score
            how = payload.termination.value
            if payload.termination is GameTermination.ORDAGO:  # no points: "wins, 0-0" read as a draw (stop 33)
                at = f"{score[0]}-{score[1]}"
                return f"  game over ({how}): {_team(payload.winner)} wins the órdago, the score at {at}"
            return f"  game over ({how}): {_team(payload.winner)} wins, {score[0]}-{score[1]}"
        case VacaEnded():
            games = payload.games
            return f"  vaca {payload.vaca + 1} to {_team(payload.winner)}, games {games[0]}-{games[1]}"
        case MatchEnded():
            vacas = payload.vacas
            how = payload.termination.value
            return f"\nMatch won by {_team(payload.winner)} ({how}), vacas {vacas[0]}-{vacas[1]}"
        case Fault():
            return f"    fault: seat {payload.seat} {payload.cause.value} ({payload.faults} for its team)"
        case Forfeit():
            return f"  {_team(payload.team)} forfeits the match"
    return None


def render_transcript(events: Iterable[Event]) -> str:
    """The transcript of the given events (pass `match.events` or `match.events_for(seat)`)."""
    lines = [line for event in events if (line := describe_event(event)) is not None]
    return "\n".join(lines) + "\n"
