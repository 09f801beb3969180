"""The stdio bridge: bots in any language play over JSON lines on stdin and stdout (docs/stdio.md).

Run a program as a bot with `python -m clients.stdio -- COMMAND ...` where a bot command goes (MUS_REFEREE and
MUS_TOKEN set), or register it with `mus bot add NAME --stdio -- COMMAND ...`.
"""

from clients.stdio.bridge import StdioBot, run
from clients.stdio.lines import PROTOCOL, AnswerError, action_from_json, action_to_json

__all__ = ["PROTOCOL", "AnswerError", "StdioBot", "action_from_json", "action_to_json", "run"]
