"""The rules of a match: every option of rules §14 as one frozen value, validated on the way in."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from referee.engine.cards import DeckMode
from referee.engine.enums import Enum
from referee.engine.errors import RulesError


class Real31(Enum):
    """Whether three 7s and a figure beat every ordinary 31 (rules §6.6)."""

    OFF = "off"
    SIETE_SIETE_SIETE_SOTA = "7-7-7-sota"
    SIETE_SIETE_SIETE_FIGURE = "7-7-7-figure"


class DejeMode(Enum):
    """What a refused bet pays at once (rules §8.3)."""

    PREVIOUS_STAKE = "previous_stake"
    ALWAYS_ONE = "always_one"
    FEM_PLUS_ONE = "fem_plus_one"


class RefusedJugadaBonusTo(Enum):
    """Who collects pares/juego values and the punto point of a refused lance (rules §9.2, §14)."""

    BETTOR_TEAM = "bettor_team"
    NONE = "none"
    BEST_CARDS = "best_cards"


class OrdagoResolution(Enum):
    """Whether earlier lances are counted before an accepted órdago decides (rules §8.4)."""

    IMMEDIATE = "immediate"
    COUNT_PRIOR = "count_prior"


class ResponseMode(Enum):
    """How partners answer a bet (rules §8.2)."""

    SEQUENTIAL_QUIERO_PREVAILS = "sequential_quiero_prevails"
    BOTH_ANSWER_MOST_AGGRESSIVE = "both_answer_most_aggressive"


class MusDecisionMode(Enum):
    """Who may cut the mus and when (rules §5.1)."""

    SEQUENTIAL = "sequential"
    FEM_OUT_OF_TURN = "fem_out_of_turn"


class DiscardSubmission(Enum):
    """Whether discards are chosen privately all at once or one seat after another (rules §5.2)."""

    SIMULTANEOUS = "simultaneous"
    SEQUENTIAL = "sequential"


class ReplacementOrder(Enum):
    """The order in which replacements are dealt (rules §5.2)."""

    MANO_FIRST = "mano_first"
    DEALER_FIRST = "dealer_first"


class ReshufflePool(Enum):
    """Which discards form a new stock when the stock runs out (rules §5.2)."""

    EXCLUDE_PENDING_OWN = "exclude_pending_own"
    ALL_DISCARDS = "all_discards"


class Declarations(Enum):
    """Whether the referee or the bots announce pares/juego holdings (rules §7)."""

    AUTOMATIC = "automatic"
    BOT_DECLARES = "bot_declares"


class SenasMode(Enum):
    """Whether señas are off, chosen by bots, or sent by the referee (rules §12.3)."""

    OFF = "off"
    VOLUNTARY = "voluntary"
    AUTOMATIC = "automatic"


class SenaTruth(Enum):
    """Exact or at-least counts for the count señas (rules §12.3)."""

    EXACT = "exact"
    AT_LEAST = "at_least"


class SenaViolationPolicy(Enum):
    """What follows a false seña (rules §12.3)."""

    REJECT = "reject"
    REJECT_AND_PENALISE = "reject_and_penalise"


class IllegalActionPolicy(Enum):
    """What follows an illegal action from a seat that was asked (rules §13)."""

    RETRY = "retry"
    DEFAULT_ACTION = "default_action"


# Options whose value is one of these is rejected: v1 does not specify their mechanics (rules §14, §16).
_UNSUPPORTED: dict[str, object] = {
    "mus_decision_mode": MusDecisionMode.FEM_OUT_OF_TURN,
    "first_hand_mus_corrido": True,
    "sena_violation_policy": SenaViolationPolicy.REJECT_AND_PENALISE,
    "fem_minimum_hand_ordago_penalty": True,
}

TARGET_SCORE_CAP = "target_score"

MAX_DECISION_TIMEOUT_S = 3600.0
"""The longest decision time: clocks cross the wire as uint32 milliseconds, and an hour is already generous."""
MAX_TIME_BANK_S = 86400.0
"""The largest time bank (a day), well inside a uint32 of milliseconds (about 49.7 days)."""
MAX_POINTS = 1000
"""The largest `target_score` and integer `max_total_stake`. Every bet amount up to them is a listed legal action
(`LegalActions.expand`, what `Match.legal_actions` returns), so a target of a billion made one betting decision
take gigabytes; Mus is played to 30-60 points."""
MAX_SENAS_PER_WINDOW = 17
"""Every seña of the vocabulary once (rules §12.1): what one window, and one message, may carry."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Rules:
    """Every rules option with its default (rules §14). Build it with `Rules.from_options`."""

    deck_mode: DeckMode = DeckMode.OCHO_REYES
    real_31: Real31 = Real31.OFF
    target_score: int = 40
    games_to_win_vaca: int = 2
    vacas_to_win_match: int = 1
    min_bet: int = 2
    min_raise: int = 2
    max_total_stake: int | str | None = TARGET_SCORE_CAP
    deje_mode: DejeMode = DejeMode.PREVIOUS_STAKE
    refused_jugada_bonus_to: RefusedJugadaBonusTo = RefusedJugadaBonusTo.BETTOR_TEAM
    paso_point_in_pares_juego: bool = False
    punto_bonus: bool = True
    ordago_resolution: OrdagoResolution = OrdagoResolution.IMMEDIATE
    response_mode: ResponseMode = ResponseMode.SEQUENTIAL_QUIERO_PREVAILS
    mus_decision_mode: MusDecisionMode = MusDecisionMode.SEQUENTIAL
    first_hand_mus_corrido: bool = False
    max_mus_rounds: int | None = 20
    discard_min: int = 1
    discard_max: int = 4
    discard_submission: DiscardSubmission = DiscardSubmission.SIMULTANEOUS
    replacement_order: ReplacementOrder = ReplacementOrder.MANO_FIRST
    reshuffle_pool: ReshufflePool = ReshufflePool.EXCLUDE_PENDING_OWN
    declarations: Declarations = Declarations.AUTOMATIC
    senas_mode: SenasMode = SenasMode.VOLUNTARY
    sena_truth: SenaTruth = SenaTruth.EXACT
    sena_la_bonita: bool = False
    max_senas_per_window: int = 3
    sena_leak_probability: float = 0.2
    sena_violation_policy: SenaViolationPolicy = SenaViolationPolicy.REJECT
    decision_timeout_s: float = 10.0
    time_bank_s: float = 60.0
    illegal_action_policy: IllegalActionPolicy = IllegalActionPolicy.RETRY
    max_faults_before_forfeit: int = 3
    fem_minimum_hand_ordago_penalty: bool = False

    @property
    def senas_per_window(self) -> int:
        """How many señas a seat may send in one window: none unless they are voluntary (rules §12.3 3, 6)."""
        return self.max_senas_per_window if self.senas_mode is SenasMode.VOLUNTARY else 0

    @property
    def stake_cap(self) -> int | None:
        """The largest pending total a bet may reach; None when unbounded (rules §8.1)."""
        if self.max_total_stake == TARGET_SCORE_CAP:
            return self.target_score
        assert self.max_total_stake is None or isinstance(self.max_total_stake, int)
        return self.max_total_stake

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None = None, **overrides: Any) -> Rules:
        """Validate options given with the keys and values of rules §14 (JSON types)."""
        merged = dict(options or {})
        merged.update(overrides)
        values: dict[str, Any] = {}
        for key, raw in merged.items():
            if key not in _OPTION_TYPES:
                raise RulesError(f"unknown rules option {key!r}; known options: {', '.join(OPTION_KEYS)}")
            values[key] = _convert(key, raw)
        rules = cls(**values)
        rules.validate()
        return rules

    def with_options(self, options: Mapping[str, Any]) -> Rules:
        """These rules with some options changed, validated."""
        merged = self.to_options()
        merged.update(options)
        return Rules.from_options(merged)

    def validate(self) -> None:
        """Check types, ranges, cross-option constraints and v1 support; raise `RulesError` naming the problem.

        Types are checked here too, not only in `from_options`: a `Rules` built directly in Python with a
        string for an enum, or `True` for an integer, would otherwise play some other rule.
        """
        for field in dataclasses.fields(self):
            _check_type(field.name, getattr(self, field.name))
        for key, bad in _UNSUPPORTED.items():
            if getattr(self, key) == bad:
                shown = bad.value if isinstance(bad, Enum) else json.dumps(bad)
                raise RulesError(f"rules option {key}={shown} is unsupported in v1 (rules §16)")
        for key, low in (
            ("target_score", 1),
            ("games_to_win_vaca", 1),
            ("vacas_to_win_match", 1),
            ("min_bet", 1),
            ("min_raise", 1),
            ("max_senas_per_window", 0),
            ("max_faults_before_forfeit", 1),
        ):
            if getattr(self, key) < low:
                raise RulesError(f"rules option {key} must be at least {low}, got {getattr(self, key)}")
        if self.max_mus_rounds is not None and self.max_mus_rounds < 1:
            raise RulesError(f"rules option max_mus_rounds must be at least 1 or null, got {self.max_mus_rounds}")
        if isinstance(self.max_total_stake, int) and self.max_total_stake < 2:
            raise RulesError(f"rules option max_total_stake must be at least 2, got {self.max_total_stake}")
        for key in ("target_score", "max_total_stake"):
            value = getattr(self, key)
            if isinstance(value, int) and value > MAX_POINTS:
                raise RulesError(f"rules option {key} must be at most {MAX_POINTS}, got {value}")
        for key in ("discard_min", "discard_max"):
            if not 1 <= getattr(self, key) <= 4:
                raise RulesError(f"rules option {key} must be between 1 and 4, got {getattr(self, key)}")
        if self.discard_min > self.discard_max:
            raise RulesError(
                f"rules option discard_min ({self.discard_min}) must not exceed discard_max ({self.discard_max})"
            )
        if not 0.0 <= self.sena_leak_probability <= 1.0:
            raise RulesError(
                f"rules option sena_leak_probability must be between 0 and 1, got {self.sena_leak_probability}"
            )
        if self.max_senas_per_window > MAX_SENAS_PER_WINDOW:
            raise RulesError(
                f"rules option max_senas_per_window must be at most {MAX_SENAS_PER_WINDOW} (the size of the seña"
                f" vocabulary, rules §12.1), got {self.max_senas_per_window}"
            )
        if not 0 < self.decision_timeout_s <= MAX_DECISION_TIMEOUT_S:
            raise RulesError(
                f"rules option decision_timeout_s must be above 0 and at most {MAX_DECISION_TIMEOUT_S:g},"
                f" got {self.decision_timeout_s}"
            )
        if not 0 <= self.time_bank_s <= MAX_TIME_BANK_S:
            raise RulesError(
                f"rules option time_bank_s must be at least 0 and at most {MAX_TIME_BANK_S:g}, got {self.time_bank_s}"
            )

    def to_options(self) -> dict[str, Any]:
        """Every option as JSON values with the keys of rules §14."""
        out: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            out[field.name] = value.value if isinstance(value, Enum) else value
        return out

    def changed_options(self) -> dict[str, Any]:
        """Only the options that differ from the defaults."""
        defaults = Rules().to_options()
        return {key: value for key, value in self.to_options().items() if defaults[key] != value}


def _option_types() -> dict[str, str]:
    types: dict[str, str] = {}
    for field in dataclasses.fields(Rules):
        types[field.name] = str(field.type)
    return types


_OPTION_TYPES = _option_types()
OPTION_KEYS: tuple[str, ...] = tuple(_OPTION_TYPES)

_ENUMS: dict[str, type[Enum]] = {
    "deck_mode": DeckMode,
    "real_31": Real31,
    "deje_mode": DejeMode,
    "refused_jugada_bonus_to": RefusedJugadaBonusTo,
    "ordago_resolution": OrdagoResolution,
    "response_mode": ResponseMode,
    "mus_decision_mode": MusDecisionMode,
    "discard_submission": DiscardSubmission,
    "replacement_order": ReplacementOrder,
    "reshuffle_pool": ReshufflePool,
    "declarations": Declarations,
    "senas_mode": SenasMode,
    "sena_truth": SenaTruth,
    "sena_violation_policy": SenaViolationPolicy,
    "illegal_action_policy": IllegalActionPolicy,
}


def _convert(key: str, raw: Any) -> Any:
    """Turn a JSON value into the typed field value, or raise `RulesError` saying what was expected."""
    kind = _OPTION_TYPES[key]
    if key in _ENUMS:
        enum = _ENUMS[key]
        allowed = [member.value for member in enum]
        if raw not in allowed:
            raise RulesError(f"rules option {key} must be one of {', '.join(allowed)}; got {json.dumps(raw)}")
        return enum(raw)
    if kind == "bool":
        if not isinstance(raw, bool):
            raise RulesError(f"rules option {key} must be true or false; got {json.dumps(raw)}")
        return raw
    if kind == "int":
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise RulesError(f"rules option {key} must be an integer; got {json.dumps(raw)}")
        return raw
    if kind == "float":
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise RulesError(f"rules option {key} must be a number; got {json.dumps(raw)}")
        try:
            value = float(raw)
        except OverflowError:  # only an integer beyond any float, e.g. 10**400, gets here
            bits = int(raw).bit_length()
            raise RulesError(f"rules option {key} is out of range: an integer of {bits} bits") from None
        if not math.isfinite(value):
            raise RulesError(f"rules option {key} must be a finite number; got {raw}")
        return value
    if key == "max_mus_rounds":
        if raw is None or (isinstance(raw, int) and not isinstance(raw, bool)):
            return raw
        raise RulesError(f"rules option max_mus_rounds must be an integer or null; got {json.dumps(raw)}")
    if key == "max_total_stake":
        if raw is None or raw == TARGET_SCORE_CAP or (isinstance(raw, int) and not isinstance(raw, bool)):
            return raw
        raise RulesError(
            f'rules option max_total_stake must be "target_score", an integer or null; got {json.dumps(raw)}'
        )
    raise AssertionError(f"no converter for option {key} of type {kind}")


def _check_type(key: str, value: Any) -> None:
    """Raise `RulesError` when a field holds a value of the wrong type (an enum's string instead of its member)."""
    enum = _ENUMS.get(key)
    if enum is not None:
        if not isinstance(value, enum):
            raise RulesError(f"rules option {key} must be a {enum.__name__}; got {value!r}")
        return
    _convert(key, value)


def parse_option_assignment(text: str) -> tuple[str, Any]:
    """Read a command-line `key=value`; the value is JSON when it parses as JSON, else a string."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise RulesError(f"option {text!r} must be written key=value, for example target_score=30")
    value = value.strip()
    try:
        parsed: Any = json.loads(value)
    except json.JSONDecodeError:
        parsed = value
    return key, parsed


def rules_from_assignments(assignments: list[str], base: Mapping[str, Any] | None = None) -> Rules:
    """Rules from `key=value` strings on top of `base` options; every key is validated."""
    options = dict(base or {})
    for text in assignments:
        key, value = parse_option_assignment(text)
        options[key] = value
    return Rules.from_options(options)
