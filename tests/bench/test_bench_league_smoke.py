"""`mus bench league --quick` on the embedded broker only: it runs end to end and prints the documented keys.

A smoke test, not a measurement: no figure is asserted beyond being a positive number.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench import league
from bench.league_probe import Phases, summarize
from clients.cpp.build import missing_toolchain
from workers.cli.main import app
from workers.launcher import BotProgram
from workers.pool import BotPool

runner = CliRunner()


SMALLEST = replace(league.QUICK, bots=2, matches_per_pairing=4, engine_s=0.05)
"""`--quick` cut further for a smoke test, which asserts no figure: two entrants (one pairing, two duplicate pairs
a configuration: a worker plays a warm match once its pool is up, one worker still leaves a gap between two, and
the pooled probe still has its warm-up match and its probed one) and the engine's self-play for 0.05 s (still
whole matches, at least one)."""


def test_bench_league_quick_on_the_embedded_broker_prints_one_json_object_with_its_figures(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One run for every bot's figures: the C++ bot's league with `--pool` (its entrants persistent), whose
    per-match probe also times the instant bot, the example random bot, the C++ bot and the instant bot's pooled
    processes. Without the C++ toolchain the instant bot plays the league, and the C++ figures are left out.
    The command runs as typed, on `SMALLEST` sizes instead of `--quick`'s (the sizes are not what is tested)."""
    monkeypatch.setattr(league, "QUICK", SMALLEST)
    bot = "instant" if missing_toolchain() else "cpp"
    flags = ["--quick", "--broker", "embedded", "--bot", bot, "--pool", "--json"]
    result = runner.invoke(app, ["bench", "league", *flags])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    for key in (
        "bot",
        "rules",
        "configurations",
        "scaling_2_over_1",
        "embedded_over_redis",
        "identical_results",
        "per_match",
        "load_average_1m_before",
        "load_average_1m_after",
        "efficiency",
        "efficiency_by_configuration",
    ):
        assert key in data, key
    assert data["efficiency_of"] == "embedded_1"
    assert 0 < data["efficiency"] < 1, "the league cannot outrun the engine's own self-play on the same cores"
    assert 0 < data["warm_efficiency"] < 1
    assert set(data["configurations"]) == {"embedded_1", "embedded_2"}, "only the embedded broker was asked"
    for name, config in data["configurations"].items():
        assert config["completed"], (name, config)
        assert config["matches"] == data["matches"] == 4, "two entrants: one pairing, played as two duplicate pairs"
        assert config["matches_per_s"] > 0 and config["wall_s"] > 0
        assert config["faults"] == 0
        assert config["engine_matches_per_s"] > config["matches_per_s"]
        components = config["cpu_s_per_match"]
        assert set(components) == {"bots", "referee", "database", "worker", "scheduler", "total"}
        assert all(value >= 0 for value in components.values()), components
        assert components["referee"] > 0 and components["database"] > 0 and components["bots"] > 0
        # One worker plays each half's second match warm. Two may each start a half's processes when the hand-off
        # finds its partner busy (a loaded machine: 4 runs in 6 of the old tree's with two busy loops beside it).
        fewest = 1 if config["workers"] == 1 else 0
        assert fewest <= config["warm_matches"] <= 2, (name, config["warm_matches"])
        assert (config["warm_matches_per_s"] or 0) > 0 or config["warm_matches"] == 0
        if config["warm_matches"]:
            assert set(config["warm_cpu_s_per_match"]) == {"bots", "referee", "database"}
        if len(os.sched_getaffinity(0)) >= 2:
            assert config["pinned_cores"] == sorted(os.sched_getaffinity(0))[: config["workers"]], "one core a worker"
    assert data["identical_results"] is True, "the same league plays the same matches in every configuration"
    assert data["scaling_2_over_1"]["embedded"] > 0
    assert data["embedded_over_redis"] == {"1": None, "2": None}, "no Redis run was asked"
    assert data["per_match"].keys() == {"instant", "example_random", bot, "instant_pooled"}
    for probed in ("instant", "example_random", bot):
        phases = data["per_match"][probed]
        assert phases["startup_ms"] > 0 and phases["decisions_per_match"] > 0, (probed, phases)
    pooled = data["per_match"]["instant_pooled"]
    assert pooled["decisions_per_match"] > 0 and pooled["bot_cpu_ms"] >= 0


def test_the_default_bench_builds_nothing_and_probes_the_instant_and_example_random_bots_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the one run above leaves out, for `--bot instant` without `--pool` (the benchmark's default): nothing
    to build, and a per-match probe of the instant bot and the example random bot alone, each by its own program
    and without a pool. The run above probes these two programs for real, as the default does, and checks their
    figures; here each probed match is recorded rather than played, which spares eight bot processes."""
    assert league.prepare("instant") is None
    played = Phases(1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, decisions=33)
    probed: list[tuple[BotProgram, BotPool | None]] = []

    def record(engine: object, match_id: int, program: BotProgram, log_dir: Path, pool: BotPool | None) -> Phases:
        probed.append((program, pool))
        return played

    monkeypatch.setattr(league, "probe_match", record)
    per_match = league.probe(replace(league.QUICK, bot="instant", pool=False))
    assert per_match == {"instant": summarize([played]), "example_random": summarize([played])}
    assert [(program, pool) for program, pool in probed] == [
        (BotProgram("instant", league.BOT_COMMAND, league.BOT_SCRIPT.parent), None),
        (BotProgram("example_random", league.BOTS["random"][0]), None),
    ], "one match each, by the program itself (the instant bot in its folder), neither persistent nor pooled"
