"""Seats over standard input (`run_seats`, `run_main` with MUS_SEATS=stdin): the line format, and that a bad
line or a refused seat is reported and the next seat is still played. Real matches: tests/workers/test_pool.py."""

from __future__ import annotations

import functools

import pytest

from clients.sdk import runner
from clients.sdk.bot import Bot
from clients.sdk.errors import SdkError
from clients.sdk.runner import SeatOffer, run_seats


def test_a_seat_line_names_the_referee_and_the_seat_token() -> None:
    offer = SeatOffer.from_line('{"referee": "unix:/run/mus/match-1.sock", "seat_token": "t", "later": 1}\n')
    assert offer == SeatOffer("unix:/run/mus/match-1.sock", "t"), "unknown keys are ignored"


def test_a_seat_line_may_name_where_to_play_over_frames() -> None:
    line = '{"referee": "unix:/run/mus/referee.sock", "seat_token": "t", "frames": "unix:/run/mus/play.sock"}'
    assert SeatOffer.from_line(line).frames == "unix:/run/mus/play.sock"


def test_a_bot_that_plays_over_frames_starts_without_importing_grpc_or_asyncio() -> None:
    """Half of a small Python bot's start-up is grpc's import, which frames do not need (docs/pool.md); asyncio
    (30 ms) serves only a seat played in process (`play_in_process`)."""
    import subprocess
    import sys

    code = (
        "import sys, clients.sdk, clients.bots.random_bot, bench.league_bot;"
        " print(sorted(m for m in sys.modules if m.split('.')[0] in ('grpc', 'asyncio')))"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"


@pytest.mark.parametrize("line", ["not json", '{"referee": "x"}', "[1, 2]"])
def test_a_line_that_is_not_a_seat_is_an_sdk_error_that_quotes_it(line: str) -> None:
    with pytest.raises(SdkError, match="not a seat line"):
        SeatOffer.from_line(line)


def test_run_seats_reports_a_bad_line_and_an_unreachable_referee_and_goes_on_to_the_end_of_its_input(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The unreachable referee is tried again for a short grace, not run_bot's 10 s: how long is not the point here.
    monkeypatch.setattr(runner, "run_bot", functools.partial(runner.run_bot, grace_s=0.5))
    made: list[Bot] = []

    def factory() -> Bot:
        made.append(Bot())
        return made[-1]

    lines = iter(["garbage\n", "\n", '{"referee": "unix:/nonexistent/referee.sock", "seat_token": "t"}\n'])
    results = run_seats(factory, lines)
    assert len(results) == 2 and all(isinstance(result, SdkError) for result in results)
    assert len(made) == 1, "a fresh bot for the one well-formed seat"
