"""Test fixtures for the whole suite: golden regeneration and the rule vectors."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--regen-goldens",
        action="store_true",
        default=False,
        help="rewrite the golden files under tests/data/goldens/ from the engine's current output",
    )


@pytest.fixture(scope="session")
def regen_goldens(request: pytest.FixtureRequest) -> bool:
    """Whether `--regen-goldens` was given: golden tests then write their files instead of comparing."""
    return bool(request.config.getoption("--regen-goldens"))


@pytest.fixture(scope="session")
def vectors_dir() -> Path:
    """The rule vectors the engine must agree with (tests/vectors/README.md)."""
    return REPO / "tests" / "vectors"
