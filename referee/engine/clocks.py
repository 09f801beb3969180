"""The clocks of rules §13, as pure arithmetic: how long a decision may take and what it costs the seat's bank.

A decision has `decision_timeout_s`; past it, the seat's time bank pays, and a timeout happens only when both are
used up. A seña-round request has `decision_timeout_s` only and never draws on the bank. The referee's table
keeps the time (it owns the clock); these functions are the rule it applies, so no rule of Mus lives there.
"""

from __future__ import annotations

from referee.engine.match import DecisionKind
from referee.engine.rules import Rules


def draws_on_bank(kind: DecisionKind) -> bool:
    """Whether a decision of this kind may run past `decision_timeout_s` on the seat's bank (not a seña round)."""
    return kind is not DecisionKind.SENAS


def allowed_s(kind: DecisionKind, bank_s: float, rules: Rules) -> float:
    """The longest a decision may take before it times out, with `bank_s` left in the seat's bank."""
    return rules.decision_timeout_s + (bank_s if draws_on_bank(kind) else 0.0)


def time_left(kind: DecisionKind, elapsed_s: float, bank_s: float, rules: Rules) -> tuple[float, float]:
    """(decision time left, bank left) after `elapsed_s` of a decision, as a request or a rejection reports them."""
    bank = bank_s if draws_on_bank(kind) else 0.0
    timeout = rules.decision_timeout_s
    if elapsed_s <= timeout:
        return timeout - elapsed_s, bank
    return 0.0, max(bank - (elapsed_s - timeout), 0.0)


def bank_after(kind: DecisionKind, elapsed_s: float, bank_s: float, rules: Rules) -> float:
    """The seat's bank once a decision answered after `elapsed_s` is paid for (a timeout leaves it empty)."""
    if not draws_on_bank(kind) or elapsed_s <= rules.decision_timeout_s:
        return bank_s
    return max(bank_s - (elapsed_s - rules.decision_timeout_s), 0.0)
