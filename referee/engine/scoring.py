"""Scoring: what each closed lance pays at the tanteo, and to which team (rules §9.2, §9.4).

Pure functions of the lance results, the hands' facts and the rules; `Match` adds the points in order and
stops the game the moment a team reaches the target (rules §9.5).
"""

from __future__ import annotations

from collections.abc import Sequence

from referee.engine.betting import LanceResult
from referee.engine.hands import HandFacts, Lance, best_seat
from referee.engine.outcome import LanceOutcome
from referee.engine.rules import RefusedJugadaBonusTo, Rules
from referee.engine.seats import team_of


def team_values(facts: Sequence[HandFacts], team: int, lance: Lance) -> int:
    """What a team's pares or juego are worth: the sum of both partners' values (rules §9.2)."""
    seats = (team, team + 2)
    if lance is Lance.PARES:
        return sum(facts[seat].pares_value for seat in seats)
    return sum(facts[seat].juego_value for seat in seats)


def refused_bonus_team(mode: RefusedJugadaBonusTo, result: LanceResult, best: int) -> int | None:
    """The team that scores a refused lance's jugada or punto bonus, if any (`refused_jugada_bonus_to`)."""
    if mode is RefusedJugadaBonusTo.BETTOR_TEAM:
        return result.refusal_winner
    if mode is RefusedJugadaBonusTo.BEST_CARDS:
        return team_of(best)
    return None


def tanteo_entry(
    result: LanceResult | None, facts: Sequence[HandFacts], mano: int, rules: Rules
) -> tuple[int, int] | None:
    """One lance's entry: the team it pays at the tanteo and how much, or None (rules §9.2, §9.4)."""
    if result is None or result.outcome is LanceOutcome.SKIPPED:
        return None
    lance = result.lance
    outcome = result.outcome
    best = best_seat(facts, lance, mano, result.participants)
    if lance in (Lance.GRANDE, Lance.CHICA):
        assert best is not None
        if outcome is LanceOutcome.PASSED:
            return team_of(best), 1
        if outcome is LanceOutcome.ACCEPTED:
            return team_of(best), result.stake
        return None
    if lance is Lance.PUNTO:
        assert best is not None
        bonus = 1 if rules.punto_bonus else 0
        if outcome is LanceOutcome.PASSED:
            return team_of(best), 1
        if outcome is LanceOutcome.ACCEPTED:
            return team_of(best), result.stake + bonus
        if outcome is LanceOutcome.REJECTED and bonus:
            team = refused_bonus_team(rules.refused_jugada_bonus_to, result, best)
            if team is not None:
                return team, bonus
        return None
    # Pares and Juego: values of the holders of one team.
    if outcome is LanceOutcome.NO_BETTING:
        team = team_of(result.participants[0])
        return team, team_values(facts, team, lance)
    assert best is not None
    if outcome is LanceOutcome.PASSED:
        team = team_of(best)
        paso = 1 if rules.paso_point_in_pares_juego else 0
        return team, team_values(facts, team, lance) + paso
    if outcome is LanceOutcome.ACCEPTED:
        team = team_of(best)
        return team, result.stake + team_values(facts, team, lance)
    if outcome is LanceOutcome.REJECTED:
        refusal_team = refused_bonus_team(rules.refused_jugada_bonus_to, result, best)
        if refusal_team is not None:
            return refusal_team, team_values(facts, refusal_team, lance)
    return None
