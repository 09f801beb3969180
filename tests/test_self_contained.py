"""The project stands on its own: a user's clone has nothing beside it, so no tracked file may point outside it."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.conftest import REPO

OUTSIDE = "../" + "shared"
"""The team's folder beside the checkout, which a user's clone never has (spelled so this file does not match)."""


def tracked_files() -> list[str]:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    listing = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True)
    return [name for name in listing.stdout.decode().split("\0") if name]


def test_no_tracked_file_mentions_the_folder_beside_the_checkout() -> None:
    offenders = []
    for name in tracked_files():
        path = REPO / name
        if path.is_file() and OUTSIDE.encode() in path.read_bytes():
            offenders.append(name)
    assert offenders == []


def test_the_rules_reference_and_the_vectors_are_in_the_repository() -> None:
    names = set(tracked_files())
    assert {
        "docs/rules.md",
        "tests/vectors/README.md",
        "tests/vectors/hands.json",
        "tests/vectors/scenarios.json",
    } <= names
