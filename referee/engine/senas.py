"""Señas: the closed vocabulary, the truth predicates and the verdicts on a list sent (rules §12.1, §12.3)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from referee.engine.enums import Enum
from referee.engine.errors import IllegalActionError
from referee.engine.hands import HandFacts, Lance, ParesClass
from referee.engine.rules import Rules, SenasMode, SenaTruth


class Sena(Enum):
    """Seña ids, in the order of the rules §12.1 table (automatic mode sends them in this order)."""

    DOS_REYES = "dos_reyes"
    DOS_ASES = "dos_ases"
    PARES = "pares"
    MEDIAS_REYES = "medias_reyes"
    MEDIAS_ASES = "medias_ases"
    MEDIAS = "medias"
    DUPLES = "duples"
    JUEGO = "juego"
    TREINTA_Y_UNA = "treinta_y_una"
    TREINTA = "treinta"
    VEINTINUEVE = "veintinueve"
    CIEGO = "ciego"
    CORTAR_MUS = "cortar_mus"
    ENVIDAR_MAS = "envidar_mas"
    CUATRO_REYES = "cuatro_reyes"
    CUATRO_ASES = "cuatro_ases"
    LA_BONITA = "la_bonita"


class SenaRejectionCode(Enum):
    """Why a seña was not delivered (rules §12.3 item 4)."""

    NOT_IN_VOCABULARY = "not_in_vocabulary"
    FALSE = "false"
    OUTSIDE_WINDOW = "outside_window"
    OVER_LIMIT = "over_limit"


@dataclass(frozen=True, slots=True)
class SenaRejection:
    """A rejected seña's reason: a code for machines and a sentence for people."""

    code: SenaRejectionCode
    text: str

    def __str__(self) -> str:
        return self.text


INTENTIONS = frozenset({Sena.CORTAR_MUS, Sena.ENVIDAR_MAS})
"""Señas of intention: always allowed, never checked (rules §12.3)."""

_KING, _ACE = 12, 1
_COUNT_SENAS = {
    Sena.DOS_REYES: (_KING, 2),
    Sena.MEDIAS_REYES: (_KING, 3),
    Sena.CUATRO_REYES: (_KING, 4),
    Sena.DOS_ASES: (_ACE, 2),
    Sena.MEDIAS_ASES: (_ACE, 3),
    Sena.CUATRO_ASES: (_ACE, 4),
}


def _fact_is_true(sena: Sena, facts: HandFacts, truth: SenaTruth) -> bool:
    """Truth of a hand-fact seña on the sender's current cards (rules §12.3 item 2), ciego excluded."""
    if sena in _COUNT_SENAS:
        rank, count = _COUNT_SENAS[sena]
        held = facts.ranks.count(rank)
        return held >= count if truth is SenaTruth.AT_LEAST else held == count
    if sena is Sena.PARES:
        return facts.pares_class is ParesClass.PAR
    if sena is Sena.MEDIAS:
        return facts.pares_class is ParesClass.MEDIAS
    if sena is Sena.DUPLES:
        return facts.pares_class is ParesClass.DUPLES
    if sena is Sena.JUEGO:
        return facts.total > 31
    if sena is Sena.TREINTA_Y_UNA:
        return facts.total == 31
    if sena is Sena.TREINTA:
        return facts.total == 30
    if sena is Sena.VEINTINUEVE:
        return facts.total == 29
    if sena is Sena.LA_BONITA:
        return facts.ranks == (_KING, _KING, _KING, _ACE)
    raise AssertionError(f"not a hand-fact seña: {sena}")


_SENAS = tuple(Sena)
"""Every seña in table order, as a tuple: iterating the enum itself cost more than the checks it feeds."""
_HAND_FACTS = tuple(sena for sena in _SENAS if sena not in INTENTIONS and sena is not Sena.CIEGO)


def vocabulary(rules: Rules) -> tuple[Sena, ...]:
    """The señas these rules allow at all: la_bonita only with `sena_la_bonita` (rules §12.1)."""
    return tuple(sena for sena in _SENAS if sena is not Sena.LA_BONITA or rules.sena_la_bonita)


def sena_rejection(sena: Sena, facts: HandFacts, rules: Rules, lance: Lance | None) -> SenaRejection | None:
    """Why this seña may not be sent now, or None when it is accepted.

    `lance` is the lance whose seña round this is, or None for a mus-call window (rules §12.3 item 3).
    """
    return _rejection(sena, facts, rules.senas_mode, rules.sena_truth, rules.sena_la_bonita, lance)


@lru_cache(maxsize=1 << 16)
def _rejection(
    sena: Sena, facts: HandFacts, mode: SenasMode, truth: SenaTruth, la_bonita: bool, lance: Lance | None
) -> SenaRejection | None:
    """The verdict depends only on these values; the engine asks the same questions often, so it is cached."""
    if mode is SenasMode.OFF:
        return SenaRejection(SenaRejectionCode.OUTSIDE_WINDOW, "señas are off (senas_mode=off)")
    if sena is Sena.LA_BONITA and not la_bonita:
        return SenaRejection(
            SenaRejectionCode.NOT_IN_VOCABULARY, "la_bonita is not in the vocabulary unless sena_la_bonita is true"
        )
    if sena is Sena.MEDIAS and (lance is None or lance is Lance.GRANDE):
        return SenaRejection(
            SenaRejectionCode.OUTSIDE_WINDOW, "medias may not be shown until the grande lance is over (rules §12.3)"
        )
    if sena in INTENTIONS:
        return None
    if sena is Sena.CIEGO:
        for other in _HAND_FACTS:
            if (other is not Sena.LA_BONITA or la_bonita) and _fact_is_true(other, facts, truth):
                return SenaRejection(SenaRejectionCode.FALSE, f"ciego is false: the hand has {other.value}")
        return None
    if _fact_is_true(sena, facts, truth):
        return None
    return SenaRejection(SenaRejectionCode.FALSE, f"{sena.value} is false for this hand")


def accepted_senas(facts: HandFacts, rules: Rules, lance: Lance | None) -> tuple[Sena, ...]:
    """Every seña that would be accepted now, in table order: what a seña round lists as legal."""
    return _accepted(facts, rules.senas_mode, rules.sena_truth, rules.sena_la_bonita, lance)


@lru_cache(maxsize=1 << 14)
def _accepted(
    facts: HandFacts, mode: SenasMode, truth: SenaTruth, la_bonita: bool, lance: Lance | None
) -> tuple[Sena, ...]:
    """Cached as a whole: the referee lists these at every seña decision, and one lookup beats one per seña."""
    return tuple(sena for sena in _SENAS if _rejection(sena, facts, mode, truth, la_bonita, lance) is None)


def true_hand_senas(facts: HandFacts, rules: Rules, lance: Lance | None) -> tuple[Sena, ...]:
    """The hand-fact señas (ciego included, intentions not) that are true and allowed now, in table order."""
    return tuple(
        sena for sena in _SENAS if sena not in INTENTIONS and sena_rejection(sena, facts, rules, lance) is None
    )


def sena_verdicts(
    senas: Sequence[Sena], facts: HandFacts, rules: Rules, lance: Lance | None
) -> list[SenaRejection | None]:
    """For each seña of a list, why it is rejected, or None when it is delivered (rules §12.3 item 4): a
    false seña, or one beyond the first `max_senas_per_window` of the list."""
    limit = rules.max_senas_per_window
    verdicts: list[SenaRejection | None] = []
    for index, sena in enumerate(senas):
        reason = sena_rejection(sena, facts, rules, lance)
        if reason is None and index >= limit:
            text = f"beyond the first {limit} señas of the list (max_senas_per_window)"
            reason = SenaRejection(SenaRejectionCode.OVER_LIMIT, text)
        verdicts.append(reason)
    return verdicts


def check_unknown_labels(labels: Sequence[str]) -> None:
    """Raise `IllegalActionError` unless the labels of señas outside the vocabulary are words (rules §12.1)."""
    if any(not label or " " in label for label in labels):
        raise IllegalActionError("give the unknown señas as non-empty labels without spaces")


def unknown_rejections(labels: Sequence[str]) -> list[tuple[Sena | str, SenaRejection]]:
    """Each seña outside the vocabulary, rejected (rules §12.1, §12.3 item 4)."""
    text = "not in the vocabulary (rules §12.1)"
    return [
        (label, SenaRejection(SenaRejectionCode.NOT_IN_VOCABULARY, f"unknown seña {label}: {text}")) for label in labels
    ]
