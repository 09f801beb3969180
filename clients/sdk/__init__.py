"""The Python bot SDK: subclass `Bot`, write `decide(view)`, try it on a `LocalTable`, play it with `run_bot`."""

from clients.sdk.bot import Bot
from clients.sdk.errors import NoAction, RefereeError, SdkError
from clients.sdk.local import DuplicateOutcome, LocalTable, play_duplicate
from clients.sdk.runner import run_bot, run_main, run_remote_bot
from clients.sdk.view import BotView, ReceivedSena
from referee.wire import WireError as ConvertError

__all__ = [
    "Bot",
    "BotView",
    "ConvertError",
    "DuplicateOutcome",
    "LocalTable",
    "NoAction",
    "ReceivedSena",
    "RefereeError",
    "SdkError",
    "play_duplicate",
    "run_bot",
    "run_main",
    "run_remote_bot",
]
