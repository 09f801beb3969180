"""The errors of the database layer: one base, and bad input kept apart from what is not allowed now.

Every message is one line that names the thing and says what is wrong, so the CLI can print it as it is.
"""

from __future__ import annotations


class DbError(Exception):
    """Base of every error the database layer raises on purpose."""


class InvalidInput(DbError, ValueError):
    """The input is malformed whatever the state of the database: a bad name, option, plan or record."""


class NotFound(DbError, LookupError):
    """A bot, league, match or replay that the input names does not exist."""


class Conflict(DbError):
    """The input is well formed but not allowed now: a name is taken, a bot is still needed by a league."""


class DatabaseInBotFolder(InvalidInput):
    """A command was about to create its new SQLite database inside a bot's folder, where the bot could read it."""
