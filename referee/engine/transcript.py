"""A readable text transcript of a match, hand by hand, from its event log (omniscient or one seat's)."""

from __future__ import annotations

from collections.abc import Iterable

from referee.engine.events import Event, EventKind

TEAM_LABEL = ("team 0 (seats 0+2)", "team 1 (seats 1+3)")


def _team(team: int | None) -> str:
    return TEAM_LABEL[team] if team is not None else "nobody"


def describe_event(event: Event) -> str | None:
    """One line for an event, or None for events that a transcript leaves out."""
    data = event.data
    kind = event.kind
    if kind is EventKind.MATCH_STARTED:
        return f"Match: first dealer seat {data['first_dealer']}"
    if kind is EventKind.GAME_STARTED:
        return f"\n=== Vaca {data['vaca']}, game {data['game']} ==="
    if kind is EventKind.HAND_STARTED:
        return f"\n--- Hand {data['hand']}: mano seat {data['mano']}, dealer seat {data['dealer']} ---"
    if kind is EventKind.CARDS_DEALT:
        return f"  seat {data['seat']} is dealt {data['cards']}"
    if kind is EventKind.MUS_CALLED:
        return f"  seat {data['seat']}: {'mus' if data['mus'] else 'no mus'}"
    if kind is EventKind.CARDS_DISCARDED:
        return f"  seat {data['seat']} discards {data['cards']}"
    if kind is EventKind.DISCARD_COUNTED:
        return f"  seat {data['seat']} asks for {data['count']}"
    if kind is EventKind.CARDS_REPLACED:
        return f"  seat {data['seat']} receives {data['cards']}"
    if kind is EventKind.STOCK_RESHUFFLED:
        return "  the stock ran out: discards reshuffled"
    if kind is EventKind.MUS_CUT:
        reason = "cut" if data["reason"] == "no_mus" else "cut after max_mus_rounds discards"
        return f"  mus {reason}"
    if kind is EventKind.LANCE_STARTED:
        return f"  [{data['lance']}]"
    if kind is EventKind.DECLARED:
        return f"    seat {data['seat']}: {data['lance']} {'yes' if data['has'] else 'no'}"
    if kind is EventKind.SENA_DELIVERED:
        seen = "public" if event.to is None else "to partner"
        return f"    seat {data['seat']} signals {data['sena']} ({seen})"
    if kind is EventKind.SENA_REJECTED:
        entries = data.get("senas", [data])  # events_version < 3: one event per seña
        return "\n".join(
            f"    seña {item['sena']} of seat {data['seat']} rejected: {item['reason']}" for item in entries
        )
    if kind is EventKind.BET:
        amount = f" {data['amount']}" if data["action"] in ("envido", "mas") else ""
        return f"    seat {data['seat']}: {data['action']}{amount}"
    if kind is EventKind.LANCE_CLOSED:
        if data["outcome"] in ("passed", "ordago_accepted"):
            return None
        if data["outcome"] == "accepted":
            return f"    {data['lance']}: {data['stake']} accepted"
        if data["outcome"] == "rejected":
            return f"    {data['lance']}: refused, won by {_team(data['winner_team'])}"
        if data["outcome"] == "no_betting":
            return f"    {data['lance']}: one team only, no betting"
        return f"    {data['lance']}: nobody holds it"
    if kind is EventKind.POINTS_SCORED:
        where = f" ({data['reason']} {data['lance']})" if data["lance"] else ""
        score = data["score"]
        return f"    {_team(data['team'])} +{data['points']}{where} -> {score[0]}-{score[1]}"
    if kind is EventKind.HANDS_SHOWN:
        return "  hands shown: " + " | ".join(f"seat {seat}: {cards}" for seat, cards in enumerate(data["hands"]))
    if kind is EventKind.LANCE_DECIDED:
        return f"    órdago in {data['lance']} won by seat {data['seat']}"
    if kind is EventKind.GAME_ENDED:
        score = data["score"]
        return f"  game over ({data['termination']}): {_team(data['winner'])} wins, {score[0]}-{score[1]}"
    if kind is EventKind.VACA_ENDED:
        return f"  vaca {data['vaca']} to {_team(data['winner'])}, games {data['games'][0]}-{data['games'][1]}"
    if kind is EventKind.MATCH_ENDED:
        vacas = data["vacas"]
        return f"\nMatch won by {_team(data['winner'])} ({data['termination']}), vacas {vacas[0]}-{vacas[1]}"
    if kind is EventKind.FAULT:
        return f"    fault: seat {data['seat']} {data['cause']} ({data['faults']} for its team)"
    if kind is EventKind.FORFEIT:
        return f"  {_team(data['team'])} forfeits the match"
    return None


def render_transcript(events: Iterable[Event]) -> str:
    """The transcript of the given events (pass `match.events` or `match.events_for(seat)`)."""
    lines = [line for event in events if (line := describe_event(event)) is not None]
    return "\n".join(lines) + "\n"
