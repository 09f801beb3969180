"""Shared test fixtures: where the team's shared rule vectors live."""

from __future__ import annotations

import os
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


def shared_dir() -> Path:
    """`../shared` beside the checkout (MUS_SHARED_DIR overrides it)."""
    return Path(os.environ.get("MUS_SHARED_DIR", REPO.parent / "shared"))


@pytest.fixture(scope="session")
def vectors_dir() -> Path:
    path = shared_dir() / "vectors"
    if not path.is_dir():
        pytest.fail(f"the rule vectors are missing: expected them in {path} (set MUS_SHARED_DIR)")
    return path
