"""`mus bot ...`: register bot programs (hosted, versioned by content) and remote bots (a token), list, show, remove."""

from __future__ import annotations

import os
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import grpc
import typer
from sqlmodel import Session

from mus.v1 import admin_pb2, admin_pb2_grpc
from workers.cli import check_cmd
from workers.cli.db import echo_json, iso, no_database, open_session, when
from workers.cli.errors import fail
from workers.cli.noun import noun_app
from workers.cli.tables import cli_table, print_table
from workers.commands import add_command_line, guess_language, misplaced_options
from workers.db import repo
from workers.db.errors import NotFound
from workers.db.models import Bot, BotVersion
from workers.launcher import (
    LANGUAGE_BY_SUFFIX,
    SYSTEM_DIRS,
    bridged,
    example_folder,
    own_program_file,
    own_seat_uids,
    program_file,
    relative_command,
    stdio_command,
    under_bound_root,
    unreadable_by_seats,
)
from workers.play import (
    ADMIN_ADDRESS_VARIABLE,
    ADMIN_TOKEN_VARIABLE,
    REFEREE_ADDRESS_VARIABLE,
    exposed_by,
    nested_folders,
)

app = noun_app("Bots: register a program or a remote bot, list, show, remove.")

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def bot_folder(command: list[str], directory: Path | None) -> Path | None:
    """The folder the program runs in and is hashed from: `--dir`, else the folder of the first file the command
    names, else none.

    The program itself comes first when it is a file of the bot's own (`./mybot`, `/path/to/mybot`;
    `launcher.own_program_file`): a bare name, a system program or a runtime (`/usr/bin/python3`, a venv's python)
    is not the bot's, nor is its folder. A folder that holds far more than a bot (`/`, the temporary folder, a home
    folder) is refused: all of it would be hashed and shown to the bot.
    """
    if directory is not None:
        if not directory.is_dir():
            fail(f"--dir {str(directory)!r} is not a directory")
        folder: Path | None = directory.resolve()
    else:
        program, *arguments = command
        files = [Path(word).resolve() for word in arguments if Path(word).is_file()]
        own = own_program_file(program)
        folder = own.parent if own is not None else files[0].parent if files else None
    broad = {Path("/"), Path(tempfile.gettempdir()).resolve(), Path.home().resolve(), Path("/root"), Path("/tmp")}
    if folder is not None and folder in broad:
        fail(
            f"the bot's folder would be {folder}, all of which would be hashed and shown to the bot: move the bot's"
            " files into a folder of their own (e.g. bots/NAME/) and give it with --dir"
        )
    return folder


def _admin_address() -> str:
    """Where the standalone referee takes admin calls: MUS_REFEREE_ADMIN_ADDRESS, else MUS_REFEREE_ADDRESS (as a
    worker calls it: a review's registration went to the public port while the admin one was set)."""
    return os.environ.get(ADMIN_ADDRESS_VARIABLE, "").strip() or os.environ.get(REFEREE_ADDRESS_VARIABLE, "")


def _existing(session: Session, name: str) -> Bot | None:
    """The bot of this name, removed or not, or None."""
    try:
        return repo.get_bot(session, name).bot
    except NotFound:
        return None


def _referee_call(name: str, call: str, request: Any, consequence: str) -> Any | str:
    """Call the standalone referee's admin API (MUS_REFEREE_ADDRESS, with MUS_ADMIN_TOKEN); the response, or
    the one line to tell the user when no referee is configured or it refused (`consequence` says what then)."""
    address = _admin_address()
    if not os.environ.get(REFEREE_ADDRESS_VARIABLE, ""):
        return f"No referee is configured ({REFEREE_ADDRESS_VARIABLE}): {consequence}."
    token = os.environ.get(ADMIN_TOKEN_VARIABLE, "")
    if not token:
        return f"warning: {REFEREE_ADDRESS_VARIABLE} is set but {ADMIN_TOKEN_VARIABLE} is not: {consequence}."
    auth = (("authorization", f"Bearer {token}"),)
    try:
        with grpc.insecure_channel(address) as channel:
            stub = admin_pb2_grpc.TableAdminServiceStub(channel)
            return getattr(stub, call)(request, metadata=auth, timeout=10)
    except grpc.RpcError as error:
        code = error.code().name if isinstance(error, grpc.Call) else "UNAVAILABLE"
        details = error.details() if isinstance(error, grpc.Call) else str(error)
        return f"warning: {call} for {name} failed on the referee at {address} ({code}: {details}): {consequence}."


def revoke_on_referee(name: str) -> str:
    """Tell the standalone referee (MUS_REFEREE_ADDRESS, with MUS_ADMIN_TOKEN) to forget the remote bot's old
    token and end its lobby sessions; returns one line saying what happened, for the user."""
    response = _referee_call(
        name,
        "RevokeRemoteBot",
        admin_pb2.RevokeRemoteBotRequest(bot_name=name),
        f"a referee that knew {name}'s old token still accepts it until it next registers the bot",
    )
    if isinstance(response, str):
        return response
    ended = response.sessions_closed
    sessions = f"{ended} lobby session{'s' if ended != 1 else ''} ended"
    return f"The referee at {_admin_address()} revoked {name}'s old token ({sessions})."


def register_on_referee(name: str, token: str, *, readded: bool) -> tuple[bool, str]:
    """Register a remote bot's token hash with the standalone referee now (a new hash revokes the old token
    there), so that its lobby accepts the bot as soon as it connects; (registered, one line for the user)."""
    old = f"; a referee that knew {name}'s old token still accepts it until then" if readded else ""
    response = _referee_call(
        name,
        "RegisterRemoteBot",
        admin_pb2.RegisterRemoteBotRequest(bot_name=name, token_sha256=repo.token_sha256(token)),
        f"{name} is registered with the referee when a league worker first needs it, and a lobby refuses its"
        f" token until then{old}",
    )
    if isinstance(response, str):
        return False, response
    old = " (the old token is revoked there: its lobby sessions end)" if readded else ""
    return True, f"Registered with the referee at {_admin_address()}{old}: its lobby accepts {name} from now on."


@app.command("add")
def add_command(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The bot's name: letters, digits, '_', '.', '+', '-'.")],
    command: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="COMMAND",
            help="After `--`: the command that runs the bot, e.g. `-- python mybot.py`.",
            show_default=False,
        ),
    ] = None,
    directory: Annotated[
        Path | None,
        typer.Option(
            "--dir",
            help="The bot's folder: it runs there, and its content hash versions the bot. Default: the folder of "
            "its program when given by a path (`./mybot`), else of the first file the command names (give --dir "
            "for `python -m package`).",
        ),
    ] = None,
    language: Annotated[
        str | None, typer.Option(help="The bot's language (default: guessed from the command).")
    ] = None,
    remote: Annotated[
        bool, typer.Option("--remote", help="A bot that runs elsewhere and joins through the lobby: prints a token.")
    ] = False,
    stdio: Annotated[
        bool,
        typer.Option(
            "--stdio",
            help="The program speaks JSON lines on stdin and stdout (docs/stdio.md): it is stored behind the stdio "
            "bridge, which plays over gRPC for it in the same sandbox.",
        ),
    ] = False,
    persistent: Annotated[
        bool,
        typer.Option(
            "--persistent",
            help="The program plays seat after seat from one process, each seat a JSON line on its stdin "
            "(MUS_SEATS=stdin, docs/pool.md): workers keep it alive across matches instead of starting it for "
            "every seat. SDK bots (run_main) and the C++, JavaScript and stdio-bridge examples do.",
        ),
    ] = False,
    check: Annotated[
        bool, typer.Option("--check", help="Then check the program with `mus bot check NAME` (exit 1 if it fails).")
    ] = False,
    json_output: JsonFlag = False,
) -> None:
    """Register a bot program (`mus bot add NAME -- COMMAND ...`) or a remote bot (`mus bot add NAME --remote`).

    With `--stdio`, the program speaks JSON lines on stdin and stdout (docs/stdio.md): the stored command is the
    stdio bridge followed by it (`python -m clients.stdio -- COMMAND ...`), versioned and sandboxed like any other.

    With `--persistent`, the program plays seat after seat given on its standard input (docs/pool.md): a worker
    keeps its processes alive across matches. Without it, a process is started for every seat. Adding the same
    program again sets the choice anew on its version.

    A program is versioned by a content hash of its folder and command: adding it again after a change makes a
    new version (new leagues enter it; old results stay with the old version), adding it unchanged does not.
    """
    words = list(command or [])
    if remote:
        if words or directory is not None or stdio or persistent:
            fail("a remote bot runs elsewhere: give it no command, no --dir, no --stdio and no --persistent")
        with open_session() as session:
            readded = _existing(session, name) is not None
            token = repo.add_remote_bot(session, name, language=language or "unknown")
        # Registering the new hash revokes the old token on that referee and ends its lobby sessions.
        registered, said = register_on_referee(name, token, readded=readded)
        lines = [said]
        if readded and not registered and os.environ.get(REFEREE_ADDRESS_VARIABLE):
            lines.append(revoke_on_referee(name))  # the referee refused the new hash: still end the old token
        if json_output:
            echo_json(
                {"bot": name, "remote": True, "token": token, "registered": registered, "referee": " ".join(lines)}
            )
            return
        typer.echo(f"Remote bot {name} added. Its token, shown only this once (keep it secret):")
        typer.echo(token)
        typer.echo("The bot joins through the lobby with MUS_REFEREE=HOST:PORT and MUS_TOKEN=<the token>.")
        for line in lines:
            typer.echo(line)
        return
    if not words:
        fail(f"give the command that runs the bot after `--`: mus bot add {name} -- python mybot.py")
    try:
        repo.check_bot_input(name, language)
    except repo.InvalidInput as error:
        fail(str(error))
    folder = bot_folder(words, directory)
    if folder is not None and (private := exposed_by(folder)) is not None:
        if not private.exists() and Path.cwd().resolve().is_relative_to(folder.resolve()):
            stored = stdio_command(words) if stdio else words
            again = add_command_line(
                name, stored, folder, persistent=persistent, language=language, options=["--check"] if check else []
            )
            fail(
                f"mus is run from inside the bot's folder {folder}: it would keep its database, broker and logs"
                f" ({private}) there, and the bot's sandbox would show them (its folder is bound in). Run mus from"
                f" your project folder instead: cd there and `{again}`"
            )
        fail(
            f"the folder {folder} holds {private}, which the bot's sandbox would show the bot (its folder is bound"
            f" in): move the bot's files into a folder of their own (e.g. bots/{name}/) and, from this folder,"
            f" `mus bot add {name} --dir bots/{name} -- ...` with its command"
        )
    # The example bots' folders are under the project's packages, bound into every seat on purpose; nothing else.
    bound = under_bound_root([folder]) if folder is not None and not example_folder(folder) else None
    if folder is not None and bound is not None:
        fail(
            f"the folder {folder} lies under {bound[1]}, which every bot's sandbox binds read-only: every other bot"
            f" would read this one's files. Move them to a folder of their own outside it (e.g. bots/{name}/ in your"
            f" project folder) and `mus bot add {name} --dir bots/{name} -- ...` with its command"
        )
    if folder is not None and own_seat_uids() and (unreadable := unreadable_by_seats(folder)):
        fail(unreadable)
    with open_session() as session:
        if (owner := _other_bots_program(session, name, words[0], folder)) is not None:
            fail(
                f"the program {words[0]} lies in the folder of bot {owner!r}: a bot runs a program of its own folder,"
                " the system's or a language runtime's, never another bot's. Two bots may share one folder (a"
                f" persistent variant, say): give it as this one's too, `mus bot add {name} --dir FOLDER -- ...`"
            )
        if folder is not None and (held := _program_held(session, name, folder)) is not None:
            fail(
                f"the folder {folder} holds {held[1]}, the program of bot {held[0]!r}: its sandbox would show this bot"
                " that bot's program (its folder is bound in); add it from a folder of its own"
            )
        if folder is not None and (nested := _nested_bot_folder(session, name, folder)) is not None:
            fail(
                f"the folder {folder.resolve()} and {nested[1]}, the folder of bot {nested[0]!r}, lie one inside the"
                " other: a bot's sandbox binds its folder whole, so one would read the other's files. Give each bot a"
                " folder of its own (e.g. bots/NAME/), neither inside the other"
            )
    words = relative_command(words, folder)
    notes = [note for note in (misplaced_options(words), *_missing_files(words, folder)) if note]
    path = program_file(words[0], None) if stdio and folder is None else None
    if path is not None and not any(path.is_relative_to(system) for system in SYSTEM_DIRS):
        notes.append(
            f"warning: {path} lies neither in a bot folder nor in the system's: behind the stdio bridge, a seat's"
            " sandbox holds only those, and the program could not start. Give its folder: `mus bot add"
            f" {name} --stdio --dir FOLDER -- ./PROGRAM`"
        )
    language = language or guess_language(words)
    if stdio:
        words = stdio_command(words)
    with open_session() as session:
        known, before = _known_hashes(session, name)
        version = repo.add_bot(session, name, command=words, folder=folder, language=language, persistent=persistent)
        info = repo.get_bot(session, name)
    new = version.content_hash not in known
    if new and before is not None and before.language != info.bot.language:
        notes.append(
            f"note: bot {name} was a {before.language} bot (`{shlex.join(before.command)}`); its new version is"
            f" {info.bot.language}. A different program wants a name of its own: `mus bot add OTHERNAME -- ...`"
        )
    if json_output:
        for note in notes:  # stdout holds only the JSON
            typer.echo(note, err=True)
        data = {"bot": name, "remote": False, "new_version": new, **_version_json(version)}
        report = check_cmd.check_registered(name, json_output=None) if check else None
        echo_json({**data, "check": report.to_json()} if report is not None else data)
        if report is not None and not report.passed:
            raise typer.Exit(code=1)
        return
    if new:
        typer.echo(f"Bot {name}: version {version.number} registered ({info.bot.language}).")
    elif known[version.content_hash] != version.persistent:
        now = "persistent" if version.persistent else "a process per seat"
        typer.echo(f"Bot {name}: unchanged, version {version.number} is its current version, and now runs {now}.")
    else:
        typer.echo(f"Bot {name}: unchanged, version {version.number} is its current version.")
    _echo_version(version)
    for note in notes:
        typer.echo(note, err=True)
    if not check:
        typer.echo(f"Check it before a league: mus bot check {name}")
    elif not check_cmd.check_registered(name, json_output=False).passed:
        typer.echo(
            f"Bot {name} stays registered (version {version.number}): fix it and `mus bot add` it again, or"
            f" `mus bot remove {name}`; a league enters the version current when it is created.",
            err=True,
        )
        raise typer.Exit(code=1)


def _other_bots_program(session: Session, name: str, program: str, folder: Path | None) -> str | None:
    """The bot, other than `name`, in whose registered folder the program file `program` lies, if any (a review
    registered another bot's program file as its own; the sandbox binds a bot's program wherever it lies). A
    folder that is this bot's own, `folder`, too is shared, not another's: two bots registered with one folder
    (a persistent variant, say) each see that folder and nothing beyond it."""
    path = program_file(program, Path.cwd())
    if path is None:
        return None
    shared = folder.resolve() if folder is not None else None
    for info in repo.list_bots(session):
        folders = {Path(version.folder).resolve() for version in info.versions if version.folder} - {shared}
        if info.bot.name != name and any(path.is_relative_to(other) for other in folders):
            return info.bot.name
    return None


def _nested_bot_folder(session: Session, name: str, folder: Path) -> tuple[str, Path] | None:
    """A bot other than `name` whose registered folder lies inside `folder` or around it (`play.nested_folders`),
    and that folder: the program checks below see only program files, and a Python or JavaScript bot's is the
    runtime's (helper-87)."""
    for info in repo.list_bots(session):
        if info.bot.name == name:
            continue
        for version in info.versions:
            if version.folder and nested_folders(folder, Path(version.folder)):
                return info.bot.name, Path(version.folder).resolve()
    return None


def _program_held(session: Session, name: str, folder: Path) -> tuple[str, Path] | None:
    """A bot other than `name` whose registered program file lies in `folder`, and that file: the other way round
    from `_other_bots_program` (a bot added first, with a program outside any bot's folder, then a folder around
    it). A bot registered with `folder` itself shares it; a stdio bot's program is the one behind the bridge."""
    inside = folder.resolve()
    for info in repo.list_bots(session):
        if info.bot.name == name:
            continue
        for version in info.versions:
            own = Path(version.folder) if version.folder else None
            if not version.command or (own is not None and own.resolve() == inside):
                continue
            path = program_file(bridged(version.command)[0], own)
            if path is not None and path.is_relative_to(inside):
                return info.bot.name, path
    return None


def _known_hashes(session: Session, name: str) -> tuple[dict[str, bool], _Before | None]:
    """The content hashes of the bot's versions (each with whether it was persistent), and its language and current
    command before this `bot add`."""
    try:
        info = repo.get_bot(session, name)
    except repo.NotFound:
        return {}, None
    current = info.current
    before = _Before(info.bot.language, tuple(current.command)) if current is not None else None
    return {version.content_hash: version.persistent for version in info.versions}, before


@dataclass(frozen=True)
class _Before:
    language: str
    command: tuple[str, ...]


def _missing_files(command: list[str], folder: Path | None) -> list[str]:
    """What the stored command needs that this machine lacks, looked up as the launch does, from the bot's folder
    (`launcher.program_file`): its program, and a script it names by a language's suffix. A missing program is a
    warning (a `mus worker` elsewhere may have it on its PATH); a missing script refuses the bot: no machine could run
    this version, whose folder is hashed here (a newcomer's `-- python bots/nope/nope.py` was registered, stop 43)."""
    program, *arguments = command
    where = f"no file in {folder}" if folder is not None else "no file here"
    # With --dir, a word that is no file from here is taken from the bot's folder (a newcomer was told otherwise).
    paths = (
        "from the bot's folder (--dir) or from the folder you run mus in"
        if folder
        else "from the folder you run mus in"
    )
    scripts = [word for word in arguments if Path(word).suffix.lower() in LANGUAGE_BY_SUFFIX]
    for word in scripts:
        if not (folder or Path()).joinpath(word).is_file():
            fail(
                f"the command names {word!r}, which is {where} on this machine. Give paths {paths} (`-- python"
                " bots/NAME/NAME.py`); `mus bot check NAME` then runs it here first."
            )
    if program_file(program, folder) is not None:
        return []
    return [
        f"warning: the command names {program!r}, which is {'not on PATH' if '/' not in program else where} on this"
        f" machine: a worker that cannot run it charges the bot a crash in every match. Give paths {paths} (`-- python"
        " bots/NAME/NAME.py`); `mus bot check NAME` runs it here first."
    ]


def _echo_version(version: BotVersion) -> None:
    """A version's lines, as `bot add` and `bot show` print them: each value whole on its own line."""
    typer.echo(f"  command: {shlex.join(version.command)}")
    typer.echo(f"  folder:  {version.folder or '(none)'}")
    typer.echo(f"  hash:    {version.content_hash}")
    runs = "persistent (seat after seat from one process)" if version.persistent else "a process per seat"
    typer.echo(f"  runs:    {runs}")


def _version_json(version: BotVersion) -> dict[str, Any]:
    return {
        "version": version.number,
        "content_hash": version.content_hash,
        "command": list(version.command),
        "folder": version.folder,
        "language": version.language,
        "persistent": version.persistent,
        "created_at": iso(version.created_at),
        "registered_at": iso(version.registered_at),
    }


def _bot_json(info: repo.BotInfo) -> dict[str, Any]:
    bot, current = info.bot, info.current
    return {
        "bot": bot.name,
        "remote": bot.remote,
        "language": bot.language,
        "current_version": current.number if current is not None else None,
        "persistent": current.persistent if current is not None else False,
        "versions": len(info.versions),
        "created_at": iso(bot.created_at),
        "removed_at": iso(bot.removed_at),
    }


@app.command("list")
def list_command(
    include_removed: Annotated[bool, typer.Option("--all", help="Include removed bots.")] = False,
    json_output: JsonFlag = False,
) -> None:
    """List the bots with their current versions."""
    with open_session(reads=True) as session:
        bots = repo.list_bots(session, include_removed=include_removed)
    if json_output:
        echo_json([_bot_json(info) for info in bots])
        return
    if not bots:
        if not no_database(session):
            typer.echo("No bots yet: add one with `mus bot add NAME -- COMMAND ...`.")
        return
    table = cli_table(title="Bots")
    for column in ("bot", "kind", "language", "version", "versions", "added (UTC)"):
        table.add_column(column, justify="right" if column in ("version", "versions") else "left")
    for info in bots:
        bot, current = info.bot, info.current
        kind = (
            "remote" if bot.remote else "hosted, persistent" if current is not None and current.persistent else "hosted"
        )
        if bot.removed_at is not None:
            kind += " (removed)"
        table.add_row(
            bot.name,
            kind,
            bot.language,
            str(current.number) if current is not None else "-",
            str(len(info.versions)),
            when(bot.created_at),
        )
    print_table(table)


@app.command("show")
def show_command(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The bot's name.")],
    json_output: JsonFlag = False,
) -> None:
    """Show a bot: its versions (command, folder, content hash) and the leagues it has entered."""
    with open_session(reads=True) as session:
        info = repo.get_bot(session, name)
        leagues = _leagues_of(session, name)
    current_id = info.current.id if info.current is not None else None
    if json_output:
        data = _bot_json(info)
        data["versions"] = [
            {**_version_json(version), "current": version.id == current_id} for version in info.versions
        ]
        data["leagues"] = leagues
        echo_json(data)
        return
    bot = info.bot
    kind = "remote (joins through the lobby with its token)" if bot.remote else "hosted program"
    typer.echo(f"Bot {bot.name}: {kind}, {bot.language}, added {when(bot.created_at)} UTC")
    if bot.removed_at is not None:
        typer.echo(f"  removed {when(bot.removed_at)} UTC: it enters no new league; its results stay")
    if not bot.remote:
        # A version's lines, not a table row: a table on an 80-column terminal folded the hash, the command and
        # the folder into columns a few letters wide (newcomer walkthrough, stop 33).
        for version in info.versions:
            current = " (current)" if version.id == current_id else ""
            # Added when first registered; a later `bot add` of the same content (which makes it current again)
            # is said apart: a version re-added looked newer than the one after it (newcomer walkthrough, stop 43).
            again = (
                f", last registered {when(version.registered_at)}"
                if when(version.registered_at) != when(version.created_at)
                else ""
            )
            typer.echo(f"Version {version.number}{current}, added {when(version.created_at)}{again} UTC")
            _echo_version(version)
    if leagues:
        shown = ", ".join(f"{league['league']} (v{league['version']}, {league['status']})" for league in leagues)
        typer.echo(f"Leagues: {shown}")
    else:
        typer.echo("Leagues: none")


def _leagues_of(session: Session, name: str) -> list[dict[str, Any]]:
    """The leagues the bot has entered, with the version it plays in each."""
    found: list[dict[str, Any]] = []
    for league in repo.list_leagues(session):
        for entrant in repo.league_entrants(session, league):
            if entrant.bot_name == name:
                found.append({"league": league.name, "version": entrant.version_number, "status": league.status.value})
    return found


@app.command("remove")
def remove_command(name: Annotated[str, typer.Argument(metavar="NAME", help="The bot's name.")]) -> None:
    """Retire a bot: it enters no new league and a remote bot's token stops working; its results stay.

    Refused while a league that has not finished needs it.
    """
    with open_session(reads=True) as session:
        found = _existing(session, name)
        remote = found is not None and found.remote
        repo.remove_bot(session, name)
    typer.echo(f"Bot {name} removed; its results stay. `mus bot add` with the same name brings it back.")
    if remote:
        typer.echo(revoke_on_referee(name))


app.command("check", cls=check_cmd.DashDashCommand)(check_cmd.check_command)
