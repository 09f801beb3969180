"""What a hosted bot's command says: the language it is written in, and the `mus bot add` that registers it."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from workers.launcher import LANGUAGE_BY_SUFFIX, stdio_command

LANGUAGE_BY_PROGRAM = {
    "python": "python",
    "pypy": "python",
    "uv": "python",
    "node": "javascript",
    "nodejs": "javascript",
    "bun": "javascript",
    "deno": "javascript",
    "java": "java",
    "kotlin": "kotlin",
    "go": "go",
    "cargo": "rust",
    "dotnet": "csharp",
    "ruby": "ruby",
    "php": "php",
    "perl": "perl",
    "lua": "lua",
    "Rscript": "r",
    "julia": "julia",
    "sh": "shell",
    "bash": "shell",
    "dash": "shell",
    "zsh": "shell",
    "awk": "awk",
    "gawk": "awk",
    "mawk": "awk",
    "tclsh": "tcl",
}
"""The language of a command whose program is an interpreter or toolchain (version suffixes stripped)."""


def guess_language(command: list[str]) -> str:
    """The bot's language from its command: the interpreter's name, else a named file's suffix, else unknown."""
    if not command:
        return "unknown"
    program = Path(command[0]).name.lower().removesuffix(".exe")
    base = program.rstrip("0123456789.")
    for name in (program, base):
        for known, language in LANGUAGE_BY_PROGRAM.items():
            if name == known.lower():
                return language
    for word in command:
        by_suffix = LANGUAGE_BY_SUFFIX.get(Path(word).suffix.lower())
        if by_suffix is not None:
            return by_suffix
    return "unknown"


def add_command_line(
    name: str,
    command: Sequence[str],
    folder: str | Path | None,
    *,
    persistent: bool,
    language: str | None = None,
    options: Sequence[str] = (),
) -> str:
    """The `mus bot add` that registers `command` (as stored: a stdio program behind its bridge) from `folder`
    with the same choices: what a message that asks for the bot to be added (again) gives to paste. A hint that
    dropped `--stdio` or `--persistent` registered another bot (newcomer walkthrough, stop 34)."""
    words = list(command)
    flags = []
    bridge = stdio_command([])
    if len(words) > len(bridge) and words[: len(bridge)] == bridge:
        flags.append("--stdio")
        words = words[len(bridge) :]
    if persistent:
        flags.append("--persistent")
    if folder:
        flags += ["--dir", str(folder)]
    if language and language != guess_language(words):
        flags += ["--language", language]
    return shlex.join(["mus", "bot", "add", name, *flags, *options, "--", *words])


MUS_OPTIONS = frozenset({"--stdio", "--persistent", "--dir", "--language", "--check", "--json", "--remote"})
"""The options of `mus bot add` and `check` a newcomer may put after `--` by mistake."""


def misplaced_options(command: Sequence[str]) -> str:
    """A note when words of the bot's command are options of mus's own (`-- node bot.js --stdio`): after `--`
    they go to the program, which then failed its check with nothing said of why (newcomer walkthrough, stop 34);
    else ''."""
    misplaced = [word for word in command[1:] if word.split("=", 1)[0] in MUS_OPTIONS]
    if not misplaced:
        return ""
    one = len(misplaced) == 1
    return (
        f"note: {', '.join(misplaced)} {'is' if one else 'are'} after `--`, so the bot's program gets"
        f" {'it' if one else 'them'}, not mus: put mus's options before `--`"
    )
