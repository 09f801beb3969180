"""`mus bench league`'s pinning and CPU accounting, on their own: a pinned child stays on its core, and the
per-component figures are the workers' log lines added up as documented."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from bench.league import cpu_components, warm


def test_cpu_components_add_up_each_workers_lines_and_leave_its_start_up_out(tmp_path: Path) -> None:
    log = tmp_path / "cpu.jsonl"
    lines = [
        {"pid": 1, "bots_s": 0.4, "referee_s": 0.03, "database_s": 0.01, "cpu_before_s": 1.0, "cpu_after_s": 1.05},
        {"pid": 1, "bots_s": 0.4, "referee_s": 0.03, "database_s": 0.01, "cpu_before_s": 1.06, "cpu_after_s": 1.11},
        {"pid": 2, "bots_s": 0.2, "referee_s": 0.02, "database_s": 0.02, "cpu_before_s": 2.0, "cpu_after_s": 2.04},
    ]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    figures = cpu_components(log, 3, scheduler_s=0.3)["cpu_s_per_match"]
    assert figures["bots"] == pytest.approx(1.0 / 3, abs=1e-4)
    assert figures["referee"] == pytest.approx(0.08 / 3, abs=1e-4)
    assert figures["database"] == pytest.approx(0.04 / 3, abs=1e-4)
    # pid 1: 0.11 s from its first claim to its last result, 0.08 of it in matches; pid 2: none left over
    assert figures["worker"] == pytest.approx(0.03 / 3, abs=1e-4)
    assert figures["scheduler"] == pytest.approx(0.1, abs=1e-4)
    assert figures["total"] == pytest.approx(sum(v for k, v in figures.items() if k != "total"), abs=1e-3)


def test_the_warm_matches_are_those_that_started_no_pooled_process_each_timed_to_its_workers_next_claim() -> None:
    """Worker a claims at 0, 1 and 3 s (result of the last at 4 s), worker b at 0 and 2 s (results 2 and 5 s); the
    first match of each started pooled processes. Warm: a's at 1 s (to its next claim, 2 s) and 3 s (to its result,
    1 s), b's at 2 s (to its result, 3 s): a's rate 2 / 3 s, b's 1 / 3 s, together 1 a second. A match without a log
    line is not counted."""
    at = datetime(2026, 1, 1)
    played = [
        (3, at + timedelta(seconds=3), at + timedelta(seconds=4), "a"),
        (1, at, at + timedelta(seconds=1), "a"),
        (2, at + timedelta(seconds=1), at + timedelta(seconds=2), "a"),
        (4, at, at + timedelta(seconds=2), "b"),
        (5, at + timedelta(seconds=2), at + timedelta(seconds=5), "b"),
        (6, at + timedelta(seconds=5), at + timedelta(seconds=6), "b"),
    ]
    lines = [
        {"match_id": 1, "bots_s": 0.9, "referee_s": 0.5, "database_s": 0.1, "pool_started": 4},
        {"match_id": 2, "bots_s": 0.1, "referee_s": 0.02, "database_s": 0.01, "pool_started": 0},
        {"match_id": 3, "bots_s": 0.3, "referee_s": 0.04, "database_s": 0.03, "pool_started": 0},
        {"match_id": 4, "bots_s": 0.9, "referee_s": 0.5, "database_s": 0.1, "pool_started": 2},
        {"match_id": 5, "bots_s": 0.2, "referee_s": 0.03, "database_s": 0.02, "pool_started": 0},
    ]
    figures = warm(played, lines)
    assert figures["warm_matches"] == 3
    assert figures["warm_matches_per_s"] == pytest.approx(2 / 3 + 1 / 3)
    assert figures["warm_cpu_s_per_match"] == pytest.approx({"bots": 0.2, "referee": 0.03, "database": 0.02})
    assert warm(played[:2], lines[:1])["warm_matches_per_s"] is None, "no warm match, no rate"
