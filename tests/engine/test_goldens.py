"""Golden transcripts of seeded self-play matches: any change to what the engine does shows up as a diff.

`pytest --regen-goldens` rewrites the files in tests/data/goldens/; review the diff before committing it.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from referee.engine.rules import Rules
from referee.engine.selfplay import play_random_match
from referee.engine.transcript import render_transcript

GOLDENS = Path(__file__).resolve().parent.parent / "data" / "goldens"


@dataclass(frozen=True)
class GoldenCase:
    name: str
    seed: int
    options: dict[str, Any] = field(default_factory=dict)
    seat: int | None = None
    """None: the omniscient transcript (`match.events`); a seat: only what that seat saw."""


CASES = [
    GoldenCase("defaults_seed1", 1),
    GoldenCase("4_reyes_target_30_seed2", 2, {"deck_mode": "4_reyes", "target_score": 30}),
    GoldenCase("senas_automatic_seed3", 3, {"senas_mode": "automatic"}),
    GoldenCase("seat0_view_seed4", 4, seat=0),
    GoldenCase("mus_and_reshuffle_seed1218", 1218),  # four rounds of discards and a reshuffle of the stock
    GoldenCase(
        "variants_seed17",
        17,
        {
            "max_total_stake": None,
            "ordago_resolution": "count_prior",
            "response_mode": "both_answer_most_aggressive",
            "discard_submission": "sequential",
            "replacement_order": "dealer_first",
            "reshuffle_pool": "all_discards",
            "declarations": "bot_declares",
            "paso_point_in_pares_juego": True,
            "deje_mode": "fem_plus_one",
        },
    ),
]


def transcript(case: GoldenCase) -> str:
    match = play_random_match(Rules.from_options(case.options), case.seed)
    events = match.events if case.seat is None else match.events_for(case.seat)
    header = f"# options {case.options}, seed {case.seed}, view {'all' if case.seat is None else f'seat {case.seat}'}\n"
    return header + render_transcript(events)


def check_golden(path: Path, actual: str, regen: bool) -> None:
    """Compare `actual` with the golden file, failing with a unified diff; with `regen`, rewrite the file."""
    if regen:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual)
        return
    if not path.exists():
        pytest.fail(f"golden file {path} is missing; run `pytest --regen-goldens` and review it")
    expected = path.read_text()
    if actual != expected:
        diff = difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            fromfile=f"{path.name} (golden)",
            tofile=f"{path.name} (engine now)",
        )
        pytest.fail(
            f"the transcript differs from {path}; if intended, run `pytest --regen-goldens`:\n{''.join(diff)}",
            pytrace=False,
        )


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_seeded_self_play_matches_its_golden_transcript(case: GoldenCase, regen_goldens: bool) -> None:
    check_golden(GOLDENS / f"{case.name}.txt", transcript(case), regen_goldens)


def test_the_same_seed_gives_the_same_transcript_byte_for_byte() -> None:
    case = CASES[-1]
    assert transcript(case) == transcript(case)


def test_a_seat_view_golden_holds_no_other_seats_cards() -> None:
    text = transcript(next(case for case in CASES if case.seat is not None))
    dealt = [line for line in text.splitlines() if " is dealt " in line]
    assert dealt and all(line.startswith("  seat 0 is dealt") for line in dealt)


def test_a_golden_mismatch_fails_with_a_unified_diff(tmp_path: Path) -> None:
    path = tmp_path / "g.txt"
    path.write_text("line 1\nline 2\n")
    with pytest.raises(pytest.fail.Exception) as failure:
        check_golden(path, "line 1\nline two\n", regen=False)
    message = str(failure.value)
    assert "--- g.txt (golden)" in message and "+++ g.txt (engine now)" in message
    assert "-line 2" in message and "+line two" in message
    check_golden(path, "line 1\nline 2\n", regen=False)


def test_regenerating_a_golden_rewrites_the_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "g.txt"
    check_golden(path, "new\n", regen=True)
    assert path.read_text() == "new\n"
    with pytest.raises(pytest.fail.Exception, match="is missing"):
        check_golden(tmp_path / "absent.txt", "x\n", regen=False)
