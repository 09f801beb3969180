"""The HTML replay: one self-contained page that steps through a match hand by hand, with no server.

The page is the template `assets/replay.html` with its stylesheet, its script and the replay record inlined.
The record (`referee.engine.replay.match_record`) is embedded unchanged as JSON, so the page shows exactly what
the engine logged; the script folds its events into the table at each step. A strict Content-Security-Policy
forbids every fetch, so the page works offline and cannot leak anything. The header is rendered here, in
Python, so a page's summary can be read without running its script.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any

REPLAY_FORMAT = "mus-arena/replay/v1"
"""The replay record format this viewer reads (`match_record`'s `format`)."""

CONTENT_SECURITY_POLICY = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'"
"""Inline style and script only: the page may load nothing, from anywhere."""

DATA_SCRIPT_ID = "replay-data"
"""The id of the `<script type="application/json">` that holds the replay record."""

_TERMINATION_TEXT = {
    "ordago": "órdago",
    "target_at_tanteo": "tanteo",
    "target_at_deje": "deje",
    "forfeit": "forfeit",
}

_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


class ReplayFormatError(ValueError):
    """The data given is not a replay record this viewer can show."""


def render_html(record: Mapping[str, Any], *, title: str, names: tuple[str, str] | None = None) -> str:
    """One HTML document that replays `record` in a browser: inline CSS and JS, the record as embedded JSON.

    Args:
        record: a replay record as written by `referee.engine.replay.match_record`.
        title: the page title, shown in the header.
        names: the names of team 0 (seats 0 and 2) and team 1 (seats 1 and 3), e.g. their bots.

    Raises:
        ReplayFormatError: `record` is not a `mus-arena/replay/v1` record with an event list.
    """
    events = _events_of(record)
    teams = (names[0], names[1]) if names is not None else ("Team 0", "Team 1")
    meta = {"title": title, "teams": list(teams)}
    parts = {
        "csp": html.escape(CONTENT_SECURITY_POLICY),
        "title": html.escape(title),
        "css": _asset("replay.css"),
        "header": _header(record, events, title, teams),
        "team0": _team_chip(0, teams[0]),
        "team1": _team_chip(1, teams[1]),
        "data": embed_json(dict(record)),
        "meta": embed_json(meta),
        "js": _asset("replay.js"),
    }
    # One pass over the template only: nothing inserted is scanned again for placeholders.
    return _PLACEHOLDER.sub(lambda found: parts[found[1]], _asset("replay.html"))


def embed_json(value: Any) -> str:
    """JSON that is safe as the text of a `<script>` element and parses back to `value`.

    `<`, `>` and `&` only occur inside JSON strings, where their `\\u` escapes mean the same characters; so
    no `</script>` or `<!--` can end or change the element, whatever the record's strings hold.
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _events_of(record: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    if not isinstance(record, Mapping):
        raise ReplayFormatError(f"a replay record is a JSON object, not {type(record).__name__}")
    found = record.get("format")
    if found != REPLAY_FORMAT:
        raise ReplayFormatError(f"unknown replay format {found!r}: this viewer reads {REPLAY_FORMAT!r}")
    events = record.get("events")
    if not isinstance(events, list) or not all(isinstance(event, Mapping) for event in events):
        raise ReplayFormatError("the replay record has no event list (`events`)")
    if not any(event.get("kind") == "hand_started" for event in events):
        raise ReplayFormatError("the replay record has no hand to show (no `hand_started` event)")
    return events


@cache
def _asset(name: str) -> str:
    text = resources.files(__package__).joinpath("assets", name).read_text(encoding="utf-8")
    # The assets are inlined as raw text: they must not close, or change the parsing of, their element.
    if not name.endswith(".html"):
        assert not any(marker in text.lower() for marker in ("</script", "</style", "<!--")), name
    return text


def _team_chip(team: int, label: str) -> str:
    return f'<span class="team-chip team-{team}">{html.escape(label)}</span>'


def _header(record: Mapping[str, Any], events: Sequence[Mapping[str, Any]], title: str, teams: tuple[str, str]) -> str:
    hands = sum(1 for event in events if event.get("kind") == "hand_started")
    rules = record.get("rules") or {}
    if rules:
        rule_chips = " ".join(
            f'<span class="rule">{html.escape(str(key))} = {html.escape(json.dumps(value, ensure_ascii=False))}</span>'
            for key, value in sorted(rules.items())
        )
    else:
        rule_chips = '<span class="rule">default rules</span>'
    seed = html.escape(str(record.get("seed", "?")))
    team_line = (
        f'<span class="team-chip team-0">{html.escape(teams[0])} <span class="seats">seats 0 + 2</span></span>'
        '<span class="versus">vs</span>'
        f'<span class="team-chip team-1">{html.escape(teams[1])} <span class="seats">seats 1 + 3</span></span>'
    )
    return (
        '<div class="title-block">'
        f"<h1>{html.escape(title)}</h1>"
        f'<div class="teams">{team_line}</div>'
        f'<div class="meta"><span>seed {seed}</span><span>·</span><span>{hands} hands</span><span>·</span>'
        f"<span>rules:</span>{rule_chips}</div>"
        "</div>"
        f'<div class="result" id="result">{_result(events, teams)}</div>'
    )


def _result(events: Sequence[Mapping[str, Any]], teams: tuple[str, str]) -> str:
    ended = [event for event in events if event.get("kind") == "match_ended"]
    if ended:
        final = ended[-1]
        winner = teams[int(final["winner"])]
        vacas = final.get("vacas", [0, 0])
        how = " by forfeit" if final.get("termination") == "forfeit" else ""
        headline = (
            f'<div class="winner">{html.escape(winner)} wins the match{how}</div>'
            f'<div class="muted">vacas {int(vacas[0])} – {int(vacas[1])}</div>'
        )
    else:
        headline = '<div class="winner">Match not finished</div>'
    games = []
    for event in events:
        if event.get("kind") != "game_ended":
            continue
        winner_team = event.get("winner")
        who = teams[int(winner_team)] if winner_team is not None else "no winner"
        score = event.get("score", [0, 0])
        termination = str(event.get("termination", ""))
        games.append(
            f'<span class="game team-{winner_team if winner_team is not None else "none"}">'
            f"V{int(event['vaca'])}·G{int(event['game'])} {html.escape(who)} "
            f"{int(score[0])}–{int(score[1])} {html.escape(_TERMINATION_TEXT.get(termination, termination))}</span>"
        )
    return headline + f'<div class="games">{"".join(games)}</div>'
