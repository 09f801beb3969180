"""The HTML replay is one self-contained page: nothing to fetch, the record embedded intact (no browser)."""

from __future__ import annotations

import copy
import json
from html.parser import HTMLParser
from typing import Any

import pytest

from tests.replays.conftest import NAMES
from workers.replays.html import CONTENT_SECURITY_POLICY, DATA_SCRIPT_ID, ReplayFormatError, render_html

URL_ATTRIBUTES = {"src", "href", "srcset", "action", "formaction", "poster", "data", "xlink:href", "background"}


class PageScan(HTMLParser):
    """Every tag with its attributes, and the text of each script by id."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: dict[str, str] = {}
        self._script: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if tag == "script":
            self._script = attributes.get("id") or f"inline-{len(self.scripts)}"
            self.scripts[self._script] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._script = None

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self.scripts[self._script] += data


def scan(page: str) -> PageScan:
    parser = PageScan()
    parser.feed(page)
    parser.close()
    return parser


def test_page_references_no_url_and_sets_a_policy_that_forbids_fetching(record: dict[str, Any]) -> None:
    page = render_html(record, title="Replay", names=NAMES)
    parsed = scan(page)
    for tag, attributes in parsed.tags:
        assert tag not in ("link", "img", "iframe", "object", "embed", "base"), tag
        for name, value in attributes.items():
            if name in URL_ATTRIBUTES and value:
                assert not value.lower().startswith(("http:", "https:", "//")), (tag, name, value)
    assert "://" not in page
    assert "@import" not in page and "url(" not in page
    policies = [
        attributes.get("content") for tag, attributes in parsed.tags if tag == "meta" and attributes.get("http-equiv")
    ]
    assert policies == [CONTENT_SECURITY_POLICY]


def test_embedded_record_parses_back_to_the_record(record: dict[str, Any]) -> None:
    parsed = scan(render_html(record, title="Replay"))
    assert json.loads(parsed.scripts[DATA_SCRIPT_ID]) == record


def test_strings_that_would_close_the_script_stay_inside_the_embedded_json(record: dict[str, Any]) -> None:
    tricky = copy.deepcopy(record)
    hostile = "</script><script>alert(1)</script><!-- & \u2028 \u2029 </SCRIPT >"
    tricky["events"][-1]["note"] = hostile
    page = render_html(tricky, title="</title><script>alert(2)</script>", names=("<b>bold</b>", "A & B"))
    parsed = scan(page)
    assert json.loads(parsed.scripts[DATA_SCRIPT_ID]) == tricky
    assert page.lower().count("</script") == 3  # the record, the meta, the viewer: nothing else closes a script
    assert "<script>alert" not in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page and "A &amp; B" in page
    assert json.loads(parsed.scripts["replay-meta"])["teams"] == ["<b>bold</b>", "A & B"]


def test_header_names_the_teams_the_changed_rules_and_the_winner(record: dict[str, Any]) -> None:
    page = render_html(record, title="Seed 32", names=NAMES)
    header = page[page.index('<header class="page-head">') : page.index("</header>")]
    ended = next(event for event in record["events"] if event["kind"] == "match_ended")
    assert f"{NAMES[ended['winner']]} wins the match" in header
    assert "games_to_win_vaca = 3" in header and "vacas_to_win_match = 2" in header
    assert f"{sum(event['kind'] == 'hand_started' for event in record['events'])} hands" in header


@pytest.mark.parametrize(
    "bad",
    [
        {"format": "something/else", "events": []},
        {"format": "mus-arena/replay/v1"},
        {"format": "mus-arena/replay/v1", "events": [{"seq": 0, "kind": "match_started"}]},
    ],
)
def test_a_record_that_is_not_a_replay_is_refused_with_a_reason(bad: dict[str, Any]) -> None:
    with pytest.raises(ReplayFormatError):
        render_html(bad, title="Replay")
