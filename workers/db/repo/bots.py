"""Bots and their versions: hosted programs versioned by a content hash, remote bots by a token's hash."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG

import sqlalchemy as sa
from sqlmodel import Session, col, select

from workers.db.errors import Conflict, DatabaseInBotFolder, InvalidInput, NotFound
from workers.db.models import Bot, BotVersion, League, LeagueEntrant, LeagueStatus, utc_now
from workers.db.repo.common import check_name, flush_or_conflict, row_id

SKIPPED_DIRS = frozenset({"__pycache__", ".git"})
"""Folders left out of a bot's content hash: caches and history, not the program."""


SKIPPED_FILES = frozenset({"mus.db", "mus.db-wal", "mus.db-shm", "mus.db-journal"})
"""Files left out of a bot's content hash: the default league database and its WAL files, which change while
leagues run and are never the program (a bot's own data files, whatever their names, are hashed)."""


NEW_DATABASE = "mus_new_database"
"""`session.info` key set by the CLI when this command created the SQLite database file it uses (a path)."""


REMOTE_COMMAND: tuple[str, ...] = ()
"""A remote bot's single version has no command: it runs elsewhere and dials in."""


@dataclass(frozen=True, slots=True)
class BotInfo:
    """A bot with its versions, by number."""

    bot: Bot
    versions: tuple[BotVersion, ...]

    @property
    def current(self) -> BotVersion | None:
        """The version registered last: the one a new league enters."""
        return current_version(self.versions)


def token_sha256(token: str) -> str:
    """How a remote bot's token is stored: the same digest the referee's lobby checks."""
    return hashlib.sha256(token.encode()).hexdigest()


def content_hash(command: Sequence[str], folder: str | Path | None) -> str:
    """SHA-256 over the command line and every file under `folder` (path-sorted), skipping caches, .git and
    the default database files (`SKIPPED_FILES`).

    Each part is framed (its relative path and length go in before its bytes), so moving bytes from one file
    to another, or renaming a file, changes the hash. The folder's own location does not count: the same
    program copied elsewhere is the same version. A link counts by where it points too, unless it leads to a file
    of the folder, and through /proc, /sys or /dev by that only (`_bot_entries`): a review's link to
    /proc/self/comm read differently in each process, and every match of its bot was refused as changed, charged
    to nobody (stop 39).
    """
    words = _check_command(command)
    digest = hashlib.sha256(b"mus-arena/bot-content/v1\0")
    digest.update(json.dumps(words, ensure_ascii=False).encode() + b"\0")
    if folder is None:
        return digest.hexdigest()
    root = Path(folder)
    if not root.is_dir():
        raise NotFound(f"bot folder {str(root)!r} is not a directory")
    for relative, path, link, content in _bot_files(root):
        if link is not None:
            target = os.fsencode(link)
            digest.update(f"{relative}\0->\0{len(target)}\0".encode())
            digest.update(target)
        if not content:
            continue
        try:
            with path.open("rb") as file:  # by chunks: a review's 3 GiB sparse file took its size in memory
                size = os.fstat(file.fileno()).st_size
                digest.update(f"{relative}\0{size}\0".encode())
                read = 0
                while chunk := file.read(HASH_CHUNK_BYTES):
                    digest.update(chunk)
                    read += len(chunk)
        except OSError as error:
            raise InvalidInput(f"cannot read {path}: {error.strerror or error}") from None
        if read != size:
            raise InvalidInput(f"{path} changed while it was read: {read} bytes of {size}")
    return digest.hexdigest()


HASH_CHUNK_BYTES = 1024 * 1024
"""What `content_hash` reads of a file at a time: a bot's folder may hold a file far larger than the memory of the
process that hashes it, `mus bot add`'s or a worker's before each match whose folder changed (helper-87)."""


RACY_S = 2.0
"""A file changed this recently when its folder was hashed is hashed again next time (`current_content_hash`):
a write in the same tick of the filesystem's clock could leave its times as they were (git's racy-clean case)."""

_Stamp = tuple[str, int, int, int, int, int]
"""A file of a bot's folder as `_signature` sees it: its path in the folder, size, mtime, inode, ctime, device."""

_HASHED: dict[tuple[tuple[str, ...], str], tuple[tuple[_Stamp, ...], str]] = {}
"""`current_content_hash`'s cache, in this process: per command and folder, its files' stamps and its hash."""


def current_content_hash(command: Sequence[str], folder: str | Path | None) -> str:
    """`content_hash` now, read again only when a file under `folder` changed since this process last hashed it.

    A worker checks each hosted side's folder before every match (docs/sandbox.md): reading a folder of a
    thousand files (a JavaScript bot's node_modules) cost about 170 ms a match, a Python bot with its virtual
    environment inside about 1.5 s. A file is unchanged while its path, size, inode, modification and change
    times are: the change time moves on every write and every `touch`, and nobody but the kernel sets it. A
    folder whose files changed during the hashing, or within `RACY_S` of it, is not kept."""
    if folder is None:
        return content_hash(command, folder)
    key = (tuple(command), str(Path(folder).resolve()))
    before = _signature(Path(folder))
    known = _HASHED.get(key)
    if known is not None and known[0] == before:
        return known[1]
    digest = content_hash(command, folder)
    newest = max((entry[4] for entry in before), default=0) / 1e9
    if _signature(Path(folder)) == before and newest < time.time() - RACY_S:
        _HASHED[key] = (before, digest)
    else:
        _HASHED.pop(key, None)
    return digest


def _signature(root: Path) -> tuple[_Stamp, ...]:
    """Each file `content_hash` reads, stamped (`_Stamp`)."""
    if not root.is_dir():
        raise NotFound(f"bot folder {str(root)!r} is not a directory")
    return tuple(
        (relative, stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_ctime_ns, stat.st_dev)
        for relative, _, stat, _, _ in _bot_entries(root)
    )


def _bot_files(root: Path) -> list[tuple[str, Path, str | None, bool]]:
    """Each entry of the content hash: its path in the folder, on the host, for a link where it points (else None),
    and whether its bytes count (`_bot_entries`)."""
    return [(relative, Path(path), link, content) for relative, path, _, link, content in _bot_entries(root)]


PSEUDO_ROOTS = ("/proc", "/sys", "/dev")
"""Where what a link leads to, and even whether it is a file, depends on the process that reads it."""


def _through_pseudo(path: str) -> bool:
    """Whether the link at `path`, or a link it leads through (its own or a folder's on the way), names a place
    under PSEUDO_ROOTS: `/proc/self/comm` reads 'mus' to `mus bot add` and 'python' to a worker, `/proc/self/fd/1`
    is a file to one process and a pipe to another."""
    current = path
    for _ in range(40):  # the kernel's own limit on a chain of links
        try:
            text = os.readlink(current)
        except OSError:
            return False  # the end of the chain: not a link (or gone)
        joined = os.path.join(os.path.dirname(current), text)
        current = os.path.join(os.path.realpath(os.path.dirname(joined)), os.path.basename(joined))
        if any(current == root or current.startswith(root + "/") for root in PSEUDO_ROOTS):
            return True
    return True  # a loop: nothing to read


def _bot_entries(root: Path) -> list[tuple[str, str, os.stat_result, str | None, bool]]:
    """The entries under `root` that make its content hash, path-sorted, each with its path, its `stat`, for a link
    where it points, and whether its bytes count. As `os.walk` would find them (a link to a folder is not entered),
    on plain strings: a worker stamps every file of each hosted side's folder before every match (a JavaScript
    bot's node_modules holds a thousand), and the walk's paths cost as much as the stats.

    A regular file counts by its bytes, and so does a link to one within the folder. Any other link counts by where
    it points, whatever it leads to (a folder, nothing, a device), and a link to a regular file out of the folder
    by its bytes too (the sandbox may show that file: the program's own is bound in); a link through /proc, /sys or
    /dev by where it points only, the same to every reader (`_through_pseudo`)."""
    entries: list[tuple[str, str, os.stat_result, str | None, bool]] = []
    inside = os.path.join(os.path.realpath(root), "")
    pending = [(str(root), "")]
    while pending:
        directory, prefix = pending.pop()
        try:
            with os.scandir(directory) as scan:
                items = list(scan)
        except OSError:
            continue  # gone, or unreadable: as os.walk skips it
        for item in items:
            name = item.name
            if name in SKIPPED_DIRS or name in SKIPPED_FILES:
                continue
            try:
                link = item.is_symlink()
                if not link and item.is_dir(follow_symlinks=False):
                    pending.append((item.path, f"{prefix}{name}/"))
                    continue
                entry = _link_entry(item, inside) if link else (item.stat(follow_symlinks=False), None, True)
            except OSError:
                continue  # gone meanwhile
            if entry is not None and (entry[1] is not None or S_ISREG(entry[0].st_mode)):
                entries.append((f"{prefix}{name}", item.path, *entry))
    return sorted(entries, key=lambda entry: entry[0])


def _link_entry(item: os.DirEntry[str], inside: str) -> tuple[os.stat_result, str | None, bool]:
    """A link's (stat, where it points or None, whether its bytes count), as `_bot_entries` says: the stat is the
    target's where its bytes count (a change of them shows), else the link's own."""
    text = os.readlink(item.path)
    if _through_pseudo(item.path):
        return item.stat(follow_symlinks=False), text, False
    target = os.path.realpath(item.path)
    try:
        stat = os.stat(target)
    except OSError:
        return item.stat(follow_symlinks=False), text, False  # leads nowhere
    if not S_ISREG(stat.st_mode):
        return item.stat(follow_symlinks=False), text, False
    return stat, None if target.startswith(inside) else text, True


def add_bot(
    session: Session,
    name: str,
    *,
    command: Sequence[str],
    folder: str | Path | None,
    language: str,
    persistent: bool = False,
) -> BotVersion:
    """Register a hosted bot's program: the bot and version 1, a new version when the content hash changed,
    or the existing version when it did not. Either way that version becomes the bot's current one, and
    `persistent` (how it is run, not what it is: docs/pool.md) is set on it.

    Results belong to the version that played, so a changed program never inherits (or spoils) the old
    program's record. Re-adding a removed bot restores it.
    """
    check_name("bot", name)
    words = _check_command(command)
    if not words:
        raise InvalidInput(f"bot {name!r} needs a command to run")
    language = _check_language(language)
    _refuse_new_database_in(session, folder)
    digest = content_hash(words, folder)
    stored_folder = str(Path(folder).resolve()) if folder is not None else None
    bot = _find_bot(session, name)
    if bot is None:
        bot = Bot(name=name, language=language)
        session.add(bot)
        flush_or_conflict(session, f"bot {name!r} was added at the same time by someone else; try again")
    elif bot.remote:
        raise Conflict(f"bot {name!r} is a remote bot; a hosted bot needs another name")
    else:
        bot.language = language
        bot.removed_at = None
    bot_id = row_id(bot)
    existing = session.exec(
        select(BotVersion).where(col(BotVersion.bot_id) == bot_id, col(BotVersion.content_hash) == digest)
    ).first()
    if existing is not None:
        # Same content: the same version, current again. Keep its folder up to date: the old one may be gone.
        existing.folder = stored_folder
        existing.persistent = persistent
        existing.language = language
        existing.registered_at = utc_now()
        session.flush()
        return existing
    version = BotVersion(
        bot_id=bot_id,
        number=_next_version_number(session, bot_id),
        command=words,
        folder=stored_folder,
        content_hash=digest,
        persistent=persistent,
        language=language,
    )
    session.add(version)
    flush_or_conflict(session, f"bot {name!r} got a new version at the same time from someone else; try again")
    return version


def _refuse_new_database_in(session: Session, folder: str | Path | None) -> None:
    """Refuse a command that just created its SQLite database inside the bot's folder (`mus bot add` run from
    the bot's own folder with the default `./mus.db`): the bot could read it, and it is not the project's."""
    created = session.info.get(NEW_DATABASE)
    if folder is None or not created:
        return
    database, root = Path(created).resolve(), Path(folder).resolve()
    if database.is_relative_to(root):
        raise DatabaseInBotFolder(
            f"refusing to create the database {database} inside the bot's folder {root}: run mus from the "
            "project folder, or set MUS_DATABASE_URL"
        )


def add_remote_bot(session: Session, name: str, *, language: str = "unknown") -> str:
    """Register a bot that runs elsewhere and dials in; returns its token, which is shown only this once.

    Only the token's SHA-256 is stored, so a leaked database does not let anyone play as the bot.
    Re-adding a removed remote bot restores it with a new token.
    """
    check_name("bot", name)
    language = _check_language(language)
    bot = _find_bot(session, name)
    if bot is not None and bot.removed_at is None:
        raise Conflict(f"bot {name!r} already exists")
    if bot is not None and not bot.remote:
        raise Conflict(f"bot {name!r} was a hosted bot; a remote bot needs another name")
    token = secrets.token_urlsafe(32)
    if bot is None:
        bot = Bot(name=name, language=language, remote=True)
        session.add(bot)
    bot.token_sha256 = token_sha256(token)
    bot.removed_at = None
    flush_or_conflict(session, f"bot {name!r} was added at the same time by someone else; try again")
    bot_id = row_id(bot)
    digest = content_hash(REMOTE_COMMAND, None)
    has_version = session.exec(select(BotVersion.id).where(col(BotVersion.bot_id) == bot_id)).first()
    if has_version is None:
        session.add(
            BotVersion(bot_id=bot_id, number=1, command=list(REMOTE_COMMAND), content_hash=digest, language=language)
        )
        session.flush()
    return token


def rotate_remote_token(session: Session, name: str) -> str:
    """Give a remote bot a new token (the old one stops working); returns it, shown only this once."""
    bot = _active_bot(session, name)
    if not bot.remote:
        raise Conflict(f"bot {name!r} is not a remote bot; it has no token")
    token = secrets.token_urlsafe(32)
    bot.token_sha256 = token_sha256(token)
    session.flush()
    return token


def remote_bot_for_token(session: Session, token: str) -> Bot | None:
    """The active remote bot this token belongs to, if any."""
    return session.exec(
        select(Bot).where(
            col(Bot.token_sha256) == token_sha256(token), col(Bot.remote).is_(True), col(Bot.removed_at).is_(None)
        )
    ).first()


def list_bots(session: Session, *, include_removed: bool = False) -> list[BotInfo]:
    """Bots by name, each with its versions."""
    query = select(Bot).order_by(col(Bot.name))
    if not include_removed:
        query = query.where(col(Bot.removed_at).is_(None))
    bots = list(session.exec(query).all())
    versions: dict[int, list[BotVersion]] = {}
    if bots:
        rows = session.exec(
            select(BotVersion)
            .where(col(BotVersion.bot_id).in_([row_id(bot) for bot in bots]))
            .order_by(col(BotVersion.bot_id), col(BotVersion.number))
        ).all()
        for version in rows:
            versions.setdefault(version.bot_id, []).append(version)
    return [BotInfo(bot, tuple(versions.get(row_id(bot), ()))) for bot in bots]


def get_bot(session: Session, name: str) -> BotInfo:
    """A bot by name (a removed one too, marked by `removed_at`) with its versions."""
    bot = _find_bot(session, name)
    if bot is None:
        raise NotFound(f"no bot named {name!r} (`mus bot list` names them)")
    versions = session.exec(
        select(BotVersion).where(col(BotVersion.bot_id) == row_id(bot)).order_by(col(BotVersion.number))
    ).all()
    return BotInfo(bot, tuple(versions))


def remove_bot(session: Session, name: str) -> Bot:
    """Retire a bot: it enters no new league and a remote bot's token stops working; its results stay.

    Refused while a league that has not ended (finished or cancelled) has it as an entrant: its matches still need
    the program.
    """
    bot = _active_bot(session, name)
    leagues = session.exec(
        select(League.name)
        .join(LeagueEntrant, col(LeagueEntrant.league_id) == col(League.id))
        .join(BotVersion, col(BotVersion.id) == col(LeagueEntrant.bot_version_id))
        .where(
            col(BotVersion.bot_id) == row_id(bot),
            col(League.status).not_in([LeagueStatus.FINISHED, LeagueStatus.CANCELLED]),
        )
        .distinct()
        .order_by(col(League.name))
    ).all()
    if leagues:
        raise Conflict(
            f"bot {name!r} is still needed by league(s) {', '.join(leagues)} that have not finished (`mus league"
            " cancel` ends one for good)"
        )
    bot.removed_at = utc_now()
    bot.token_sha256 = None
    session.flush()
    return bot


def _find_bot(session: Session, name: str) -> Bot | None:
    return session.exec(select(Bot).where(col(Bot.name) == name)).first()


def _active_bot(session: Session, name: str) -> Bot:
    bot = _find_bot(session, name)
    if bot is None or bot.removed_at is not None:
        raise NotFound(f"no bot named {name!r} (`mus bot list` names them)")
    return bot


def current_version(versions: Sequence[BotVersion]) -> BotVersion | None:
    return max(versions, key=lambda version: (version.registered_at, version.number), default=None)


def _next_version_number(session: Session, bot_id: int) -> int:
    highest = session.exec(select(sa.func.max(BotVersion.number)).where(col(BotVersion.bot_id) == bot_id)).one()
    return 1 if highest is None else int(highest) + 1


def _check_command(command: Sequence[str]) -> list[str]:
    """The command's words; one string is a `Sequence[str]` too, but its letters are not a command line."""
    if isinstance(command, str):
        raise InvalidInput("a bot command must be a list of strings")
    return list(command)


def check_bot_input(name: str, language: str | None) -> None:
    """What `add_bot` checks of a bot's name and language, for a caller that looks at the bot's files first (`mus bot
    add`): a bad name is the first thing said, not a missing file."""
    check_name("bot", name)
    if language is not None:
        _check_language(language)


def _check_language(language: str) -> str:
    language = language.strip()
    if not language or len(language) > 32:
        raise InvalidInput(f"a bot language must be 1 to 32 characters, got {language!r}")
    return language
