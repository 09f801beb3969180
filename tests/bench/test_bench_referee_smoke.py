"""`mus bench referee --quick`: it runs end to end and prints the documented keys.

A smoke test, not a measurement: no figure is compared with a target.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from bench import referee
from workers.cli.main import app

SHORT_WINDOW = replace(referee.QUICK, level_warmup_s=0.1, level_window_s=0.2)
"""`--quick` with a load level of 0.1 s of warm-up and 0.2 s of window, for a test that asserts which rows the
table prints, not their values (two tables join in tens of ms, so the figures are still numbers as a rule)."""
LEVEL_WINDOW = replace(referee.QUICK, level_warmup_s=0.2, level_window_s=0.5, levels=(1, 16))
"""`--quick` with two of its load levels, each's warm-up and window cut from 0.3 s and 1 s: one table (one client
process) and sixteen (as many client processes as any level starts, `CLIENT_PROCESSES`), which join in about
0.1 s on an idle machine, so both still have round trips to report. The levels of 4 and 100 tables run the same
code with other counts; each would start four more client processes and saturate both cores for 0.7 s."""
FLOOD_WINDOW = replace(referee.QUICK, level_window_s=0.5)
"""`--quick` with each flood phase's window 0.5 s instead of 1 s (the warm-up and the flood's lead unchanged): two
honest tables make hundreds of decisions a second even during the flood, so there are still round trips and
memory samples to report in each window."""


def test_bench_referee_quick_prints_the_round_trips_their_breakdown_and_every_level(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The command runs as typed, on `LEVEL_WINDOW`."""
    monkeypatch.setattr(referee, "QUICK", LEVEL_WINDOW)
    result = CliRunner().invoke(app, ["bench", "referee", "--quick", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    for key in ("raw_rtt_median_us", "referee_rtt_median_us", "ratio", "referee_act_us_median", "referee_rest_us"):
        assert isinstance(data[key], float) and data[key] == data[key], key  # a number, not NaN
    assert data["raw_rtt_median_us"] > 0 and data["referee_act_us_median"] > 0
    assert data["act_over_engine"] == pytest.approx(
        data["referee_act_us_median"] / data["engine_us_per_decision_median"]
    )
    assert 0 < data["referee_engine_us_median"] < data["referee_act_us_median"], "the engine's step is part of an Act"
    assert data["act_over_engine_in_referee"] == pytest.approx(
        data["referee_act_us_median"] / data["referee_engine_us_median"]
    )
    assert data["ratio"] == pytest.approx(data["referee_rtt_median_us"] / data["raw_rtt_median_us"])
    assert data["round_trip_stream_errors"] == 0
    assert [level["tables"] for level in data["concurrency"]] == [1, 16], "every level asked, in order"
    for level in data["concurrency"]:
        assert level["matches"] >= level["tables"] and level["timeouts"] == 0 and level["stream_errors"] == 0, level
        assert level["stream_errors_by_status"] == {} and level["incidents"] == 0, level
        assert level["client_processes"] == min(level["tables"], 4), level
        assert level["decisions_per_s"] > 0, level
        if level["decisions_per_s"] > 0:
            assert 0 < level["decision_latency_p50_ms"] <= level["decision_latency_p99_ms"], level
        assert level["referee_rss_mb"] is None or level["referee_rss_mb"] > 0, level


def test_bench_referee_tables_prints_the_decision_latency_and_the_referees_memory_in_its_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two tables: not one of the default levels, and two client processes where six tables would start four
    (the run above starts four at its larger levels). The command runs as typed, on `SHORT_WINDOW`."""
    monkeypatch.setattr(referee, "QUICK", SHORT_WINDOW)
    result = CliRunner().invoke(app, ["bench", "referee", "--quick", "--tables", "2"])
    assert result.exit_code == 0, result.output
    for row in ("2 tables: decision_latency_p50_ms", "2 tables: decision_latency_p99_ms", "2 tables: referee_rss_mb"):
        assert row in result.stdout, row
    assert "2 tables: stream_errors_by_status" in result.stdout and "1 tables:" not in result.stdout


def test_bench_referee_flood_quick_reports_latency_and_memory_before_and_during_the_flood(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The command runs as typed, on `FLOOD_WINDOW`."""
    monkeypatch.setattr(referee, "QUICK", FLOOD_WINDOW)
    result = CliRunner().invoke(app, ["bench", "referee", "--flood", "--quick", "--tables", "2", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    for phase in ("before", "during"):
        level = data[phase]
        assert level["decisions_per_s"] > 0 and level["stream_errors"] == 0, level
        assert level["rtt_p99_ms"] > 0 and level["referee_rss_mb_max"] > 0, level
    assert data["flood_messages"] > 0 and data["flood_acts"] > 0
