"""workers.pool: hosted bots whose processes play seat after seat (seats over standard input), each in its own
sandbox where this machine has one; which process plays which seat, and when one is replaced."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.league import BOT_COMMAND, BOT_SCRIPT
from referee.engine.rules import Rules
from referee.service.table import TableStatus
from workers.launcher import EXAMPLE_BOTS, BotProgram, Limits, sandbox_available
from workers.matches import PlayedMatch, play_programs
from workers.pool import BotPool

pytestmark = pytest.mark.slow  # pools of real bot processes

LIMITS = Limits() if sandbox_available() else None
"""Sandboxed where the machine allows it, as a league plays; unconfined elsewhere (the pool works the same)."""
FAST = Rules.from_options({"games_to_win_vaca": 1, "vacas_to_win_match": 1})


def instant(name: str, version: str = "1") -> BotProgram:
    return BotProgram(name, BOT_COMMAND, BOT_SCRIPT.parent, version=version)


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[BotPool]:
    made = BotPool(LIMITS, names=frozenset({"a", "b", "quitter", "random"}), log_dir=tmp_path / "pool")
    yield made
    made.close()


def play(programs: tuple[BotProgram, BotProgram], seed: int, pool: BotPool | None, **options: object) -> PlayedMatch:
    return asyncio.run(play_programs(programs, FAST, seed, sandbox=LIMITS, pool=pool, **options))  # type: ignore[arg-type]


def seat_pids(pool: BotPool) -> dict[tuple[str, int], int]:
    return {(member.program.name, seat): member.pid for (_, seat), member in pool._processes.items()}


def test_pooled_processes_play_several_matches_with_the_results_of_bots_launched_per_match(pool: BotPool) -> None:
    pids: list[dict[tuple[str, int], int]] = []
    for seed in range(3):
        pooled = play((instant("a"), instant("b")), seed, pool)
        launched = play((instant("a"), instant("b")), seed, None)
        assert pooled.table.status is TableStatus.FINISHED and not pooled.table.incidents
        assert pooled.match.outcome == launched.match.outcome, "the instant bot is seeded: same match either way"
        assert pooled.match.log == launched.match.log
        pids.append(seat_pids(pool))
    assert pids[0] == pids[1] == pids[2], "the same four processes played every match"
    assert len(set(pids[0].values())) == 4, "four seats, four processes: partners are separate processes"
    assert pool.started == 4


def test_a_bot_that_meets_itself_plays_its_four_seats_with_four_processes(pool: BotPool) -> None:
    played = play((instant("a"), instant("a")), 7, pool)
    assert played.table.status is TableStatus.FINISHED
    assert sorted(seat for _, seat in seat_pids(pool)) == [0, 1, 2, 3]
    assert len(set(seat_pids(pool).values())) == 4


def test_the_twin_of_a_duplicate_pair_is_played_by_other_processes_than_the_first_half(pool: BotPool) -> None:
    play((instant("a"), instant("b")), 11, pool)
    first_half = {pid for (name, _), pid in seat_pids(pool).items() if name == "a"}
    play((instant("b"), instant("a")), 11, pool)  # the same deal, partnerships swapped
    second_half = {seat: pid for (name, seat), pid in seat_pids(pool).items() if name == "a" and seat % 2 == 1}
    assert sorted(second_half) == [1, 3]
    assert first_half.isdisjoint(second_half.values()), "no process of a saw that deal from the other side"


def test_a_new_version_of_a_bot_gets_new_processes(pool: BotPool) -> None:
    play((instant("a"), instant("b")), 3, pool)
    before = seat_pids(pool)
    play((instant("a", version="2"), instant("b")), 4, pool)
    after = seat_pids(pool)
    assert after[("a", 0)] != before[("a", 0)] and after[("a", 2)] != before[("a", 2)]
    assert after[("b", 1)] == before[("b", 1)], "b did not change"


def test_a_pooled_process_that_crashes_is_charged_a_crash_and_replaced_for_the_next_match(
    pool: BotPool, tmp_path: Path
) -> None:
    folder = tmp_path / "quitter"
    folder.mkdir()
    (folder / "quitter.py").write_text("import sys\nsys.stdin.readline()\nsys.exit(3)\n")
    quitter = BotProgram("quitter", (sys.executable, str(folder / "quitter.py")), folder)
    played = play((quitter, instant("b")), 5, pool, join_timeout_s=5)
    assert played.table.status is TableStatus.FINISHED
    assert {(incident.seat, incident.cause) for incident in played.table.incidents} >= {(0, "crash"), (2, "crash")}
    assert ("quitter", 0) not in seat_pids(pool), "a process that crashed is not kept"
    started = pool.started
    play((instant("a"), instant("b")), 6, pool)
    assert pool.started == started + 2, "b's processes lived on; a's two were started"


def test_the_sdk_example_bot_plays_seats_over_standard_input_in_a_pool(pool: BotPool) -> None:
    random_bot = BotProgram("random", tuple(EXAMPLE_BOTS["random"]))
    for seed in range(2):
        played = play((random_bot, random_bot), seed, pool)
        assert played.table.status is TableStatus.FINISHED and not played.table.incidents
    assert pool.started == 4, "run_main kept each process for the second match"


def test_after_max_seats_a_process_is_replaced(tmp_path: Path) -> None:
    small = BotPool(LIMITS, names=frozenset({"a", "b"}), max_seats=1)
    try:
        play((instant("a"), instant("b")), 1, small)
        first = seat_pids(small)
        play((instant("a"), instant("b")), 2, small)
        assert set(first.values()).isdisjoint(seat_pids(small).values())
        assert small.started == 8
    finally:
        small.close()


def test_a_process_past_half_its_cpu_time_limit_is_replaced_before_the_limit_can_hit_a_match() -> None:
    if LIMITS is None:
        pytest.skip("no sandbox: no CPU limit")
    default = BotPool(LIMITS, names=frozenset())
    default.close()
    assert default.retire_cpu_s == LIMITS.cpu_s / 2
    tight = BotPool(LIMITS, names=frozenset({"a", "b"}), retire_cpu_s=0.0)
    try:
        played = play((instant("a"), instant("b")), 1, tight)
        assert played.table.status is TableStatus.FINISHED
        if all(member.cpu_s() is None for member in tight.processes()) and tight.retired == 0:
            pytest.skip("no cgroup counts the seats' CPU here")
        assert tight.processes() == [] and tight.retired == 4
    finally:
        tight.close()
