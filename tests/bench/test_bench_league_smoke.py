"""`mus bench league --quick` on the embedded broker only: it runs end to end and prints the documented keys.

A smoke test, not a measurement: no figure is asserted beyond being a positive number.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from clients.cpp.build import missing_toolchain
from workers.cli.main import app

runner = CliRunner()


@pytest.mark.parametrize("bot", ["instant", "cpp"])
def test_bench_league_quick_on_the_embedded_broker_prints_one_json_object_with_its_figures(bot: str) -> None:
    if bot == "cpp" and (missing := missing_toolchain()):
        pytest.skip(f"C++ bot not built: {missing}")
    result = runner.invoke(app, ["bench", "league", "--quick", "--broker", "embedded", "--bot", bot, "--json"])
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
    ):
        assert key in data, key
    assert set(data["configurations"]) == {"embedded_1", "embedded_2"}, "only the embedded broker was asked"
    for name, config in data["configurations"].items():
        assert config["completed"], (name, config)
        assert config["matches"] == data["matches"] == 6
        assert config["matches_per_s"] > 0 and config["wall_s"] > 0
        assert config["faults"] == 0
    assert data["identical_results"] is True, "the same league plays the same matches in every configuration"
    assert data["scaling_2_over_1"]["embedded"] > 0
    assert data["embedded_over_redis"] == {"1": None, "2": None}, "no Redis run was asked"
    assert data["per_match"][bot]["startup_ms"] > 0
