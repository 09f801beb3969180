"""The HTML replay in headless Chromium: what each hand and step shows is what the record says.

Driven with Playwright on the system's Chromium (Debian package `chromium`), never a downloaded browser.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, Request, sync_playwright

from tests.replays.conftest import NAMES, HandFacts, read_hands
from workers.replays.html import render_html

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOT = Path("/tmp/replay.png")

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"headless Chromium is not installed at {CHROMIUM} (Debian package chromium)"
)


@dataclass
class Viewer:
    """An open replay page and everything it asked of the network or said on its console."""

    page: Page
    url: str
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def text(self, selector: str) -> str:
        return self.page.locator(selector).inner_text().strip()

    def cards(self, seat: int) -> list[str]:
        cards: list[str] = self.page.locator(f'.seat[data-seat="{seat}"] .card').evaluate_all(
            "nodes => nodes.map(node => node.dataset.card)"
        )
        return cards

    def bets(self, lance: str) -> list[tuple[int, str, int]]:
        shown: list[list[Any]] = self.page.locator(f'.lance-row[data-lance="{lance}"] .bet').evaluate_all(
            "nodes => nodes.map(n => [Number(n.dataset.seat), n.dataset.action, Number(n.dataset.amount)])"
        )
        return [(seat, action, amount) for seat, action, amount in shown]

    def points(self, lance: str) -> list[tuple[int, int, str]]:
        shown: list[list[Any]] = self.page.locator(f'.lance-row[data-lance="{lance}"] .pts').evaluate_all(
            "nodes => nodes.map(n => [Number(n.dataset.team), Number(n.dataset.points), n.dataset.reason])"
        )
        return [(team, points, reason) for team, points, reason in shown]

    def click(self, button: str, times: int = 1) -> None:
        for _ in range(times):
            self.page.click(f"#{button}")


def score_text(score: tuple[int, int] | list[int]) -> str:
    return f"{score[0]} – {score[1]}"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def page_file(record: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("replay") / "replay.html"
    path.write_text(render_html(record, title="Mus Arena · seed 32", names=NAMES), encoding="utf-8")
    return path


@pytest.fixture
def viewer(browser: Browser, page_file: Path) -> Iterator[Viewer]:
    context = browser.new_context(viewport={"width": 1360, "height": 1000})
    context.set_default_timeout(5000)
    page = context.new_page()
    opened = Viewer(page, page_file.as_uri())

    def on_console(message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            opened.errors.append(f"console {message.type}: {message.text}")

    def on_request(request: Request) -> None:
        opened.requests.append(request.url)

    page.on("console", on_console)
    page.on("pageerror", lambda error: opened.errors.append(f"page error: {error}"))
    page.on("request", on_request)
    page.goto(opened.url)
    yield opened
    context.close()


@pytest.fixture(scope="module")
def hands(record: dict[str, Any]) -> list[HandFacts]:
    return read_hands(record)


def test_first_hand_shows_each_seats_dealt_cards_as_in_the_record(viewer: Viewer, hands: list[HandFacts]) -> None:
    assert viewer.text("#hand-counter") == f"Hand 0 (1 of {len(hands)})"
    for seat in range(4):
        assert viewer.cards(seat) == hands[0].dealt[seat]
    assert viewer.text("#score") == score_text(hands[0].score_at_start)
    faces = viewer.page.locator('.seat[data-seat="0"] .card').first
    assert faces.locator(".corner").first.inner_text() == hands[0].dealt[0][0][:-1]


def test_next_hand_three_times_shows_hand_3_and_the_score_after_hand_2(viewer: Viewer, hands: list[HandFacts]) -> None:
    expected = hands[2].score_at_end()
    assert hands[3].score_at_start == expected != (0, 0), "the seed should carry a score from hand 2 into hand 3"
    viewer.click("next-hand", 3)
    assert viewer.text("#hand-counter") == f"Hand 3 (4 of {len(hands)})"
    for seat in range(4):
        assert viewer.cards(seat) == hands[3].dealt[seat]
    assert viewer.text("#score") == score_text(expected)
    viewer.click("prev-hand")
    assert viewer.text("#hand-counter") == f"Hand 2 (3 of {len(hands)})"
    for seat in range(4):
        assert viewer.cards(seat) == hands[2].dealt[seat]
    assert viewer.text("#score") == score_text(hands[2].score_at_start)


def test_stepping_shows_a_lances_bets_one_by_one_as_in_the_record(viewer: Viewer, hands: list[HandFacts]) -> None:
    events = hands[0].events
    lance = next(event["lance"] for event in events if event["kind"] == "bet")
    expected = [(e["seat"], e["action"], e["amount"]) for e in events if e["kind"] == "bet" and e["lance"] == lance]
    closed = next(e for e in events if e["kind"] == "lance_closed" and e["lance"] == lance)
    assert len(expected) >= 3, "the seed should open with a lance that has a few bets"
    shown: list[tuple[int, str, int]] = []
    for _ in range(len(events)):
        viewer.click("next-step")
        shown = viewer.bets(lance)
        assert shown == expected[: len(shown)]
        if len(shown) == len(expected):
            break
    assert shown == expected
    assert viewer.text("#hand-counter") == f"Hand 0 (1 of {len(hands)})"
    bubble = viewer.page.locator(f'.seat[data-seat="{expected[-1][0]}"] .bubble')
    assert bubble.inner_text().startswith(expected[-1][1].replace("_", " "))
    viewer.click("next-step")
    assert closed["outcome"] == "accepted", "the seed's first betting lance ends with a bet accepted"
    assert viewer.text(f'.lance-row[data-lance="{lance}"] .outcome') == f"{closed['stake']} accepted"
    # Cards kept through the mus rounds: at this point each seat holds its final hand of the hand.
    shown_hands = next(e for e in events if e["kind"] == "hands_shown")["hands"]
    for seat in range(4):
        assert viewer.cards(seat) == shown_hands[seat].split()
    viewer.click("prev-step")
    assert viewer.bets(lance) == expected
    viewer.click("prev-step")
    assert viewer.bets(lance) == expected[:-1]


def test_every_hands_end_shows_each_lances_points_and_the_score_as_scored(
    viewer: Viewer, hands: list[HandFacts]
) -> None:
    for index, hand in enumerate(hands):
        viewer.click("hand-end")
        assert viewer.text("#hand-counter") == f"Hand {index} ({index + 1} of {len(hands)})"
        scored = [event for event in hand.events if event["kind"] == "points_scored"]
        for lance in {event["lance"] for event in scored}:
            mine = [event for event in scored if event["lance"] == lance]
            assert viewer.points(lance) == [(e["team"], e["points"], e["reason"]) for e in mine]
            assert viewer.text(f'.lance-row[data-lance="{lance}"] .score-after') == score_text(mine[-1]["score"])
        for lance in ("grande", "chica", "pares", "juego"):
            if lance not in {event["lance"] for event in scored}:
                assert viewer.points(lance) == []
        assert viewer.text("#score") == score_text(hand.score_at_end())
        if index == 3:
            viewer.page.screenshot(path=str(SCREENSHOT), full_page=True)
        if index < len(hands) - 1:
            viewer.click("next-hand")
    assert viewer.page.locator("#next-hand").is_disabled()
    assert viewer.page.locator("#next-step").is_disabled()


def test_arrow_keys_step_and_change_hands(viewer: Viewer, hands: list[HandFacts]) -> None:
    viewer.page.keyboard.press("ArrowRight")
    assert viewer.text("#step-counter").startswith("step 2 /")
    viewer.page.keyboard.press("ArrowDown")
    assert viewer.text("#hand-counter") == f"Hand 1 (2 of {len(hands)})"
    assert viewer.cards(0) == hands[1].dealt[0]
    viewer.page.keyboard.press("ArrowLeft")
    assert viewer.text("#hand-counter") == f"Hand 0 (1 of {len(hands)})"
    viewer.page.keyboard.press("ArrowUp")
    assert viewer.text("#step-counter").startswith("step 1 /")


def test_page_makes_no_network_request_and_logs_no_error(viewer: Viewer) -> None:
    viewer.click("next-hand", 2)
    viewer.click("next-step", 12)
    viewer.click("hand-end")
    assert viewer.requests == [viewer.url]
    assert viewer.errors == []
    policy = viewer.page.locator('meta[http-equiv="Content-Security-Policy"]').get_attribute("content")
    assert policy is not None and "default-src 'none'" in policy


def test_the_policy_blocks_a_fetch_before_it_leaves(viewer: Viewer) -> None:
    violated = viewer.page.evaluate(
        """() => new Promise(resolve => {
            document.addEventListener("securitypolicyviolation", event => resolve(event.effectiveDirective));
            fetch("http://127.0.0.1:9/leak").catch(() => {});
        })"""
    )
    assert violated == "connect-src"
    assert all(not url.startswith("http") for url in viewer.requests)
