"""How lances, games and matches end, and the result of a match as a value (rules §8.2, §9.5, §10, §13).

Numbers count from 0: the vaca of a game, its game within the vaca, the hand over the match.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from referee.engine.enums import Enum


class LanceOutcome(Enum):
    """How a lance's betting ended (rules §8.2)."""

    PASSED = "passed"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    ORDAGO_ACCEPTED = "ordago_accepted"
    NO_BETTING = "no_betting"
    SKIPPED = "skipped"


class GameTermination(Enum):
    """How a game ended (rules §9.5)."""

    TARGET_AT_TANTEO = "target_at_tanteo"
    TARGET_AT_DEJE = "target_at_deje"
    ORDAGO = "ordago"
    FORFEIT = "forfeit"


class MatchTermination(Enum):
    """How a match ended (rules §9.5, §13)."""

    NORMAL = "normal"
    FORFEIT = "forfeit"


class FaultCause(Enum):
    """The faults of rules §13."""

    ILLEGAL_ACTION = "illegal_action"
    TIMEOUT = "timeout"
    LIMIT = "limit"
    """The seat's messages made the match record outgrow what the referee keeps for one match: the seat's team
    forfeits at once (the edge that hosts the match sets the limit and calls `forfeit_for_limit`)."""


class MusCutReason(Enum):
    """Why the mus phase ended (rules §5)."""

    NO_MUS = "no_mus"
    MAX_MUS_ROUNDS = "max_mus_rounds"


class ScoreReason(Enum):
    """When points were scored: at once for a refused bet (the deje, rules §8.3) or at the tanteo (§9)."""

    TANTEO = "tanteo"
    DEJE = "deje"


@dataclass(frozen=True, slots=True)
class GameResult:
    """One game: winner (None after a forfeit), final counters, termination, the hand it ended in.

    `vaca` and `game` count from 0 (the game within its vaca), `hand_number` from 0 over the match.
    """

    vaca: int
    game: int
    winner: int | None
    score: tuple[int, int]
    termination: GameTermination
    hand_number: int


@dataclass(frozen=True, slots=True)
class VacaResult:
    """One vaca (counted from 0): its winner (None when a forfeit cut it short) and the games each team won."""

    vaca: int
    winner: int | None
    games: tuple[int, int]


@dataclass(frozen=True, slots=True)
class MatchOutcome:
    """The result of a match as a value: winner team, termination, and every game and vaca."""

    winner: int
    termination: MatchTermination
    vacas: tuple[int, int]
    games: tuple[GameResult, ...]
    vaca_results: tuple[VacaResult, ...]
    faults: tuple[int, int]

    def to_json(self) -> dict[str, Any]:
        """The outcome as JSON with the same field names: what the database stores and the stdio bridge sends."""
        return {
            "winner": self.winner,
            "termination": self.termination.value,
            "vacas": list(self.vacas),
            "games": [
                {
                    "vaca": game.vaca,
                    "game": game.game,
                    "winner": game.winner,
                    "score": list(game.score),
                    "termination": game.termination.value,
                    "hand_number": game.hand_number,
                }
                for game in self.games
            ],
            "vaca_results": [
                {"vaca": vaca.vaca, "winner": vaca.winner, "games": list(vaca.games)} for vaca in self.vaca_results
            ],
            "faults": list(self.faults),
        }
