"""Starting hosted bot programs: the one place a bot process is launched, inside its sandbox.

A sandboxed seat runs under bubblewrap (`bwrap`): new pid, network, ipc, uts and cgroup namespaces, as a host uid
of its own where the worker is root (`SEAT_UID_BASE`), else in a user namespace as 65534; a read-only file system
that holds only the system folders, the Python runtime, the project's packages the example bots import, and the
bot's own folder; `/tmp` and `HOME` are private tmpfs; the only way out is the referee's sockets in the seat's
own folder, bound in at `SOCKET_DIR` (`mus bot check` binds its frames socket at `FRAMES_DIR`). The environment is
cleared: the bot gets `MUS_REFEREE`, `MUS_TOKEN`, `MUS_FRAMES` where there are frames, `PATH`, `HOME`, `LANG` and
`PYTHONUNBUFFERED=1` (so a Python bot's log is written as it goes). Limits are rlimits set by `prlimit` just
before `bwrap` (CPU time, address space, open files, file size) and, where this machine lets the worker make
cgroups, a `pids.max` and a memory limit on the seat as a whole; each seat's output is
read here and kept up to `Limits.output_bytes`. Where it can make a cgroup v2, a seat's processes are frozen
while the seat is not asked to decide (`TurnGate`), so partners never run at once. See docs/sandbox.md.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import logging
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from workers.host_lock import lock_path
from workers.scratch import own_folder
from workers.seccomp import seccomp_filter

log = logging.getLogger(__name__)

EXAMPLE_BOTS = {
    "random": [sys.executable, "-m", "clients.bots.random"],
    "rules": [sys.executable, "-m", "clients.bots.rules"],
    "passive": [sys.executable, "-m", "clients.bots.passive"],
}
"""The example bots by name, each run as its own program like any other bot."""

STDIO_BRIDGE = ("-m", "clients.stdio", "--")
"""After a Python interpreter: the stdio bridge (docs/stdio.md), which plays the seat over gRPC for the program
that follows, in the same process tree and so in the same sandbox, with the same limits."""

INSTALL_HINT = (
    "no sandbox on this machine: install bubblewrap (apt-get install bubblewrap) and allow user namespaces (the"
    " log says why its trial run failed)"
)
"""What to do when `sandbox_available()` is False."""

SOCKET_DIR = "/run/mus"
"""Where the referee's socket folder is bound inside a sandbox (read-only: connecting needs no write)."""

FRAMES_DIR = "/run/mus-frames"
"""Where a launched seat's own frames folder is bound inside its sandbox (read-only, like SOCKET_DIR): its
`play.sock` serves that seat's Play stream without HTTP/2 (`MUS_FRAMES`, docs/protocol.md). No other seat binds it,
so no seat can reach or fill another's."""

FRAMES_VARIABLE = "MUS_FRAMES"
"""Where a launched seat may play its Play stream over frames instead of gRPC (optional for the bot)."""

SANDBOX_HOME = "/home/bot"
"""A sandboxed bot's HOME: a private tmpfs, like /tmp."""

SANDBOX_UID = 65534
"""The uid and gid a bot runs as inside its user namespace (nobody), where the worker is not root."""

SEAT_UID_BASE = 1 << 30
"""Where the worker is root, each seat runs as a host uid and gid of its own: this plus the host pid of its bwrap
put through the machine's secret permutation (`seat_uid_script`), which no other live process has. The kernel
keeps some counts per user (the pages of its pipes, its messages in flight): shared by every seat, as under one
user namespace's mapping, one seat could move them and another read them, a channel between partners and between
the halves of a duplicate pair that a security review used to pass cards exactly. Each seat's own uid gives each
its own counts."""

PID_BITS = 22
"""A host pid is below 2**22 (the kernel's PID_MAX_LIMIT on 64-bit): the permutation's domain."""

SEAT_UID_KEY_SUFFIX = ".seat-uid-key"
"""Beside the host's play lock (`host_lock.lock_path`), the file of the machine's permutation keys, which every root
worker of the machine reads (or writes once): one permutation a machine, so no two live seats share a uid."""

SEAT_UID = "{mus-seat-uid}"
"""Stands in a sandbox command for the seat's uid until the shell that becomes its bwrap knows its pid
(`seat_command`)."""

TRUNCATED_MARKER = b"\n[output truncated at 8 MiB]\n"

STARTED_MARKER = b"mus-sandbox: started\n"
"""Printed inside the sandbox, once it is set up, just before the bot's program replaces the shell that prints
it: output that ends without it is bwrap's own error, a failure of the sandbox (never the bot's; it never ran).
A bot cannot take it back, so it cannot pass its own crash off as one. Not written to the seat's log."""

_PROJECT = Path(__file__).resolve().parents[1]
_PROJECT_PACKAGES = ("clients", "referee", "proto/gen/python")
"""What the example bots import from the project, bound folder by folder: never the project root, where the
database, the broker folder and the logs live."""

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
"""The system folders every sandbox binds read-only: a program in one of them runs in any seat."""


def bound_roots() -> tuple[Path, ...]:
    """The folders every sandbox binds whole, read-only (`sandbox_command`), resolved: the system's, the runtime's
    (`sys.prefix`, `sys.base_prefix`) and the project's packages. What lies under one, every seat reads."""
    projects = (str(_PROJECT / package) for package in _PROJECT_PACKAGES)
    return _resolved((*SYSTEM_DIRS, sys.prefix, sys.base_prefix, *projects))


@lru_cache(maxsize=8)
def _resolved(roots: tuple[str, ...]) -> tuple[Path, ...]:
    """`bound_roots`, resolved once: about half a millisecond, and a worker asks before every match (a pooled match
    costs about 20 ms). The private paths checked against them are resolved at every check (a link put in place
    since is seen)."""
    return tuple(dict.fromkeys(Path(root).resolve() for root in roots))


EXAMPLE_FOLDERS = ("clients/bots", "clients/js", "clients/cpp/build", "clients/stdio/examples")
"""The project's example bots' folders: the only bot folders under a bound root (`bound_roots`), where every seat
may read them, on purpose. A stranger's bot beside them would be read by every other bot (helper-87)."""


def example_folder(folder: Path) -> bool:
    """Whether `folder` is one of the project's example bots' folders (EXAMPLE_FOLDERS), not one inside them."""
    return folder.resolve() in {(_PROJECT / example).resolve() for example in EXAMPLE_FOLDERS}


def under_bound_root(paths: Iterable[Path]) -> tuple[Path, Path] | None:
    """The first of `paths` (a deployment's private files, `workers.play.private_paths`) that lies under a folder
    every sandbox binds (`bound_roots`), and that folder; else None. A seat's hidden tmpfs covers one logs folder
    only: a review (helper-85) saw a pooled bot read its rivals' live logs under the venv, and a seat of a worker
    that is not root read the worker's 0600 database there."""
    roots = bound_roots()
    for path in paths:
        resolved = path.resolve()
        if (root := next((root for root in roots if resolved.is_relative_to(root)), None)) is not None:
            return resolved, root
    return None


_ETC_FILES = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "localtime",
    "nsswitch.conf",
    "passwd",
    "group",
    "ssl",
    "ca-certificates",
    "mime.types",
)
"""A minimal /etc: the dynamic linker, names of uids, time zone and certificates."""

CPU_LIMIT_SEEN = 0.5
"""The share of a seat's CPU time limit its cgroup must have counted for a SIGXCPU status to be the limit's: the
kernel checks the limit on its clock's ticks, which charge a whole tick to the task that holds the CPU when it
comes, while the cgroup counts exactly; under load a seat killed at a 1 s limit showed 3% less here, and once, in
a full test run, more than 10% less (stop 45). A bot that exits with that status itself has used next to nothing."""

_SIGNAL_LIMITS = {
    signal.SIGXCPU: "CPU time limit",
    signal.SIGXFSZ: "file size limit",
}


class LaunchError(Exception):
    """A bot program cannot be started: the message says which and why."""


@dataclass(frozen=True, slots=True)
class BotProgram:
    """A bot as a program: the command to run and the folder to run it in; for the pool, the registered version
    it is (a pooled process of another version is restarted) and whether it is `persistent` (`mus bot add
    --persistent`: it plays seat after seat given on its standard input, SEATS_VARIABLE)."""

    name: str
    command: tuple[str, ...]
    cwd: Path | None = None
    version: str = ""
    persistent: bool = False


@dataclass(frozen=True, slots=True)
class Limits:
    """What one sandboxed seat may use. `cpu_s` and `address_space_bytes` are per process (SIGXCPU at the CPU
    limit, SIGKILL 5 s later); `processes` (threads count) and `memory_bytes` bound the whole seat through its
    cgroups, where the worker can make them."""

    cpu_s: int = 1800
    address_space_bytes: int = 1024 * 1024 * 1024
    processes: int = 64
    memory_bytes: int = 1024 * 1024 * 1024
    open_files: int = 256
    file_size_bytes: int = 16 * 1024 * 1024
    tmpfs_bytes: int = 64 * 1024 * 1024
    output_bytes: int = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Sandbox:
    """How to confine a seat: its limits, the host folder holding the referee's socket (bound in at SOCKET_DIR)
    and, when the seat is offered frames, the host folder of its own frames socket (bound in at FRAMES_DIR). None
    in place of a Sandbox runs the bot unconfined (a `--no-sandbox` league, or no bwrap)."""

    socket_dir: Path
    limits: Limits = field(default_factory=Limits)
    frames_dir: Path | None = None
    hidden: Path | None = None
    """The match's logs folder: should it lie in a folder the seat sees (`mus match play --logs logs/` run in the
    bot's own folder), an empty one covers it, else the seat would read the other seats' output as they play."""


def resolve_program(spec: str) -> BotProgram:
    """An example bot's name, a Python file, or a command line (split like a shell would).

    A file's folder becomes the program's folder, so that a sandbox binds it (and only it) in, and so does the
    folder of a script a command line names (`_script_folder`); any other command line runs in the current folder,
    as it would in a shell.
    """
    if spec in EXAMPLE_BOTS:
        return BotProgram(spec, tuple(EXAMPLE_BOTS[spec]))
    words = shlex.split(spec)
    if not words:
        raise LaunchError("an empty bot command")
    first = words[0]
    if first.endswith(".py") and Path(first).is_file():
        path = Path(first).resolve()
        return BotProgram(path.stem, (sys.executable, str(path), *words[1:]), path.parent)
    if first.endswith(".py") and shutil.which(first) is None:
        raise LaunchError(f"no file {first!r} (from {Path.cwd()})")
    if shutil.which(first) is None and not Path(first).is_file():
        known = ", ".join(EXAMPLE_BOTS)
        raise LaunchError(
            f"unknown bot {spec!r}: not an example bot ({known}), a .py file or a program on PATH (a bot added with"
            " `mus bot add` is not taken here by its name: `mus match play` takes its command after `--`, and `mus bot"
            " check NAME` checks it)"
        )
    if (own := own_program_file(first)) is not None:
        return BotProgram(own.name, (str(own), *words[1:]), own.parent)
    folder = _script_folder(words)
    return BotProgram(Path(first).name, tuple(relative_command(words, folder)), folder)


LANGUAGE_BY_SUFFIX = {
    ".py": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".ts": "typescript",
    ".jar": "java",
    ".java": "java",
    ".kt": "kotlin",
    ".go": "go",
    ".rs": "rust",
    ".cs": "csharp",
    ".rb": "ruby",
    ".php": "php",
    ".pl": "perl",
    ".lua": "lua",
    ".r": "r",
    ".jl": "julia",
    ".sh": "shell",
    ".awk": "awk",
    ".tcl": "tcl",
}
"""The language of a command by the suffix of a file it names, when its program says nothing; what makes an
argument a script (`_script_folder`)."""


def own_program_file(word: str) -> Path | None:
    """The program of a command as a file of the bot's own (`./mybot`, `/path/to/mybot`), whose folder is then
    the bot's, or None: a bare name (looked up on PATH) or a system program or runtime (`/usr/bin/python3`, a
    venv's `python`) is not the bot's, nor is its folder. A runtime is a file in a system folder or a folder on
    PATH, in mus's own Python, in a venv's `bin` (`pyvenv.cfg` beside it), or a link to such a file."""
    path = Path(word)
    if "/" not in word or not _is_file(path):
        return None
    resolved = path.resolve()
    on_path = {Path(entry).absolute() for entry in os.environ.get("PATH", "").split(os.pathsep) if entry}
    runtimes = (*SYSTEM_DIRS, sys.prefix, sys.base_prefix)
    for folder in (path.absolute().parent, resolved.parent):
        if folder in on_path or any(folder.is_relative_to(runtime) for runtime in runtimes):
            return None
        if (folder.parent / "pyvenv.cfg").is_file():
            return None
    return resolved


def _script_folder(words: Sequence[str]) -> Path:
    """Where a command line given whole (`mus match play -- ...`, `mus bot check -- ...`) whose program is not the
    bot's own file runs: the folder of the first script it names (an argument with a language's suffix,
    `LANGUAGE_BY_SUFFIX`, that is a file; a data file's folder is not the bot's), which its sandbox then binds, and
    only it, as `mus bot add` takes it; else the current folder, as in a shell. A review's bot checked with `mus bot
    check -- python bots/evil/evil.py` from the project's folder, which its sandbox bound, read every other bot's
    files under bots/, the league's logs and the broker's messages (stop 44)."""
    for word in words[1:]:
        path = Path(word)
        if path.suffix.lower() in LANGUAGE_BY_SUFFIX and _is_file(path):
            return path.resolve().parent
    return Path.cwd()


def relative_command(command: Sequence[str], folder: Path | None) -> list[str]:
    """The command as it runs from inside `folder`: an argument naming a file in the folder (as given here)
    becomes a path relative to the folder, so the stored command, and the content hash, do not depend on where
    `mus bot add` was run or where the folder lives."""
    if folder is None:
        return list(command)
    words: list[str] = []
    for position, word in enumerate(command):
        path = Path(word)
        if _is_file(path) and path.resolve().is_relative_to(folder):
            relative = path.resolve().relative_to(folder).as_posix()
            # A bare name in the program's place would be looked up on PATH: keep it a path.
            word = f"./{relative}" if position == 0 and "/" not in relative else relative
        words.append(word)
    return words


def stdio_program(program: BotProgram) -> BotProgram:
    """The program run behind the stdio bridge: it speaks JSON lines, the bridge speaks gRPC for it."""
    files = [Path(program.cwd or ".") / word for word in program.command[1:]]
    name = next((path.stem for path in files if _is_file(path)), program.name)
    return BotProgram(name, (sys.executable, *STDIO_BRIDGE, *program.command), program.cwd)


def _is_file(path: Path) -> bool:
    """Whether `path` names a file; False for any word that cannot be a path (too long, say)."""
    try:
        return path.is_file()
    except OSError:
        return False


def stdio_command(command: Sequence[str]) -> list[str]:
    """A stored bot command that runs `command` behind the stdio bridge (`mus bot add NAME --stdio -- ...`)."""
    return ["python", *STDIO_BRIDGE, *command]


def bridged(command: Sequence[str]) -> Sequence[str]:
    """The program proper of a stored command: behind the stdio bridge (`stdio_command`), the one it runs."""
    end = 1 + len(STDIO_BRIDGE)
    return command[end:] if tuple(command[1:end]) == STDIO_BRIDGE and len(command) > end else command


# ---------------------------------------------------------------------------------------------- availability


@cache
def sandbox_available() -> bool:
    """True when bwrap is on PATH and a trial sandbox (the one bots get, running `true`) starts."""
    if shutil.which("bwrap") is None or shutil.which("prlimit") is None:
        return False
    if own_seat_uids() and shutil.which("setpriv") is None:
        return False
    probe = BotProgram("probe", ("true",))
    try:
        with seccomp_pipe() as seccomp_fd:
            command = seat_command(
                sandbox_command(probe, Sandbox(Path("/nonexistent-probe")), {}, socket=False, seccomp_fd=seccomp_fd)
            )
            done = subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=20,
                check=False,
                pass_fds=() if seccomp_fd is None else (seccomp_fd,),
            )
    except (OSError, subprocess.TimeoutExpired, LaunchError) as error:  # LaunchError: the seat uid keys' file
        log.warning("the sandbox trial run failed: %s", error)
        return False
    if done.returncode != 0:
        log.warning("the sandbox trial run failed: %s", done.stderr.decode(errors="replace").strip())
    return done.returncode == 0


# ---------------------------------------------------------------------------------------------- the command


@contextlib.contextmanager
def seccomp_pipe() -> Iterator[int | None]:
    """A pipe's read end holding the seccomp filter (workers/seccomp.py), for `bwrap --seccomp FD`; None where
    this architecture has no filter (the seat then runs without one, and the worker says so once)."""
    program = seccomp_filter()
    if program is None:
        _warn_no_seccomp()
        yield None
        return
    read, write = os.pipe()
    try:
        os.write(write, program)  # a few hundred bytes: far below a pipe's buffer
        os.close(write)
        write = -1
        yield read
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)


@cache
def _warn_no_seccomp() -> None:
    log.warning("no seccomp filter for this architecture: seats run without one (docs/sandbox.md)")


def sandbox_environment(referee_address: str, seat_token: str, frames: str | None = None) -> dict[str, str]:
    """Everything a sandboxed bot's environment holds (docs/sandbox.md)."""
    path = [str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]
    return {
        "MUS_REFEREE": referee_address,
        "MUS_TOKEN": seat_token,
        **({FRAMES_VARIABLE: frames} if frames else {}),
        "PATH": os.pathsep.join(dict.fromkeys(path)),
        "HOME": SANDBOX_HOME,
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
    }


def sandbox_command(
    program: BotProgram,
    sandbox: Sandbox,
    environment: dict[str, str],
    *,
    socket: bool = True,
    seccomp_fd: int | None = None,
) -> list[str]:
    """The full command line of a sandboxed seat: `prlimit` (rlimits) then `bwrap` then the bot's command.

    `seccomp_fd` is a descriptor the child inherits, holding the seat's seccomp filter (`seccomp_pipe`).
    """
    limits = sandbox.limits
    own_uid = own_seat_uids()
    if own_uid and program.cwd is not None and (unreadable := unreadable_by_seats(Path(program.cwd))):
        raise LaunchError(unreadable)
    rlimits = [
        "prlimit",
        f"--cpu={limits.cpu_s}:{limits.cpu_s + 5}",
        f"--as={limits.address_space_bytes}",
        f"--nofile={limits.open_files}",
        f"--fsize={limits.file_size_bytes}",
        "--core=0",
        "--",
    ]
    # Run by root, bwrap keeps only the capabilities `setpriv` needs to become the seat's own uid (SEAT_UID_BASE),
    # then drops them all; elsewhere a user namespace maps the caller's uid to nobody.
    identity = (
        ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
        if own_uid
        else ["--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    )
    bwrap = [
        "bwrap",
        *identity,
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname",
        "mus-bot",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
    ]
    for name, value in environment.items():
        bwrap += ["--setenv", name, value]
    bound: list[Path] = []
    made = {"/"}

    def mount(*op: str) -> list[str]:
        """A mount op (its destination last), after the folders above its destination where the seat's own uid must
        pass through them: bwrap, run by root, would make them 0700 and root's (a user namespace maps them to the
        seat's uid instead). Those folders hold nothing but the mount points."""
        above: list[str] = []
        for folder in reversed(PurePosixPath(op[-1]).parents) if own_uid else ():
            if str(folder) in made or any(folder.is_relative_to(root) for root in bound):
                continue  # made already, or inside a bound folder (its own, with the host's modes)
            made.add(str(folder))
            above += ["--perms", "0755", "--dir", str(folder)]
        made.add(op[-1])
        return [*above, *op]

    for folder in SYSTEM_DIRS:
        if os.path.islink(folder):
            bwrap += mount("--symlink", os.readlink(folder), folder)
        elif os.path.isdir(folder):
            bwrap += mount("--ro-bind", folder, folder)
            bound.append(Path(folder))
    for name in _ETC_FILES:
        bwrap += mount("--ro-bind-try", f"/etc/{name}", f"/etc/{name}")
    # The scratch mounts come before the runtime's binds: a project or a venv that lies under /tmp (a CI clone)
    # is then bound on top of the private tmpfs instead of being hidden by it.
    # No pseudo-terminal: how many are open is counted host-wide (/proc/sys/kernel/pty/nr, readable by any seat),
    # and a review passed a bit a quarter second through it without an error. /dev/ptmx is /dev/null's node on a
    # nodev mount: opening it fails.
    bwrap += [*mount("--dev", "/dev"), "--ro-bind", "/dev/null", "/dev/ptmx", *mount("--proc", "/proc")]
    bwrap += _proc_view(limits.memory_bytes)
    for scratch in ("/tmp", SANDBOX_HOME):  # writable by the seat's uid, whichever it is
        bwrap += mount("--perms", "1777", "--size", str(limits.tmpfs_bytes), "--tmpfs", scratch)
    for prefix in dict.fromkeys((sys.base_prefix, sys.prefix)):
        if not any(Path(prefix).is_relative_to(root) for root in bound):
            bwrap += mount("--ro-bind", prefix, prefix)
            bound.append(Path(prefix))
    for package in _PROJECT_PACKAGES:
        source = _PROJECT / package
        if source.is_dir():
            bwrap += mount("--ro-bind", str(source), str(source))
            bound.append(source)
    if socket:
        bwrap += mount("--ro-bind", str(sandbox.socket_dir), SOCKET_DIR)
        if sandbox.frames_dir is not None:
            bwrap += mount("--ro-bind", str(sandbox.frames_dir), FRAMES_DIR)
    if program.cwd is not None:
        own = str(Path(program.cwd).resolve())
        bwrap += [*mount("--ro-bind", own, own), "--chdir", own]
        bound.append(Path(own))
    else:
        bwrap += ["--chdir", SANDBOX_HOME]
    for executable in _executables(program):
        if not any(executable.is_relative_to(root) for root in bound):
            bwrap += mount("--ro-bind", str(executable), str(executable))
            bound.append(executable)
    hidden = sandbox.hidden.resolve() if sandbox.hidden is not None else None
    if hidden is not None and hidden in bound:  # covered, the bot would be gone too (a review's `--logs .`)
        raise LaunchError(
            f"the logs folder {hidden} is one the bots' sandboxes show them (a bot's own folder): it would show them"
            " the other seats' output; give the logs a folder of their own (a new subfolder works)"
        )
    if hidden is not None and hidden.is_dir() and any(hidden.is_relative_to(root) for root in bound):
        bwrap += mount("--perms", "0555", "--size", "4096", "--tmpfs", str(hidden))
    bwrap += ["--remount-ro", "/"]  # the root holding the mount points: nothing to write there either
    if seccomp_fd is not None:
        bwrap += ["--seccomp", str(seccomp_fd)]
    announce = ["/bin/sh", "-c", f"printf '{STARTED_MARKER.decode().strip()}\\n' && exec \"$@\"", "sh"]
    drop = ["setpriv", "--reuid", SEAT_UID, "--regid", SEAT_UID, "--clear-groups"] if own_uid else []
    if drop:
        drop += ["--inh-caps=-all", "--bounding-set=-all", "--"]
    return [*rlimits, *bwrap, "--", *drop, *announce, *program.command]


HOST_COUNTERS = (
    "meminfo",
    "vmstat",
    "zoneinfo",
    "buddyinfo",
    "swaps",
    "loadavg",
    "stat",
    "uptime",
    "schedstat",
    "diskstats",
    "interrupts",
    "softirqs",
    "pressure/cpu",
    "pressure/memory",
    "pressure/io",
    "pressure/irq",
    "sys/fs/file-nr",
    "sys/fs/inode-nr",
    "sys/fs/inode-state",
    "sys/fs/dentry-state",
    "sys/fs/aio-nr",
    "sys/kernel/pty/nr",
    "cpuinfo",
)
"""Files of /proc that count for the whole host what a seat can move and keep while it is frozen (its memory, its
threads, its open files, the CPU it used in its turn, the clock speed it left): its partner would read them in its
own turn. A seat sees a still copy of each instead (`_proc_view`), and sysinfo(2), which counts the same, is
refused (seccomp)."""


PROC_SHOWN = frozenset({"self", "thread-self", "net", "mounts", "sys", "filesystems", "version", "pressure"})
"""What a seat sees of /proc's own entries (beside its processes' folders and the still copies of HOST_COUNTERS):
its own processes, its own network namespace and mounts, the kernel's settings (/proc/sys, whose host-wide counts
are in HOST_COUNTERS) and what never moves."""

PROC_STATIC = frozenset(
    {
        *("cmdline", "config.gz", "consoles", "crypto", "devices", "dma", "execdomains", "iomem", "ioports"),
        *("kallsyms", "misc", "mtrr", "partitions", "acpi", "bus", "driver", "tty"),
    }
)
"""Entries of /proc that a seat sees as the host's because nothing a seat does moves them (the hardware, the
drivers, the kernel's build and modules: a seat loads none, and its sockets are Unix sockets only). Every entry
that is neither here nor in PROC_SHOWN nor HOST_COUNTERS, whatever a newer kernel adds, is hidden (an empty file
or folder) where a seat could read it: /proc/fs, /proc/cgroups, /proc/locks, /proc/irq and the like count for
the whole host, and a review read a bot's writes from its partner's seat in ext4's statistics under /proc/fs.
Each hidden entry is a mount of the sandbox's, about 0.3 ms of its start."""


MEMINFO_FIELDS = ("MemTotal", "MemFree", "MemAvailable", "Buffers", "Cached", "SwapCached", "SwapTotal", "SwapFree")
"""The still /proc/meminfo's lines: the memory is the seat's limit, all of it free."""


_OWN_FOLDERS: list[Path] = []
"""The folders this worker process made for its seats' sandboxes, removed as it ends (`remove_own_folders`)."""


@atexit.register
def remove_own_folders() -> None:
    """Remove this process's `_OWN_FOLDERS` (at its exit; a prefork worker's child, which ends with os._exit and
    runs no atexit function, calls it on Celery's worker_process_shutdown)."""
    while _OWN_FOLDERS:
        shutil.rmtree(_OWN_FOLDERS.pop(), ignore_errors=True)
    _proc_view.cache_clear()


@cache
def _proc_view(memory_bytes: int) -> tuple[str, ...]:
    """bwrap's binds over the seat's /proc: an empty file or folder over each entry a seat could read that is not
    in PROC_SHOWN or PROC_STATIC, and a still copy of each of HOST_COUNTERS that this kernel has: an idle machine
    of the seat's memory, with the host's CPUs and boot time (which never move). Made once per worker process."""
    folder = own_folder("mus-proc")
    _OWN_FOLDERS.append(folder)
    kb = memory_bytes // 1024
    cpus = os.cpu_count() or 1
    idle_cpu = "0 0 0 0 0 0 0 0 0 0"
    boot = next((line for line in _read(Path("/proc/stat")).splitlines() if line.startswith("btime ")), "btime 0")
    pressure = "".join(f"{kind} avg10=0.00 avg60=0.00 avg300=0.00 total=0\n" for kind in ("some", "full"))
    still = {
        "meminfo": "".join(f"{name + ':':<16}{kb if name.startswith('Mem') else 0:>8} kB\n" for name in MEMINFO_FIELDS),
        "swaps": "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n",
        "loadavg": "0.00 0.00 0.00 1/1 1\n",
        "stat": f"cpu  {idle_cpu}\n"
        + "".join(f"cpu{index} {idle_cpu}\n" for index in range(cpus))
        + f"intr 0\nctxt 0\n{boot}\nprocesses 1\nprocs_running 1\nprocs_blocked 0\nsoftirq 0\n",
        "uptime": "1.00 0.00\n",
        "pressure/cpu": pressure,
        "pressure/memory": pressure,
        "pressure/io": pressure,
        "pressure/irq": pressure,
        "sys/fs/file-nr": "1024\t0\t9223372036854775807\n",
        "sys/fs/inode-nr": "1024\t0\n",
        "sys/fs/inode-state": "1024\t0\t0\t0\t0\t0\t0\n",
        "sys/fs/dentry-state": "1024\t0\t45\t0\t0\t0\n",
        "sys/fs/aio-nr": "0\n",
        "sys/kernel/pty/nr": "0\n",
        "cpuinfo": _read(Path("/proc/cpuinfo")),
    }
    empty_file, empty_folder = folder / "empty", folder / "empty.d"
    empty_file.write_text("")
    empty_file.chmod(0o444)
    empty_folder.mkdir(mode=0o555)
    binds: list[str] = []
    shown = PROC_SHOWN | PROC_STATIC | {name.split("/")[0] for name in HOST_COUNTERS}
    for entry in sorted(os.scandir("/proc"), key=lambda entry: entry.name):
        if entry.name.isdigit() or entry.name in shown or not entry.stat(follow_symlinks=False).st_mode & 0o004:
            continue  # a process's folder, shown, or unreadable by a seat (root's alone)
        hidden = empty_folder if entry.is_dir(follow_symlinks=False) else empty_file
        binds += ["--ro-bind", str(hidden), f"/proc/{entry.name}"]
    # A still copy of each counter's folder, bound whole (one mount instead of one a file): its other files as the
    # worker found them (settings, which a seat cannot change).
    for parent in sorted({str(PurePosixPath(name).parent) for name in HOST_COUNTERS if "/" in name}):
        if Path("/proc", parent).is_dir():
            _copy_tree(Path("/proc", parent), folder / parent.replace("/", "-"))
            binds += ["--ro-bind", str(folder / parent.replace("/", "-")), f"/proc/{parent}"]
    for name in HOST_COUNTERS:
        if not Path("/proc", name).exists():
            continue
        parent, _, base = name.rpartition("/")
        source = folder / parent.replace("/", "-") / base if parent else folder / name
        source.unlink(missing_ok=True)
        source.write_text(still.get(name, ""))
        source.chmod(0o444)
        if not parent:
            binds += ["--ro-bind", str(source), f"/proc/{name}"]
    return tuple(binds)


def _copy_tree(source: Path, target: Path) -> None:
    """The readable regular files of a /proc folder, as they read now, in a folder readable by any seat."""
    target.mkdir(mode=0o755)
    for entry in os.scandir(source):
        path = target / entry.name
        if entry.is_dir(follow_symlinks=False):
            if not os.path.ismount(entry.path):  # binfmt_misc may be an automount: reading it would mount it
                with contextlib.suppress(OSError):
                    _copy_tree(Path(entry.path), path)
        elif entry.is_file(follow_symlinks=False):
            with contextlib.suppress(OSError):
                path.write_bytes(Path(entry.path).read_bytes())
                path.chmod(0o444)


def open_to_seat(path: Path) -> Path:
    """Let the seat whose sandbox binds `path` (a folder of its own, or a socket in it) enter it or connect to it
    as its own uid (SEAT_UID_BASE): a folder 0755, a socket 0777. The folder's parents on the host stay the
    worker's alone (mkdtemp's 0700), so no other user of the host reaches them."""
    path.chmod(0o777 if path.is_socket() else 0o755)
    return path


def unreadable_by_seats(folder: Path) -> str:
    """Why a seat running as its own uid (SEAT_UID_BASE) could not read the bot's `folder`, or ''."""
    try:
        mode = folder.stat().st_mode
    except OSError:
        return ""  # gone: bwrap says so when the seat starts, an infrastructure failure like any sandbox's
    if mode & 0o005 != 0o005:
        return (
            f"the bot's folder {folder} is not readable by other users (mode {mode & 0o777:o}), and a seat runs as a"
            f" user of its own: make it readable (chmod -R o+rX {folder})"
        )
    return ""


def own_seat_uids() -> bool:
    """Whether each seat runs as a host uid of its own (SEAT_UID_BASE): where the worker is root."""
    return os.geteuid() == 0


@cache
def _seat_uid_keys() -> tuple[int, ...]:
    """The machine's four round keys of the seat uid permutation, from their file beside the host lock, which the
    first root worker writes (linked into place whole, so every worker reads the same keys). A file a user other
    than root could have written is refused: its keys would be theirs."""
    path = lock_path().with_name(lock_path().name + SEAT_UID_KEY_SUFFIX)
    if not path.exists():
        draft = path.with_name(f"{path.name}.{os.getpid()}-{uuid.uuid4().hex}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, " ".join(str(secrets.randbelow(1 << 24)) for _ in range(4)).encode())
        finally:
            os.close(fd)
        try:
            with contextlib.suppress(FileExistsError):
                os.link(draft, path)
        finally:
            draft.unlink()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        status = os.fstat(fd)
        text = os.read(fd, 256).decode(errors="replace")
    finally:
        os.close(fd)
    keys = tuple(int(word) for word in text.split() if word.isdigit())
    if status.st_uid != 0 or status.st_mode & 0o077 or len(keys) != 4 or max(keys) >= 1 << 24:
        raise LaunchError(
            f"{path} is not the seat uid keys a root worker writes (root's own, 0600, four numbers): remove it, and"
            " the next worker writes it again"
        )
    return keys


def seat_uid_script(pid: str = "$$", keys: Sequence[int] | None = None) -> str:
    """A shell fragment that sets `uid` to the seat's uid: SEAT_UID_BASE plus `pid` put through a four-round
    Feistel permutation of PID_BITS bits keyed by the machine's keys. A permutation keeps each live seat's uid its
    own; a secret one keeps the host's pid counter out of it: the pid itself (stop 42's uid) let a seat read how
    far the counter had moved since another seat started, and a bot moved it (forks after its match) to tell its
    seat in the duplicate twin three bits of a rival's hand (a security review, stop 43)."""
    half = PID_BITS // 2
    mask = (1 << half) - 1
    rounds = " ".join(str(key) for key in (keys if keys is not None else _seat_uid_keys()))
    return (
        f"l=$(({pid} >> {half})) && r=$(({pid} & {mask})) && for k in {rounds}; do"
        f" t=$r; r=$((l ^ ((((r + k) * 2654435761) >> 13) & {mask}))); l=$t; done"
        f" && uid=$(({SEAT_UID_BASE} + (l << {half} | r)))"
    )


def seat_command(command: list[str], cgroups: Sequence[Path] = ()) -> list[str]:
    """A sandbox command as it is started: a shell that joins the seat's `cgroups`, puts the seat's uid in place of
    SEAT_UID and becomes the command (prlimit, then bwrap: the same pid all along, so everything the seat starts
    is in the cgroups, and the uid is unique on the host while the seat lives)."""
    steps = [f'echo $$ > "${index}"' for index in range(1, len(cgroups) + 1)]
    if cgroups:
        steps.append(f"shift {len(cgroups)}")
    if SEAT_UID in command:
        steps.append(
            f"{seat_uid_script()} && for word; do shift;"
            f' if [ "$word" = {shlex.quote(SEAT_UID)} ]; then set -- "$@" "$uid"; else set -- "$@" "$word"; fi; done'
        )
    if not steps:
        return command
    script = " && ".join([*steps, 'exec "$@"'])
    return ["/bin/sh", "-c", script, "sh", *(str(cgroup / "cgroup.procs") for cgroup in cgroups), *command]


def _executables(program: BotProgram) -> list[Path]:
    """The bot's program file on the host (its interpreter, say), to bind where it lies: that file alone, which the
    seat runs. No other word of the command is bound: a review faked the stdio bridge's prefix (`python -m
    clients.stdio -- FILE`, with a `clients/stdio.py` of its own in its folder) to have any readable host file
    bound in, another bot's folder or a worker's log. A program behind the bridge lies in the bot's folder."""
    found = program_file(program.command[0], program.cwd)
    return [found] if found is not None else []


def program_file(first: str, cwd: Path | None) -> Path | None:
    """A program file on the host: looked up on PATH, or a path from the program's folder."""
    if "/" not in first:
        found = shutil.which(first)
        return Path(found).resolve() if found else None
    path = Path(cwd or ".") / first
    return path.resolve() if path.is_file() else None


# ---------------------------------------------------------------------------------------------- processes

PR_SET_PDEATHSIG = 1
"""prctl(2): the signal a process gets when its parent dies."""

_LIBC = ctypes.CDLL(None, use_errno=True)
"""Loaded before any fork: a child between fork and exec must not load libraries."""


def die_with_parent() -> Callable[[], None]:
    """A `preexec_fn` that has the child SIGKILLed when this process dies, even by `kill -9`.

    If this process died before the child armed the signal, the child has a new parent already: it exits.
    """
    parent = os.getpid()

    def arm() -> None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return arm


class BotProcess:
    """A launched seat: its process (sandboxed or not), the task keeping its output, and its cgroups."""

    def __init__(
        self,
        process: _Child,
        pump: asyncio.Task[None],
        cgroups: tuple[Path, ...],
        sandboxed: bool,
        started: asyncio.Event,
        setup_output: bytearray,
        *,
        freezer: Freezer | None,
        cpu_limit_s: float | None = None,
    ) -> None:
        self.process = process
        self.pump = pump
        self.cgroups = cgroups
        self.sandboxed = sandboxed
        self.started = started
        self.setup_output = setup_output
        self.cpu_limit_s = cpu_limit_s
        """A sandboxed seat's CPU time limit per process (`Limits.cpu_s`): SIGXCPU at it."""
        self.cpu_s: float | None = None
        """After `close()`: the seat's CPU-seconds, all its processes together, from its cgroup (cpuacct on v1,
        cpu.stat on v2); None where the seat had no cgroup that counts CPU."""
        self.freezer = freezer
        """Stops and resumes the seat's processes (`TurnGate`); None where it has no v2 cgroup."""

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return self.process.returncode

    async def wait(self) -> int:
        """The exit code, once the process has exited and its output is in the log (or 1 s has passed: a
        grandchild of an unconfined bot may hold the pipe open)."""
        code = await self.process.wait()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self.pump), 1.0)
        return code

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, number: signal.Signals) -> None:
        """The whole process group: the bot and whatever it started outside a sandbox; inside one, bwrap's
        death takes the pid namespace with it (--die-with-parent)."""
        _signal_group(self.process.pid, self.process.returncode, self.cgroups, number)
        if number == signal.SIGKILL:
            for cgroup in self.cgroups:
                _kill_cgroup(cgroup)

    async def close(self) -> None:
        """Kill what is left, wait for the process and its output, remove its cgroup."""
        if self.process.returncode is None:
            self.kill()
        try:
            await self.process.wait()
            _signal_group(self.process.pid, self.process.returncode, self.cgroups, signal.SIGKILL)
            try:
                await asyncio.wait_for(asyncio.shield(self.pump), 2.0)
            except TimeoutError:
                self.pump.cancel()
                await asyncio.wait([self.pump])  # its log file is closed when the seat is
        finally:
            self.process.close_output()  # cancelled too: the pipe is the worker's, and its loop outlives the match
        self.cpu_s = cgroup_cpu_s(self.cgroups)
        if self.freezer is not None:
            self.freezer.close()
        for cgroup in self.cgroups:
            await _empty_and_remove_cgroup(cgroup)

    @property
    def sandbox_failed(self) -> str:
        """After `wait()`: why the sandbox never ran the bot (bwrap's message), or '' (it ran, or none was
        asked for). Such a seat is an infrastructure failure, not the bot's."""
        if not self.sandboxed or self.started.is_set():
            return ""
        first = bytes(self.setup_output).decode(errors="replace").strip().splitlines()
        return first[0] if first else f"bwrap exited with code {self.returncode} before the bot started"

    def describe_exit(self, code: int) -> str:
        """Why the process ended, naming the limit a signal stands for (SIGXCPU: the CPU time limit) where the
        kernel's counts show the seat reached it. A sandboxed seat's status is its shell's, 128 plus the signal's
        number for a process killed, which a bot may also give as its own exit code: a review's bot that exited
        with 152 was recorded as killed for its CPU time (stop 44). Without such counts, that is what it says."""
        if code < 0:
            number = -code
        elif self.sandboxed and code > 128:
            number = code - 128
        else:
            return f"the bot process exited with code {code}"
        try:
            which = signal.Signals(number)
        except ValueError:
            return (
                f"the bot process was killed by signal {number}"
                if code < 0
                else f"the bot process ended with status {code}"
            )
        limit = None
        if which is signal.SIGKILL:
            if any(_oom_kills(cgroup) for cgroup in self.cgroups):
                limit = "memory limit, out of memory"
            if self.freezer is not None and self.freezer.stuck:
                limit = f"it did not stop within {FREEZE_LIMIT_S:g} s of its turn's end"
        elif which in _SIGNAL_LIMITS and (code < 0 or (which is signal.SIGXCPU and self._reached_cpu_limit())):
            limit = _SIGNAL_LIMITS[which]
        if limit is not None:
            return f"killed: {limit} ({which.name})"
        if code < 0:
            return f"the bot process was killed by {which.name}"
        meaning = f" (the {_SIGNAL_LIMITS[which]}'s signal)" if which in _SIGNAL_LIMITS else ""
        return f"the bot process ended with status {code}, as one killed by {which.name}{meaning} does"

    def _reached_cpu_limit(self) -> bool:
        """Whether the seat's processes have used its CPU time limit (one process's, so at least that together), as
        near as the kernel's own reckoning goes (`CPU_LIMIT_SEEN`)."""
        used = self.cpu_s if self.cpu_s is not None else cgroup_cpu_s(self.cgroups)  # once closed, its cgroup is gone
        return self.cpu_limit_s is not None and used is not None and used >= CPU_LIMIT_SEEN * self.cpu_limit_s


def _confined(
    program: BotProgram, sandbox: Sandbox, environment: dict[str, str], seccomp_fd: int | None
) -> tuple[list[str], tuple[Path, ...]]:
    """A seat's sandboxed command and the cgroups made for it: a shell joins the cgroups and becomes prlimit,
    then bwrap, so everything the seat starts is inside them."""
    _settle_audit_session()
    cgroups = _make_cgroups(sandbox.limits)
    return seat_command(sandbox_command(program, sandbox, environment, seccomp_fd=seccomp_fd), cgroups), cgroups


_AUDIT_UID_UNSET = "4294967295"


@cache
def _settle_audit_session() -> None:
    """Give this process a login uid (its own uid) if it has none, once, before its first seat: the seats inherit
    it. A process whose login uid is unset may set it once, without privilege, and take the next number of a
    host-wide counter, which it then reads in /proc/self/sessionid; every process a seat forks could do so, a
    channel a review read exactly. Once set, changing it needs CAP_AUDIT_CONTROL, which no seat has."""
    loginuid = Path("/proc/self/loginuid")
    try:
        if loginuid.read_text().strip() == _AUDIT_UID_UNSET:
            loginuid.write_text(str(os.getuid()))
    except FileNotFoundError:
        pass  # a kernel without audit: no session numbers either
    except OSError as error:
        log.warning("seats may set their own login uid (/proc/self/sessionid): %s", error)


async def launch_bot(
    program: BotProgram,
    referee_address: str,
    seat_token: str,
    *,
    log_path: Path | None = None,
    sandbox: Sandbox | None = None,
    frames: str | None = None,
) -> BotProcess:
    """Start one seat's bot process, pointed at the referee by `MUS_REFEREE` and `MUS_TOKEN`, and by
    `MUS_FRAMES` at `frames`, where the seat may be played over frames instead (None: not offered).

    With a `sandbox`, both addresses must be unix sockets inside it (`unix:SOCKET_DIR/...`,
    `unix:FRAMES_DIR/...`). The bot inherits no standard input; its output goes through a pipe to `log_path`, up
    to the output limit.
    """
    limits = sandbox.limits if sandbox is not None else Limits()
    seccomp = seccomp_pipe() if sandbox is not None else contextlib.nullcontext(None)
    with seccomp as seccomp_fd:
        return await _launch(program, referee_address, seat_token, frames, log_path, sandbox, limits, seccomp_fd)


async def _launch(
    program: BotProgram,
    referee_address: str,
    seat_token: str,
    frames: str | None,
    log_path: Path | None,
    sandbox: Sandbox | None,
    limits: Limits,
    seccomp_fd: int | None,
) -> BotProcess:
    cgroups: tuple[Path, ...] = ()
    if sandbox is not None:
        environment = sandbox_environment(referee_address, seat_token, frames)
        command, cgroups = _confined(program, sandbox, environment, seccomp_fd)
        cwd = None
        env: dict[str, str] | None = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    else:
        command = list(program.command)
        cwd = program.cwd
        env = dict(os.environ)
        # Bots run in this environment by default: `python` is the interpreter that has the SDK installed.
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        env["MUS_REFEREE"] = referee_address
        env["MUS_TOKEN"] = seat_token
        env.pop(FRAMES_VARIABLE, None)
        if frames:
            env[FRAMES_VARIABLE] = frames
        env.setdefault("PYTHONUNBUFFERED", "1")
    try:
        freezer = Freezer.of(cgroups)  # before the process: a seat that cannot be stopped never starts
        process = _Child(_spawn(command, cwd, env, seccomp_fd))
    except OSError as error:
        for cgroup in cgroups:
            _remove_cgroup(cgroup)
        raise LaunchError(f"cannot start {program.name}: {error.strerror}") from error
    started, setup_output = asyncio.Event(), bytearray()
    if sandbox is None:
        started.set()
    pump = asyncio.create_task(
        _keep_output(process.stdout, log_path, limits.output_bytes, started=started, setup_output=setup_output)
    )
    return BotProcess(
        process,
        pump,
        cgroups,
        sandbox is not None,
        started,
        setup_output,
        freezer=freezer,
        cpu_limit_s=limits.cpu_s if sandbox else None,
    )


def _sealed_pipe() -> tuple[int, int]:
    """A pipe whose inode no one may open again (mode 0): the ends passed stay usable. A seat whose uid owns the
    pipe (a user namespace maps the worker's uid to the bot's, where the worker is not root) reopened its own output
    through /proc/self/fd/1 for reading and took the sandbox's start line out, so that its crash passed for a
    sandbox that never started, its match voided onto a fresh deal and nothing charged (a review, stop 43); the
    same reopening let a pooled process fill its own input. Made before the fork, so no seat ever sees it open."""
    read_end, write_end = os.pipe()
    for end in (read_end, write_end):
        os.fchmod(end, 0)
    return read_end, write_end


def _spawn(
    command: Sequence[str],
    cwd: Path | None,
    env: dict[str, str] | None,
    seccomp_fd: int | None,
    *,
    with_input: bool = False,
) -> subprocess.Popen[bytes]:
    """A seat's or a pooled process, its output on a sealed pipe (`_sealed_pipe`), its input another such pipe
    (`with_input`) or /dev/null, in a session of its own (its process group is what `killpg` ends), handed the
    seccomp filter's descriptor. No preexec_fn: it makes Popen fork() (not vfork) a process whose gRPC threads then
    break the child before its exec."""
    output_read, output_write = _sealed_pipe()
    input_read, input_write = _sealed_pipe() if with_input else (subprocess.DEVNULL, -1)
    try:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=input_read,
            stdout=output_write,
            stderr=output_write,
            start_new_session=True,
            pass_fds=() if seccomp_fd is None else (seccomp_fd,),
        )
    except BaseException:
        for end in (output_read, input_write):
            if end >= 0:
                os.close(end)
        raise
    finally:
        for end in (output_write, input_read):
            if end >= 0:
                os.close(end)
    process.stdout = os.fdopen(output_read, "rb", buffering=0)
    if input_write >= 0:
        process.stdin = os.fdopen(input_write, "wb", buffering=0)
    return process


OUTPUT_CHUNK_BYTES = 65536
"""What a seat's output pipe is read by at a time (`_Child`)."""


class _Child:
    """A started seat process, its output and its exit, on whichever event loop runs (`referee.service.loop`).

    Not `asyncio.create_subprocess_exec`: on uvloop, the referee's loop, it forks through libuv and runs Python in
    the child before the exec (`PyOS_AfterFork_Child`), which in a worker with gRPC's threads crashed the child
    (bwrap exited with SIGSEGV before the bot started). `subprocess.Popen` forks and execs in C, as asyncio's own
    loop does under its subprocess API. Its output is read as the loop says the pipe is readable, and its one
    descriptor closed here, once: uvloop's pipe transport closed it and then had the pipe's file object close the
    same number again, which another of the worker's threads (its heartbeat's SQLite, gRPC's) could have opened in
    between (a review, stop 42). Its exit is awaited on a pidfd (Linux 5.3 and later), else by a thread. Starting
    it awaits nothing, so no cancellation falls between the fork and the watching."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        loop = asyncio.get_running_loop()
        assert popen.stdout is not None
        self._popen = popen
        self.pid = popen.pid
        self.stdout = asyncio.StreamReader(loop=loop)
        self._exit: asyncio.Future[int] = loop.create_future()
        self._output = popen.stdout.fileno()
        os.set_blocking(self._output, False)
        loop.add_reader(self._output, self._read)
        self._watch()

    def _read(self) -> None:
        try:
            data = os.read(self._output, OUTPUT_CHUNK_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if data:
            self.stdout.feed_data(data)
        else:
            self.close_output()

    def close_output(self) -> None:
        """Stop reading the output, at its end or when the seat closes (a grandchild of an unconfined bot may hold
        its pipe open after the exit); the reader then sees its end."""
        if self._output < 0:
            return
        self._exit.get_loop().remove_reader(self._output)
        self._output = -1
        assert self._popen.stdout is not None
        self._popen.stdout.close()
        self.stdout.feed_eof()

    def _watch(self) -> None:
        loop = self._exit.get_loop()
        try:
            pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):  # not Linux, or a kernel before 5.3
            threading.Thread(target=self._wait_in_thread, name=f"wait-{self.pid}", daemon=True).start()
            return

        def exited() -> None:
            if self._popen.poll() is not None:
                loop.remove_reader(pidfd)
                os.close(pidfd)
                self._exited(self._popen.returncode)

        loop.add_reader(pidfd, exited)

    def _wait_in_thread(self) -> None:
        code = self._popen.wait()
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits any more
            self._exit.get_loop().call_soon_threadsafe(self._exited, code)

    def _exited(self, code: int) -> None:
        if not self._exit.done():
            self._exit.set_result(code)

    @property
    def returncode(self) -> int | None:
        return self._exit.result() if self._exit.done() else None

    async def wait(self) -> int:
        return await asyncio.shield(self._exit)


SETUP_OUTPUT_BYTES = 64 * 1024
"""The most of a sandbox's output kept before its start line (bwrap's own error is a few lines). Unbounded, a
review's bot that had taken the line out (see `_sealed_pipe`) and then wrote 600 MiB grew the worker by that much,
searched again whole after every read on the referee's event loop: a 1 s match took 36 s (stop 43)."""


def _before_start(setup_output: bytearray, chunk: bytes) -> bytes | None:
    """Take `chunk`, read before the start marker: None while the marker has not come (the output so far kept in
    `setup_output`, its first SETUP_OUTPUT_BYTES), else what came before and after it, to log (`setup_output` then
    keeps what came before). Each chunk is searched once, with the bytes before it that the marker could span."""
    searched_from = max(0, len(setup_output) - len(STARTED_MARKER) + 1)
    setup_output += chunk
    at = setup_output.find(STARTED_MARKER, searched_from)
    if at < 0:
        span = len(STARTED_MARKER) - 1  # the last bytes, which a marker split across reads begins in, are kept
        if len(setup_output) > SETUP_OUTPUT_BYTES:
            del setup_output[SETUP_OUTPUT_BYTES - span : len(setup_output) - span]
        return None
    after = bytes(setup_output[at + len(STARTED_MARKER) :])
    del setup_output[at:]
    return bytes(setup_output) + after


async def _read_start(stream: asyncio.StreamReader, started: asyncio.Event, setup_output: bytearray) -> bytes:
    """Read up to the start marker (sets `started`; what follows is returned) or to the end (bwrap's error,
    kept in `setup_output` and returned)."""
    while not started.is_set():
        chunk = await stream.read(65536)
        if not chunk:
            return bytes(setup_output)
        found = _before_start(setup_output, chunk)
        if found is not None:
            started.set()
            return found
    return b""


class _CappedLog:
    """A seat's log file that keeps the first `cap` bytes of its output, then a marker, and drops the rest (its
    reader keeps reading, so that a chatty bot never blocks on a full pipe).

    A log that cannot be written (its disk full) drops the rest too, with a warning in the worker's log: its reader
    must go on reading. A review's bot filled the logs' disk with its allowed output; the reader that died of it
    left the seat's pipe unread, and the worker waited for that seat's end for good, holding the machine's play
    lock (stop 39)."""

    def __init__(self, log_path: Path | None, cap: int, *, tag: str = "") -> None:
        """`tag`: the worker's lines (`note`, the truncation marker) carry it, and a first line says so. A bot
        printed lines of the worker's form, naming another table and match, and a truncation marker (a review,
        stop 43): its program never sees the tag, so it cannot write a line that carries it."""
        self.path = log_path
        self.cap = cap
        self.tag = tag
        self.marker = TRUNCATED_MARKER if not tag else TRUNCATED_MARKER.replace(b"]", f" mus {tag}]".encode(), 1)
        self.written = 0
        self.line_ended = True
        self.output: BinaryIO | None = None
        if log_path is not None:
            try:
                # Not through a link: a stranger's folder may hold one named as this log (`logs.own_log_folder`).
                flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
                self.output = os.fdopen(os.open(log_path, flags, 0o644), "ab")
                if tag:
                    self.output.write(
                        f"--- mus [{tag}]: the worker's lines in this log carry [{tag}], which the bot never sees;"
                        " any other line is the bot's output ---\n".encode()
                    )
            except OSError as error:
                self._lost(error)

    def write(self, chunk: bytes) -> None:
        if self.output is None or self.written >= self.cap or not chunk:
            return
        kept = chunk[: self.cap - self.written]
        try:
            self.output.write(kept)
            self.written += len(kept)
            self.line_ended = kept.endswith(b"\n")
            if self.written >= self.cap:
                self.output.write(self.marker)
            self.output.flush()
        except OSError as error:
            self._lost(error)
            self.close()

    def _lost(self, error: OSError) -> None:
        log.warning("the output of a seat is no longer kept in %s: %s", self.path, error.strerror or error)

    def note(self, text: str) -> None:
        """A line of the worker's own in the log, on a line of its own (`PooledProcess.note`), kept past the cap: a
        pooled process's log spans its life, and a review's bot that wrote its 8 MiB early left out the line of
        every later seat, which says what match it played (helper-85). A line a seat, 500 seats a process at most."""
        if self.output is None:
            return
        mark = f"mus [{self.tag}]" if self.tag else "mus"
        try:
            self.output.write((b"" if self.line_ended else b"\n") + f"--- {mark}: {text} ---\n".encode())
            self.output.flush()
            self.line_ended = True
        except OSError as error:
            self._lost(error)
            self.close()

    def close(self) -> None:
        output, self.output = self.output, None
        if output is not None:
            with contextlib.suppress(OSError):  # what it still held is lost with the disk's room
                output.close()


async def _keep_output(
    stream: asyncio.StreamReader, log_path: Path | None, cap: int, *, started: asyncio.Event, setup_output: bytearray
) -> None:
    """Write a seat's output to its capped log. A sandbox's start marker is taken out on the way."""
    capped = _CappedLog(log_path, cap)
    try:
        first = await _read_start(stream, started, setup_output)
        while chunk := first or await stream.read(65536):
            first = b""
            capped.write(chunk)
    finally:
        capped.close()


# ---------------------------------------------------------------------------------------------- cgroups


@dataclass(frozen=True, slots=True)
class _Hierarchy:
    """Where seat cgroups are made: a folder of this process's own cgroup, and what it can limit there."""

    parent: Path
    controllers: tuple[str, ...]
    version: int


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup path per v1 controller, and under "" its v2 path (/proc/self/cgroup)."""
    own: dict[str, str] = {}
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    return own


def _hierarchies() -> tuple[_Hierarchy, ...]:
    """The cgroups this machine lets the worker make below its own: cgroup v1's pids, memory and cpu hierarchies
    (and cpuacct, which limits nothing but counts the seat's CPU), or v2 with pids, memory and cpu delegated (its
    cpu.stat counts the CPU). A seat's cpu cgroup keeps the default weight, so the seats that run at once share
    the CPU as equals whatever their processes; made only where the scheduler's autogroups do not do it already
    (`AUTOGROUPS`). And a v2 cgroup wherever this process's v2 cgroup is writable (on a hybrid machine too, beside
    v1's), for its `cgroup.freeze` (FREEZE: a seat runs only in its turns, `TurnGate`). Seat cgroups sit inside
    the worker's, so they count toward its limits."""
    root = Path("/sys/fs/cgroup")
    own = _own_cgroups()
    found: list[_Hierarchy] = []
    # Where the scheduler's autogroups apply (`_autogrouped`), each seat's session is one group already: a cpu
    # cgroup a seat would only cost its context switches (a few % of a pooled league's speed, measured).
    autogrouped = _autogrouped()
    for controller in ("pids", "memory", "cpuacct", *(() if autogrouped else ("cpu",))):
        parent = root / controller / own.get(controller, "/").lstrip("/")
        if controller in own and (parent / "tasks").is_file() and os.access(parent, os.W_OK):
            same = next((i for i, known in enumerate(found) if known.parent.resolve() == parent.resolve()), None)
            if same is None:
                found.append(_Hierarchy(parent, (controller,), 1))
            else:  # mounted together (cpu,cpuacct): one cgroup
                found[same] = _Hierarchy(found[same].parent, (*found[same].controllers, controller), 1)
    if all(hierarchy.controllers == ("cpuacct",) for hierarchy in found):
        found = []  # accounting alone is not worth a cgroup per seat where nothing can be limited
    unified = next((path for path in (root, root / "unified") if (path / "cgroup.controllers").is_file()), None)
    if unified is not None and "" in own:
        parent = unified / own[""].lstrip("/")
        enabled = _read(parent / "cgroup.subtree_control").split()
        wanted = ("pids", "memory", *(() if autogrouped else ("cpu",)))
        delegated = () if found else tuple(name for name in wanted if name in enabled)
        if os.access(parent, os.W_OK):
            found.append(_Hierarchy(parent, (*delegated, FREEZE), 2))
    return tuple(found)


FREEZE = "freeze"
"""In `_Hierarchy.controllers`: a v2 hierarchy, where every cgroup but the root has `cgroup.freeze` (Linux 5.2)."""


def _read(path: Path) -> str:
    """The file's text, or '' where it cannot be read. Read with bare system calls: a pooled seat's cgroup counters
    are read after every match, and `Path.read_text` cost several times the read itself."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return ""
    chunks: list[bytes] = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except OSError:
        return ""
    finally:
        os.close(fd)
    return b"".join(chunks).decode(errors="replace")


STALE_CGROUP_S = 60
"""A seat cgroup this old may be left over (its tasks were not reaped yet at the end of its match, or its worker
was killed): removed when empty."""


@cache
def _usable_hierarchies() -> tuple[_Hierarchy, ...]:
    found = _hierarchies()
    limited = sorted({name for hierarchy in found for name in hierarchy.controllers})
    if "pids" not in limited:
        log.warning("no pids cgroup to make: a seat's processes are bounded by its pid namespace only")
    if "memory" not in limited:
        log.warning("no memory cgroup to make: a seat's memory is bounded per process only (RLIMIT_AS)")
    if "cpu" not in limited and not _autogrouped():
        log.warning(
            "no cpu cgroup to make, and the scheduler's autogroups (%s) do not apply: before the deal, a seat with"
            " many processes takes more of the CPU than its rivals while they start (docs/sandbox.md)",
            AUTOGROUPS,
        )
    if FREEZE not in limited:
        log.warning(
            "no cgroup v2 to make: a seat's processes are not stopped outside its turns (partners may run at once)"
        )
    return found


def _autogrouped() -> bool:
    """Whether the scheduler's autogroups share the CPU between sessions, so between seats: they are on, and this
    process is in the root cpu cgroup (the kernel groups by session only the tasks of the root task group)."""
    own = _own_cgroups()
    return _read(AUTOGROUPS).strip() == "1" and own.get("cpu", own.get("")) == "/"


AUTOGROUPS = Path("/proc/sys/kernel/sched_autogroup_enabled")
"""On (1), every session is one group to the scheduler, and every seat is a session (`--new-session`): the seats
that run together, before the deal, share the CPU as equals whatever their processes, as a cpu cgroup a seat
also makes them (docs/sandbox.md)."""


def _sweep_cgroups(parent: Path) -> None:
    """Remove the empty seat cgroups left behind; rmdir fails (EBUSY) while a task is inside, so a live seat's
    cgroup is never removed, and one younger than STALE_CGROUP_S (perhaps not joined yet) is not looked at."""
    now = time.time()
    for stale in parent.glob("mus-seat-*"):
        with contextlib.suppress(OSError):
            if now - stale.stat().st_mtime > STALE_CGROUP_S:
                stale.rmdir()


def _make_cgroups(limits: Limits) -> tuple[Path, ...]:
    """The seat's cgroups, with `pids.max` and the memory limit set; () where none can be made."""
    name = f"mus-seat-{uuid.uuid4().hex[:16]}"
    made: list[Path] = []
    for hierarchy in _usable_hierarchies():
        _sweep_cgroups(hierarchy.parent)
        path = hierarchy.parent / name
        settings: dict[str, int] = {}
        if "pids" in hierarchy.controllers:
            settings["pids.max"] = limits.processes
        if "memory" in hierarchy.controllers:
            settings["memory.limit_in_bytes" if hierarchy.version == 1 else "memory.max"] = limits.memory_bytes
        try:
            path.mkdir()
            made.append(path)
            for setting, value in settings.items():
                (path / setting).write_text(str(value))
        except OSError as error:
            log.warning("cannot make the seat's cgroup %s: %s", path, error)
            for cgroup in made:
                _remove_cgroup(cgroup)
            return ()
    return tuple(made)


def cgroup_cpu_s(cgroups: Sequence[Path]) -> float | None:
    """The CPU-seconds counted by the first of `cgroups` that counts CPU (v1 cpuacct.usage in ns, v2 cpu.stat
    usage_usec), or None."""
    counter = _cpu_counter(tuple(cgroups))
    return None if counter is None else _cpu_value(counter)


@lru_cache(maxsize=1024)
def _cpu_counter(cgroups: tuple[Path, ...]) -> Path | None:
    """The file that counts the CPU of `cgroups`, found once: a pooled process's is read after each of its matches,
    and trying each cgroup's files in turn cost more than reading the one that counts."""
    for path in cgroups:
        for counter in (path / "cpuacct.usage", path / "cpu.stat"):
            if _cpu_value(counter) is not None:
                return counter
    return None


def _cpu_value(counter: Path) -> float | None:
    text = _read(counter)
    if counter.name == "cpuacct.usage":
        return int(text) / 1e9 if text.strip().isdigit() else None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec" and value.strip().isdigit():
            return int(value) / 1e6
    return None


def cgroup_memory_bytes(cgroups: Sequence[Path]) -> int | None:
    """The bytes of memory charged to the first of `cgroups` that counts them (v1 memory.usage_in_bytes, v2
    memory.current), or None."""
    counter = _memory_counter(tuple(cgroups))
    if counter is None:
        return None
    text = _read(counter).strip()
    return int(text) if text.isdigit() else None


@lru_cache(maxsize=1024)
def _memory_counter(cgroups: tuple[Path, ...]) -> Path | None:
    """The file that counts the memory of `cgroups`, found once, as `_cpu_counter`: a pool reads a process's after
    each of its matches (`BotPool.release`)."""
    for path in cgroups:
        for name in ("memory.usage_in_bytes", "memory.current"):
            if _read(path / name).strip().isdigit():
                return path / name
    return None


def _oom_kills(path: Path) -> int:
    """How many tasks of the cgroup the kernel killed for its memory limit (v1 memory.oom_control, v2
    memory.events)."""
    for name in ("memory.oom_control", "memory.events"):
        for line in _read(path / name).splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
    return 0


def _signal_group(leader: int, returncode: int | None, cgroups: Sequence[Path], number: signal.Signals) -> None:
    """Signal a bot's process group (`leader`'s: the bot and whatever it started outside a sandbox), but not once
    its leader is reaped (`returncode` known) where cgroups hold the seat: the number may be another process's by
    then, whose group a worker that is root would kill, and the cgroups hold whatever is left (a review, helper-85,
    saw a pooled process's group killed long after its leader was reaped)."""
    if returncode is not None and cgroups:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(leader, number)


def _kill_cgroup(path: Path) -> None:
    """SIGKILL every process left in the cgroup (cgroup.kill on v2; one by one on v1, until none is left)."""
    kill = path / "cgroup.kill"
    if kill.exists():
        with contextlib.suppress(OSError):
            kill.write_text("1")
        return
    for _ in range(100):
        pids = [int(pid) for pid in _read(path / "cgroup.procs").split()]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


async def _empty_and_remove_cgroup(path: Path) -> None:
    """Kill what is left in a seat's cgroup and remove it. A killed task leaves the cgroup only once it has been
    reaped, and bwrap's orphans are reaped by the host's init, which may take its time (seconds, on some
    machines): after 0.2 s the empty folder is left for `_sweep_cgroups` rather than delaying the match."""
    for _ in range(10):
        _kill_cgroup(path)
        _remove_cgroup(path)
        if not path.exists():
            return
        await asyncio.sleep(0.02)


def _remove_cgroup(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.rmdir()


# ---------------------------------------------------------------------------------------------- turns

FROZEN_SPIN_S = 0.0003
"""How long `TurnGate` waits, in the table's own call, for the seats it stops to be frozen before it holds the
table instead. The kernel stops each task before it runs any more of its own code (a task on another core is
interrupted at once), so this is microseconds for a task in user space or asleep; a task inside a long system
call that takes no signal until it returns (a large tmpfs read or write: 6-12 ms; unmapping 700 MB: up to 95 ms,
a review measured) freezes only when it returns, and meanwhile no seat runs (`TurnGate`)."""

FREEZE_LIMIT_S = 1.0
"""How long a seat may take to stop once its turn has ended before `TurnGate` kills it (nothing a bot needs takes
that long in one system call; a bot that did would hold its table, every seat frozen, for as long)."""

BYSTANDER_LIMIT_S = 0.1
"""The same for a pooled process between its seats that another match's deal waits on (`stop_all`):
nothing is charged when it is killed (its pool replaces it), and a bot that kept itself in long system calls
after each of its matches would otherwise hold the next match, other bots', a second each time."""

FREEZE_POLL_S = 0.0005
"""How often a held table's gate looks again whether the seats it stops are frozen (the event loop wakes to the
millisecond)."""


class Freezer:
    """A seat's v2 cgroup, whose processes the worker stops and resumes as a whole (`cgroup.freeze`): whatever
    a bot starts, and however it forks, all of it is in the cgroup (`seat_command`)."""

    def __init__(self, cgroup: Path) -> None:
        self.cgroup = cgroup
        self._state = os.open(cgroup / "cgroup.freeze", os.O_WRONLY | os.O_CLOEXEC)
        self._events = os.open(cgroup / "cgroup.events", os.O_RDONLY | os.O_CLOEXEC)
        self.frozen = False
        self.stuck = False
        """Killed by `TurnGate` for not stopping within FREEZE_LIMIT_S of its turn's end."""
        self._still = False
        """Seen frozen since it was last frozen: it stays so until it is thawed (`settled` reads nothing)."""

    @classmethod
    def of(cls, cgroups: Sequence[Path]) -> Freezer | None:
        """The freezer of a seat's `cgroups` (the one in a v2 hierarchy, which has `cgroup.freeze`), or None where
        there is none. One that cannot be opened raises (OSError): taken for none, the seat ran ungated (a review,
        helper-85, saw it fail open on any error, out of descriptors included)."""
        for cgroup in cgroups:
            if (cgroup / "cgroup.freeze").exists():
                return cls(cgroup)
        return None

    def freeze(self) -> None:
        if not self.frozen:
            self._write(b"1")
            self.frozen = True

    def thaw(self) -> None:
        if self.frozen:
            self._write(b"0")
            self.frozen = self._still = False

    @property
    def still(self) -> bool:
        """Known to stay frozen until it is thawed (seen frozen since it was last frozen), or killed, or closed:
        `settled` without reading anything."""
        return self._events < 0 or self.stuck or self._still

    def settled(self) -> bool:
        """Whether every process of the cgroup is frozen now (cgroup.events `frozen 1`), or killed."""
        if self.still:
            return True
        try:
            still = b"frozen 1" in os.pread(self._events, 256, 0)
        except OSError:
            return True  # the cgroup is gone, and its processes with it
        self._still = still and self.frozen
        return still

    def kill(self) -> None:
        """Kill every process of the cgroup: a task with SIGKILL pending never runs its own code again, so the
        seat counts as stopped from now on."""
        self.stuck = True
        _kill_cgroup(self.cgroup)

    def _write(self, value: bytes) -> None:
        if self._state < 0:
            return  # closed: its descriptor's number may be another file's by now
        with contextlib.suppress(OSError):  # removed: the seat has ended
            os.pwrite(self._state, value, 0)

    def close(self) -> None:
        """Thaw it (a frozen process neither reads its end of input nor exits on SIGTERM) and let go of its files;
        a table that ends later (cancelled) may still tell it to run, which then does nothing."""
        self.thaw()
        for fd in (self._state, self._events):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._state = self._events = -1


class TurnGate:
    """Which hosted seats of one table may run: set by the table (`Table.turns`) whenever that changes.

    Partners are one author's two processes. Running at the same time, one can pass its cards to the other through
    the one resource they cannot help sharing, the CPU: one spins, the other times its own loop. So a seat's
    processes run only while it has a decision open (the table never asks both partners at once while it is
    gated), and every seat runs before the match starts and after it ends. No seat runs until every seat that
    should not is seen frozen: where that takes longer than FROZEN_SPIN_S (a task inside a long system call), the
    gate freezes every seat, answers the table a future, and thaws the asked seats when the others are frozen
    (the table holds its clocks meanwhile); a seat not frozen within FREEZE_LIMIT_S is killed."""

    def __init__(self) -> None:
        self._seats: dict[int, Freezer] = {}
        self._bystanders: list[Freezer] = []
        """The worker's pooled processes, between their seats (`stop_all`): frozen before any process of a match
        runs and after its last has, and never thawed in between but for a seat."""
        self.running: frozenset[int] = frozenset(range(4))
        self._held: asyncio.Future[None] | None = None
        """While the table is held: done when the asked seats run."""
        self._held_at = 0.0

    def add(self, seat: int, freezer: Freezer | None) -> None:
        """Gate a hosted seat from now on (a seat whose process has no freezer runs freely)."""
        if freezer is not None:
            self._seats[seat] = freezer
            self(self.running)

    def stand_by(self, freezers: Sequence[Freezer]) -> asyncio.Future[None] | None:
        """Keep pooled processes of the worker's that play no seat frozen from now on, as `__call__` answers."""
        self._bystanders.extend(freezers)
        return self(self.running)

    def __bool__(self) -> bool:
        return bool(self._seats)

    def _stopping(self) -> list[Freezer]:
        """Those that must not run now and may not be stopped yet: the seats not running, and the bystanders not
        known to stay frozen (a worker's pool holds up to 24 processes, and the gate is called at every turn)."""
        return [
            *(freezer for seat, freezer in self._seats.items() if seat not in self.running),
            *(freezer for freezer in self._bystanders if not freezer.still),
        ]

    def __call__(self, running: frozenset[int]) -> asyncio.Future[None] | None:
        """Let `running` run once the others are frozen: now (None), or when the returned future is done."""
        self.running = running
        stopping = self._stopping()
        for freezer in stopping:
            freezer.freeze()  # nothing to do for one frozen before, but it is waited for if it is not yet still
        if self._held is None:
            deadline = time.monotonic() + FROZEN_SPIN_S
            stopping = [freezer for freezer in stopping if not freezer.settled()]
            while stopping and time.monotonic() < deadline:
                os.sched_yield()  # a seat to freeze may be waiting for this core (a worker pinned with its bots)
                stopping = [freezer for freezer in stopping if not freezer.settled()]
            if not stopping:
                self._thaw()
                return None
            for freezer in [*self._seats.values(), *self._bystanders]:  # nobody runs beside one not yet frozen
                if not freezer.still:
                    freezer.freeze()
            self._held = asyncio.get_running_loop().create_future()
            self._held_at = time.monotonic()
            self._look()
        return self._poll()

    def _look(self) -> None:
        """While held: thaw the asked seats once the others are frozen, killing those past FREEZE_LIMIT_S."""
        if self._poll() is not None:
            asyncio.get_running_loop().call_later(FREEZE_POLL_S, self._look)

    def _poll(self) -> asyncio.Future[None] | None:
        held = self._held
        if held is None:
            return None
        unsettled = [freezer for freezer in self._stopping() if not freezer.settled()]
        waited = time.monotonic() - self._held_at
        for freezer in unsettled:
            bystander = freezer in self._bystanders
            limit = BYSTANDER_LIMIT_S if bystander else FREEZE_LIMIT_S
            if waited > limit:
                what = "a pooled process between its seats" if bystander else "a seat"
                log.warning("%s did not stop within %g s: killed", what, limit)
                freezer.kill()
        unsettled = [freezer for freezer in unsettled if not freezer.stuck]
        if unsettled:
            return held
        self._held = None
        self._thaw()
        if not held.done():
            held.set_result(None)
        return None

    def _thaw(self) -> None:
        for seat, freezer in self._seats.items():
            if seat in self.running:
                freezer.thaw()


async def stop_all(freezers: Sequence[Freezer]) -> None:
    """Freeze every one, and return once all are seen frozen; one that is not within BYSTANDER_LIMIT_S (a task
    inside a long system call) is killed. For the worker's pooled processes before each of its matches: no process
    of the match may run beside one that played its twin (docs/pool.md). A gate with them as its bystanders and no
    seat does exactly that (`TurnGate`)."""
    held = TurnGate().stand_by(freezers)
    if held is not None:
        await held


def command_line(words: Sequence[str]) -> str:
    """A command as a shell would read it (for logs and docs)."""
    return shlex.join(words)


# ---------------------------------------------------------------------------------------------- pooled processes

SEATS_VARIABLE = "MUS_SEATS"
"""Set to `stdin` for a process that plays seat after seat (docs/protocol.md, "Seats over standard input"): it
reads one JSON line per seat, `{"referee": ADDRESS, "seat_token": TOKEN, "frames": ADDRESS}` ("frames": where it may
play the seat over frames instead of gRPC), plays it, then reads the next; it exits at the end of its input."""


IDLE_MEMORY_SLACK = 32 * 1024**2
"""What a pooled process may take between its seats beyond what it held after its match (`confine_memory`): room
for a bot that finishes its seat (its log, a collection)."""


CLOSE_GRACE_S = 1.0
"""How long a pooled process is given to exit at the end of its input before it is killed."""


class PooledProcess:
    """A hosted bot's process that plays many seats, one after another, each given on its standard input.

    Loop-independent (a `subprocess.Popen` and a thread keeping its output), so it outlives the event loop of
    the match that started it. Its output goes to one log for its whole life.
    """

    def __init__(
        self,
        program: BotProgram,
        process: subprocess.Popen[bytes],
        cgroups: tuple[Path, ...],
        sandboxed: bool,
        log_path: Path | None,
        output_bytes: int,
        socket_dir: Path,
        *,
        freezer: Freezer | None,
        memory_limit: int = Limits().memory_bytes,
    ) -> None:
        self.program = program
        self.process = process
        self.memory_limit = memory_limit
        """Its seats' memory limit (`Limits.memory_bytes`), given back when it takes a seat (`confine_memory`)."""
        self.socket_dir = socket_dir
        """This process's own folder (bound at SOCKET_DIR in its sandbox): each of its matches' referees listens
        on a socket in it, for this process alone."""
        self.cgroups = cgroups
        memory_files = (cgroup / name for cgroup in cgroups for name in ("memory.max", "memory.limit_in_bytes"))
        self._memory_file = next((path for path in memory_files if path.exists()), None)
        """Its memory limit's file (v2, else v1), found once: the limit is set twice a match (`confine_memory`)."""
        self.freezer = freezer
        """Stops and resumes its processes: in its seats' turns (`TurnGate`), and between its seats, when it is
        frozen (`workers.matches.play_programs`). None where it has no v2 cgroup."""
        self.sandboxed = sandboxed
        self.seats_played = 0
        self.cpu_seen: float | None = None
        """Its CPU-seconds when its last match ended (`cpu_s`): where the next match's count starts, without
        reading its cgroup again when that match starts."""
        self.started = threading.Event()
        if not sandboxed:
            self.started.set()
        self.setup_output = bytearray()
        self.refused = ""
        """Why the process was killed when it was offered a seat (`offer`), or ''."""
        assert process.stdin is not None
        # A seat line is written at once or never: a process that fills its own input must not block the worker's
        # event loop in `offer`. The pipe is sealed (`_sealed_pipe`), but an unconfined process run by root may
        # still open its writing end through /proc/self/fd/0.
        os.set_blocking(process.stdin.fileno(), False)
        self._log = _CappedLog(log_path, output_bytes, tag=secrets.token_hex(4))
        self._log_lock = threading.Lock()
        self._pump = threading.Thread(target=self._keep_output, name=f"mus-pool-{program.name}", daemon=True)
        self._pump.start()

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def offer(self, referee_address: str, seat_token: str, *, frames: str | None = None) -> None:
        """Give the process its next seat (`frames`: where it may play it over frames instead of gRPC, docs/pool.md).

        A process that reads its seat lines has read every earlier one by now, so the line fits in its input pipe.
        If it does not, the process filled its input itself: it is killed at once (`refused` says why), and the
        match charges its seat a crash as for any process that exits during a seat. One that has closed its input
        (it was exiting when its match ended and it was frozen) is left to the seat's watcher likewise: its exit is
        the seat's crash, a sandbox that never ran is the match's void (`workers.matches._watch`)."""
        import json

        seat = {"referee": referee_address, "seat_token": seat_token} | ({"frames": frames} if frames else {})
        line = (json.dumps(seat) + "\n").encode()
        assert self.process.stdin is not None
        try:
            written = os.write(self.process.stdin.fileno(), line)
        except BlockingIOError:
            written = 0
        except OSError:  # its input is closed: it is exiting, or no longer reads
            return
        if written < len(line):
            self.refused = "killed: its standard input was full when it was given a seat (it wrote to it itself)"
            self.kill()

    def kill(self) -> None:
        """SIGKILL the process and everything in its cgroups."""
        _signal_group(self.process.pid, self.process.returncode, self.cgroups, signal.SIGKILL)
        for cgroup in self.cgroups:
            _kill_cgroup(cgroup)

    def cpu_s(self) -> float | None:
        """The CPU-seconds its cgroup has counted so far (None without one that counts)."""
        return cgroup_cpu_s(self.cgroups)

    def memory_bytes(self) -> int | None:
        """The memory its cgroup holds now, its children's included (None without a memory cgroup)."""
        return cgroup_memory_bytes(self.cgroups)

    @property
    def sandbox_failed(self) -> str:
        """Once it has exited: why its sandbox never ran the bot, or '' (see `BotProcess.sandbox_failed`)."""
        if not self.sandboxed or self.started.is_set() or self.alive:
            return ""
        self._pump.join(1.0)
        if self.started.is_set():
            return ""
        first = bytes(self.setup_output).decode(errors="replace").strip().splitlines()
        return first[0] if first else f"bwrap exited with code {self.process.returncode} before the bot started"

    def describe_exit(self) -> str:
        code = self.process.returncode
        if code is None:
            return "running"
        if self.freezer is not None and self.freezer.stuck:
            return f"killed: it did not stop within {FREEZE_LIMIT_S:g} s of its turn's end (SIGKILL)"
        return self.refused or f"the pooled bot process exited with code {code}"

    def confine_memory(self, held: int) -> bool:
        """Between its seats: its memory limit lowered to what it holds, plus IDLE_MEMORY_SLACK, until `take`. Its
        pool counts it by what it held after its match (`BotPool.release`): a security review's process took 800 MB
        just after that, and its pool's processes held 6.2 GB frozen, past the pool's cap. One that needs more is
        killed by the kernel, between its seats: its pool replaces it, nothing charged. False where the limit could
        not be set (a v1 memory cgroup refuses, EBUSY, one below what the process has taken since it was counted):
        its pool then retires it."""
        return self._limit_memory(held + IDLE_MEMORY_SLACK) is not False

    def _limit_memory(self, limit: int) -> bool | None:
        """Set the memory limit: True, False where the kernel refused it, None where there is no memory cgroup."""
        if self._memory_file is None:
            return None
        try:
            fd = os.open(self._memory_file, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.write(fd, str(limit).encode())
            finally:
                os.close(fd)
        except OSError:
            return False if self.alive else None  # a process gone has nothing left to hold
        return True

    def take(self) -> None:
        """Thaw it for its next seat, with its seat's memory limit."""
        self._limit_memory(self.memory_limit)
        if self.freezer is not None:
            self.freezer.thaw()

    def end_input(self) -> None:
        """Close its standard input: a well-behaved process exits (`close` waits for it)."""
        self.take()
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()

    def close(self, grace_s: float = CLOSE_GRACE_S) -> None:
        """End of input and `grace_s` to exit (a well-behaved process does), then kill what is left and remove its
        cgroups. With no grace it is killed where it stands, frozen or not: it never runs again."""
        if grace_s > 0:
            self.end_input()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=grace_s)
        self.kill()
        self.process.wait()
        if self.process.stdin is not None:  # closed by `end_input` given a grace; else only now, once it is dead
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        if self.freezer is not None:
            self.freezer.close()
        for cgroup in self.cgroups:
            _remove_cgroup(cgroup)
        self._pump.join(1.0)

    def note(self, text: str) -> None:
        """A line in the process's log from the worker: which seat, table and match comes next (one log holds all
        of a process's seats, and a bot's own lines name its tables only by their ids)."""
        with self._log_lock:
            self._log.note(text)

    def _keep_output(self) -> None:
        assert self.process.stdout is not None
        stream = self.process.stdout
        try:
            while chunk := os.read(stream.fileno(), 65536):
                if not self.started.is_set():
                    found = _before_start(self.setup_output, chunk)
                    if found is None:
                        continue
                    chunk = found
                    self.started.set()
                with self._log_lock:
                    self._log.write(chunk)
        finally:
            with self._log_lock:
                self._log.close()


def start_pooled(
    program: BotProgram, socket_dir: Path, *, limits: Limits | None, log_path: Path | None
) -> PooledProcess:
    """Start a process of `program` that plays seats given on its standard input (SEATS_VARIABLE), confined
    like a seat (`launch_bot`) when `limits` are given. `socket_dir` is its own folder, bound at SOCKET_DIR in
    its sandbox: the referee of each of its matches listens there too, so it never sees another's socket."""
    hidden = log_path.parent if log_path is not None else None
    sandbox = Sandbox(socket_dir, limits, hidden=hidden) if limits is not None else None
    seccomp = seccomp_pipe() if sandbox is not None else contextlib.nullcontext(None)
    with seccomp as seccomp_fd:
        return _start_pooled(program, socket_dir, sandbox, log_path, seccomp_fd)


def _start_pooled(
    program: BotProgram, socket_dir: Path, sandbox: Sandbox | None, log_path: Path | None, seccomp_fd: int | None
) -> PooledProcess:
    limits = sandbox.limits if sandbox is not None else Limits()
    cgroups: tuple[Path, ...] = ()
    if sandbox is not None:
        environment = sandbox_environment("", "")
        del environment["MUS_REFEREE"], environment["MUS_TOKEN"]
        environment[SEATS_VARIABLE] = "stdin"
        command, cgroups = _confined(program, sandbox, environment, seccomp_fd)
        cwd = None
        env: dict[str, str] = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    else:
        command = list(program.command)
        cwd = program.cwd
        env = dict(os.environ)
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        env.pop("MUS_TOKEN", None)
        env.pop("MUS_REFEREE", None)
        env.pop(FRAMES_VARIABLE, None)
        env[SEATS_VARIABLE] = "stdin"
        env.setdefault("PYTHONUNBUFFERED", "1")
    try:
        # A sandbox dies with the worker (bwrap --die-with-parent); an unconfined pooled process sees the end of its
        # input when the worker dies, and exits.
        freezer = Freezer.of(cgroups)  # before the process: one that cannot be stopped never starts
        process = _spawn(command, cwd, env, seccomp_fd, with_input=True)
    except OSError as error:
        for cgroup in cgroups:
            _remove_cgroup(cgroup)
        raise LaunchError(f"cannot start {program.name}: {error.strerror}") from error
    return PooledProcess(
        program,
        process,
        cgroups,
        sandbox is not None,
        log_path,
        limits.output_bytes,
        socket_dir,
        freezer=freezer,
        memory_limit=limits.memory_bytes,
    )
