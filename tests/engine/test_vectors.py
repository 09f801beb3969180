"""Every case of tests/vectors through `mus rules eval`, compared with its `expected` answer."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from referee.engine.vectors import evaluate_file
from workers.cli.main import app

runner = CliRunner()


def run_eval(path: Path, *options: str) -> list[dict[str, Any]]:
    args = ["rules", "eval", str(path)]
    for option in options:
        args += ["--option", option]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def option_args(option: dict[str, Any]) -> list[str]:
    return [f"{key}={json.dumps(value) if not isinstance(value, str) else value}" for key, value in option.items()]


def test_every_hand_vector_wins_the_expected_seat(vectors_dir: Path) -> None:
    cases = json.loads((vectors_dir / "hands.json").read_text())["hand_vectors"]
    answers = run_eval(vectors_dir / "hands.json")
    assert len(answers) == len(cases) > 0
    for case, answer in zip(cases, answers, strict=True):
        assert answer == {"id": case["id"], "winner_seat": case["expected_winner_seat"]}, case["justification"]


def test_every_scenario_scores_as_expected(vectors_dir: Path) -> None:
    cases = json.loads((vectors_dir / "scenarios.json").read_text())["scoring_scenarios"]
    answers = run_eval(vectors_dir / "scenarios.json")
    assert len(answers) == len(cases) > 0
    for case, answer in zip(cases, answers, strict=True):
        expected = case["expected"]
        assert answer == {
            "id": case["id"],
            "points_this_hand": expected["points_this_hand"],
            "final_score": expected["final_score"],
            "game_winner": expected["game_winner"],
        }, case["explanation"]


def variant_cases(vectors_dir: Path) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    cases = json.loads((vectors_dir / "scenarios.json").read_text())["scoring_scenarios"]
    return [(case["id"], variant["option"], variant) for case in cases for variant in case.get("variant_results", [])]


def test_every_variant_result_under_its_options(vectors_dir: Path) -> None:
    variants = variant_cases(vectors_dir)
    assert variants, "the scenarios should carry variant_results"
    for case_id, option, variant in variants:
        answers = {answer["id"]: answer for answer in run_eval(vectors_dir / "scenarios.json", *option_args(option))}
        answer = answers[case_id]
        assert answer["final_score"] == variant["final_score"], (case_id, option)
        assert answer["game_winner"] == variant["game_winner"], (case_id, option)


def test_a_scenario_with_a_wrong_turn_prints_an_error_line_and_goes_on(tmp_path: Path, vectors_dir: Path) -> None:
    data = json.loads((vectors_dir / "scenarios.json").read_text())
    broken = json.loads(json.dumps(data["scoring_scenarios"][0]))
    broken["id"] = "BROKEN"
    broken["actions"]["grande"] = ["S1 paso", *broken["actions"]["grande"][1:]]
    data["scoring_scenarios"] = [broken, data["scoring_scenarios"][1]]
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(data))
    answers = run_eval(path)
    assert answers[0]["id"] == "BROKEN" and "seat 1 is not asked" in answers[0]["error"]
    assert answers[1]["id"] == data["scoring_scenarios"][1]["id"] and "error" not in answers[1]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"no_such_option": 1}, "unknown rules option 'no_such_option'"),
        ({"time_bank_s": 10**400}, "time_bank_s is out of range"),
    ],
)
def test_a_bad_option_in_a_case_config_is_an_error_line_and_the_next_case_is_answered(
    tmp_path: Path, vectors_dir: Path, config: dict[str, Any], message: str
) -> None:
    data = json.loads((vectors_dir / "scenarios.json").read_text())
    first = data["scoring_scenarios"][0]
    data["scoring_scenarios"] = [dict(first, id="BAD", config=config), first]
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(data))
    bad, good = run_eval(path)
    assert bad["id"] == "BAD" and message in bad["error"]
    assert good["id"] == first["id"] and "error" not in good


@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        ("{not json", [], "is not valid JSON"),
        ("[" * 100_000 + "]" * 100_000, [], "nests its JSON too deeply"),
        ('{"something": []}', [], "neither 'hand_vectors' nor 'scoring_scenarios'"),
        ('{"hand_vectors": []}', ["--option", "no_such_key=1"], "unknown rules option 'no_such_key'"),
        ('{"hand_vectors": []}', ["--option", "target_score=-3"], "target_score must be at least 1"),
        ('{"hand_vectors": []}', ["--option", "mus_decision_mode=fem_out_of_turn"], "unsupported in v1"),
        ('{"hand_vectors": []}', ["--option", "target_score"], "must be written key=value"),
        ('{"hand_vectors": []}', ["--option", "time_bank_s=1e400"], "time_bank_s must be a finite number"),
        ('{"hand_vectors": []}', ["--option", f"time_bank_s={10**400}"], "time_bank_s is out of range"),
    ],
)
def test_bad_input_is_a_one_line_error_with_exit_code_1(
    tmp_path: Path, content: str, args: list[str], message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    result = runner.invoke(app, ["rules", "eval", str(path), *args])
    assert result.exit_code == 1
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output


GOOD_HANDS = [
    ["12o", "12c", "5o", "1o"],
    ["11o", "11c", "10o", "7o"],
    ["1c", "2o", "4o", "4c"],
    ["10c", "10e", "7c", "4e"],
]

PASSED_HAND = {
    **{lance: ["S0 paso", "S1 paso", "S2 paso", "S3 paso"] for lance in ("grande", "chica", "pares")},
    "juego": ["S0 paso"],
}
"""Every lance passed; one team alone has juego, so the hand is over before the juego line."""


@pytest.mark.parametrize(
    ("key", "case", "message"),
    [
        ("hand_vectors", {"lance": "grande", "hands": [[12, 12, 7, 4], *GOOD_HANDS[1:]]}, "hand 0 must be a list"),
        ("hand_vectors", {"lance": "grande", "hands": [1, 2, 3, 4]}, "hand 0 must be a list"),
        ("scoring_scenarios", {"hands": GOOD_HANDS, "start_score": "x"}, "'start_score' must be an object"),
        ("scoring_scenarios", {"hands": GOOD_HANDS, "start_score": {"A": -1, "B": 0}}, "'start_score' must be"),
        ("scoring_scenarios", {"hands": GOOD_HANDS, "start_score": {"A": True, "B": 0}}, "'start_score' must be"),
        ("scoring_scenarios", {"hands": GOOD_HANDS, "actions": {"grand": ["S0 paso"]}}, "unknown lance 'grand'"),
        ("scoring_scenarios", {"hands": GOOD_HANDS, "actions": {"grande": "S0 paso"}}, "must be a list of strings"),
        ("hand_vectors", {"lance": "punto", "hands": GOOD_HANDS}, "punto is only played when nobody has juego"),
        ("scoring_scenarios", {"hands": GOOD_HANDS, "actions": PASSED_HAND}, "'S0 paso': the hand is already over"),
        ("scoring_scenarios", {"hands": GOOD_HANDS, "actions": {"chica": ["S0 paso"]}}, "listed under chica, but the"),
    ],
)
def test_a_malformed_case_is_an_error_line_that_says_what_is_wrong_and_the_next_case_is_answered(
    tmp_path: Path, vectors_dir: Path, key: str, case: dict[str, Any], message: str
) -> None:
    file = "hands.json" if key == "hand_vectors" else "scenarios.json"
    good = json.loads((vectors_dir / file).read_text())[key][0]
    path = tmp_path / "cases.json"
    path.write_text(json.dumps({key: [{"id": "BAD", **case}, good]}))
    bad, answered = run_eval(path)
    assert bad["id"] == "BAD" and message in bad["error"], bad
    assert answered["id"] == good["id"] and "error" not in answered


def test_a_file_with_both_kinds_of_case_answers_both(tmp_path: Path, vectors_dir: Path) -> None:
    hands = json.loads((vectors_dir / "hands.json").read_text())["hand_vectors"][:2]
    scenarios = json.loads((vectors_dir / "scenarios.json").read_text())["scoring_scenarios"][:2]
    path = tmp_path / "both.json"
    path.write_text(json.dumps({"scoring_scenarios": scenarios, "hand_vectors": hands}))
    answers = run_eval(path)
    assert [answer["id"] for answer in answers] == [case["id"] for case in hands + scenarios]
    assert all("error" not in answer for answer in answers)


def test_an_unknown_card_is_reported_for_its_case(tmp_path: Path) -> None:
    case = {"id": "X", "lance": "grande", "hands": [["13o", "1c", "2c", "3c"], ["4o"] * 4, ["5o"] * 4, ["6o"] * 4]}
    path = tmp_path / "cards.json"
    path.write_text(json.dumps({"hand_vectors": [case]}))
    [answer] = run_eval(path)
    assert answer["id"] == "X" and "unknown card '13o'" in answer["error"]


def test_a_missing_file_is_a_one_line_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["rules", "eval", str(tmp_path / "nope.json")])
    assert result.exit_code == 1 and "cannot read" in result.stderr


# ---------------------------------------------------------------- any JSON at all


SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6)
JSON = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=12,
)
CARD = st.sampled_from([f"{rank}{suit}" for rank in (1, 2, 3, 4, 5, 6, 7, 10, 11, 12) for suit in "oceb"])
LANCE = st.sampled_from(["grande", "chica", "pares", "juego", "punto"])
ACTION = st.builds(
    "S{} {}".format, st.integers(-1, 4), st.sampled_from(["paso", "envido 2", "mas 2", "quiero", "no_quiero", "ordago"])
)
# Each field: nearly right (what a typo makes) or any JSON at all.
FIELDS = {
    "id": JSON,
    "lance": LANCE | JSON,
    "hands": st.lists(st.lists(CARD | SCALARS, max_size=5), min_size=3, max_size=5) | JSON,
    "variant": st.sampled_from(["8_reyes", "4_reyes"]) | JSON,
    "config": st.dictionaries(st.sampled_from(["target_score", "deje_mode", "punto_bonus", "nope"]), SCALARS) | JSON,
    "options": JSON,
    "start_score": st.fixed_dictionaries({"A": SCALARS, "B": SCALARS}) | JSON,
    "actions": st.dictionaries(LANCE | st.text(max_size=6), st.lists(ACTION | SCALARS, max_size=4)) | JSON,
}


@functools.cache
def vector_cases(path: Path, kind: str) -> tuple[dict[str, Any], ...]:
    """The cases of one vector file, read once for the 300 examples below (each changes a copy of its case)."""
    return tuple(json.loads(path.read_text())[kind])


@settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), kind=st.sampled_from(["hand_vectors", "scoring_scenarios"]))
def test_a_case_with_any_json_in_any_field_gets_an_answer_or_an_error_line(
    vectors_dir: Path, data: st.DataObject, kind: str
) -> None:
    """Whatever a case holds, `mus rules eval` answers it or prints its error and goes on: never a traceback."""
    file = "hands.json" if kind == "hand_vectors" else "scenarios.json"
    case = copy.deepcopy(data.draw(st.sampled_from(vector_cases(vectors_dir / file, kind)), label="case"))
    for key in data.draw(st.lists(st.sampled_from(sorted(FIELDS)), min_size=1, max_size=3, unique=True), label="keys"):
        case[key] = data.draw(FIELDS[key], label=key)
    [answer] = evaluate_file({kind: [case]}, {})
    answered = {"winner_seat"} if kind == "hand_vectors" else {"points_this_hand", "final_score", "game_winner"}
    assert set(answer) in ({"id", "error"}, {"id", *answered}), answer
