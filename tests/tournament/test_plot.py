"""The Elo-over-time plot writes a PNG without a display."""

from __future__ import annotations

from pathlib import Path

from tests.tournament.simulate import simulate_league
from workers.tournament.ratings import elo_over_time
from workers.tournament.standings import plot_elo_over_time

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_the_plot_is_a_non_empty_png(tmp_path: Path) -> None:
    series = elo_over_time(simulate_league({"a": 1400.0, "b": 1500.0, "c": 1600.0}, 6, seed=2))
    path = tmp_path / "elo.png"
    plot_elo_over_time(series, path)
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 5_000


def test_a_league_without_results_still_gets_a_png(tmp_path: Path) -> None:
    path = tmp_path / "empty.png"
    plot_elo_over_time({}, str(path))
    assert path.read_bytes().startswith(PNG_SIGNATURE)
