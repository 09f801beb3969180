"""A hostile hosted bot: one program, one mode per attack on what surrounds it (issue 9).

Run as `python hostile.py MODE[,MODE...] [--db PATH] [--target PATH] [--pid PID] [--port PORT] [--tag TAG]`.
Each attack prints one line, `ATTACK <name> BLOCKED <what it saw>` or `ATTACK <name> BREACH <what it got>`, then
the bot plays its seat passively (unless the mode never plays: `sleep`, or `exit`, which ends the process with
status 1 instead of joining, leaving whatever it started behind). Tests read these lines from the seat's
log. The attacks never do harm when they succeed: a signal is SIGCONT, a write is a new file named after `--tag`.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import errno
import fcntl
import mmap
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clients.bots.passive_bot import PassiveBot
from clients.sdk.errors import SdkError
from clients.sdk.runner import run_bot, run_main
from clients.sdk.view import BotView
from referee.engine.actions import Action

SECRETS = ("MUS_ADMIN_TOKEN", "MUS_DATABASE_URL", "MUS_BROKER_DIR", "MUS_BROKER_URL")


def report(name: str, breached: bool, detail: str) -> None:
    print(f"ATTACK {name} {'BREACH' if breached else 'BLOCKED'} {detail}", flush=True)


def attack_env(options: argparse.Namespace) -> None:
    leaked = [name for name in SECRETS if name in os.environ]
    report("env", bool(leaked), f"variables={','.join(sorted(os.environ))}")


def attack_db(options: argparse.Namespace) -> None:
    for path in [Path("mus.db"), *(Path(path) for path in options.db)]:
        try:
            with path.open("rb") as file:
                data = file.read(100)
            report("db", True, f"read {len(data)} bytes of {path}")
        except OSError as error:
            report("db", False, f"{path}: {errno.errorcode.get(error.errno or 0, error)}")


def attack_proc(options: argparse.Namespace) -> None:
    pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    found: list[str] = []
    targets = {pid for pid in pids if pid != os.getpid()} | set(options.pid)
    for pid in sorted(targets):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if b"MUS_TOKEN=" in environ or any(name.encode() in environ for name in SECRETS):
            found.append(str(pid))
    report("proc", bool(found), f"visible_pids={len(pids)} tokens_read_from={','.join(found) or 'none'}")


def attack_signal(options: argparse.Namespace) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    ptrace_attach = 16
    for pid in options.pid:
        try:
            os.kill(pid, signal.SIGCONT)
            report("signal", True, f"SIGCONT delivered to pid {pid}")
        except OSError as error:
            report("signal", False, f"pid {pid}: {errno.errorcode.get(error.errno or 0, error)}")
        if libc.ptrace(ptrace_attach, pid, None, None) == 0:
            libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
            report("ptrace", True, f"attached to pid {pid}")
        else:
            report("ptrace", False, f"pid {pid}: {errno.errorcode.get(ctypes.get_errno(), '?')}")


def attack_tcp(options: argparse.Namespace) -> None:
    for port in [5432, 6379, 5672, *options.port]:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2):
                report("tcp", True, f"connected to 127.0.0.1:{port}")
        except OSError as error:
            report("tcp", False, f"127.0.0.1:{port}: {errno.errorcode.get(error.errno or 0, error)}")


def attack_frames(options: argparse.Namespace) -> None:
    """A launched seat's own folder of sockets (MUS_FRAMES, MUS_REFEREE) is all it sees of the referee: it looks
    for the other seats' (in their host folders, /tmp/mus-referee-frames-*/seat-*) and connects to any it finds."""
    own = os.environ.get("MUS_FRAMES", "")
    folder = os.path.dirname(own.removeprefix("unix:"))
    listing = ",".join(sorted(os.listdir(folder))) if folder and os.path.isdir(folder) else "none"
    reached = []
    for path in Path(tempfile.gettempdir()).glob("mus-referee-frames-*/seat-*/play.sock"):
        if own.endswith(str(path)):
            continue
        with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as other:
            other.connect(str(path))
            reached.append(str(path))
    report("frames", bool(reached), f"own={own} folder={listing} others_reached={len(reached)}")


HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00"
"""The client's connection preface and an empty SETTINGS frame: a connection as a gRPC client opens it."""


def attack_conns(options: argparse.Namespace) -> None:
    """Open 60 connections to its referee socket (MUS_REFEREE), as a gRPC client would, and hold them: a security
    review held 20,000 of a worker's file descriptors this way. How many are still open half a second later?"""
    path = os.environ.get("MUS_REFEREE", "").removeprefix("unix:")
    held: list[socket.socket] = []
    for _ in range(60):
        connection = socket.socket(socket.AF_UNIX)
        try:
            connection.connect(path)
            connection.sendall(HTTP2_PREFACE)
        except OSError:
            connection.close()
            continue
        held.append(connection)
    time.sleep(0.5)
    still = 0
    for connection in held:
        connection.setblocking(False)
        try:
            still += bool(connection.recv(65536))  # the server's SETTINGS: open (closed: b"" or a reset)
        except BlockingIOError:
            still += 1
        except OSError:
            pass
        connection.close()
    report("conns", still > 4, f"held={still} of {len(held)} connected")


def attack_write(options: argparse.Namespace) -> None:
    places = [Path.cwd(), Path(sys.prefix), *(Path(path) for path in options.target)]
    for folder in places:
        path = folder / f"hostile-{options.tag}.txt"
        try:
            path.write_text("written by a hostile bot\n")
            report("write", True, f"wrote {path}")
        except OSError as error:
            report("write", False, f"{folder}: {errno.errorcode.get(error.errno or 0, error)}")
    for folder in (Path("/tmp"), Path.home()):
        (folder / "scratch").write_text("private")  # a sandbox's own tmpfs: allowed
    report("write", False, "tmp and HOME writable, as they should be")


def attack_share(options: argparse.Namespace) -> None:
    """Partners leave a note for each other in every place they can write, then look for the other's note."""
    mine = f"mus-share-{options.tag}-{os.getpid()}"
    for folder in (Path("/tmp"), Path.home(), Path("/dev/shm")):
        with contextlib.suppress(OSError):
            (folder / mine).write_text("my cards: ...")
    deadline = time.monotonic() + 1.5
    seen: list[str] = []
    while not seen and time.monotonic() < deadline:
        for folder in (Path("/tmp"), Path.home(), Path("/dev/shm")):
            with contextlib.suppress(OSError):
                seen += [str(path) for path in folder.glob(f"mus-share-{options.tag}-*") if path.name != mine]
        time.sleep(0.1)
    report("share", bool(seen), f"partner notes seen: {','.join(seen) or 'none'}")


def attack_locks(options: argparse.Namespace) -> None:
    """Partners, or a bot and its own processes in the twin match, signal through locks and watches on the files
    every seat binds read-only (the kernel shares them across namespaces), or leave the sandbox's namespaces."""
    outcomes = []
    libc = ctypes.CDLL(None, use_errno=True)
    context = ctypes.c_ulong(0)
    with open(sys.executable, "rb") as shared:
        calls: list[tuple[str, Callable[[], object]]] = [
            ("flock", lambda: fcntl.flock(shared, fcntl.LOCK_SH | fcntl.LOCK_NB)),
            ("fcntl_lock", lambda: fcntl.lockf(shared, fcntl.LOCK_SH | fcntl.LOCK_NB)),
            ("fcntl_getlk", lambda: fcntl.fcntl(shared, fcntl.F_GETLK, bytes(32))),
            ("inotify", lambda: _checked(libc.inotify_init1(0))),
            ("unshare_user", lambda: _checked(libc.unshare(0x10000000))),
            # Host-wide counts any seat reads: /proc/sys/fs/aio-nr and /proc/sys/kernel/pty/nr.
            (
                "io_setup",
                lambda: _checked(libc.syscall(IO_SETUP.get(platform.machine(), -1), 8, ctypes.byref(context))),
            ),
            ("ptmx", lambda: os.close(os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY))),
            # The host's page cache of the shared files: drop a file's pages, or tell whether they are cached
            # without bringing them in (a review passed 32 bits a decision).
            ("fadvise", lambda: os.posix_fadvise(shared.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)),
            ("preadv2", lambda: os.preadv(shared.fileno(), [bytearray(4096)], 0, os.RWF_NOWAIT)),
            ("cachestat", lambda: _checked(libc.syscall(451, shared.fileno(), bytes(16), bytes(40), 0))),
            # The free space of the host's file system, which moves with the seats' logged output.
            ("statvfs", lambda: os.statvfs("/usr")),
            # A TCP or UDP socket's buffers, counted host-wide (/proc/net/sockstat's TCP mem).
            ("inet", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()),
            ("inet6", lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close()),
            # Host-wide counters a seat reads and moves: socket cookies, pidfd inode numbers (a review: exact).
            ("cookie", lambda: socket.socketpair()[0].getsockopt(socket.SOL_SOCKET, 57, 8)),
            ("sock_diag", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 4).close()),
            ("pidfd", lambda: os.close(os.pidfd_open(os.getpid()))),
            ("peer_pidfd", lambda: socket.socketpair()[0].getsockopt(socket.SOL_SOCKET, 77, 4)),
            ("pass_pidfd", lambda: socket.socketpair()[0].setsockopt(socket.SOL_SOCKET, 76, 1)),
            # A netlink route lookup moves the host's route cache statistics (/proc/net/stat/rt_cache).
            ("netlink", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close()),
            # A new session takes a scheduler autogroup number (/proc/self/autogroup), a login uid an audit
            # session number (/proc/self/sessionid): both from host-wide counters.
            ("setsid", lambda: subprocess.run(["true"], start_new_session=True, check=True)),
            ("loginuid", lambda: Path("/proc/self/loginuid").write_text(str(os.getuid()))),
            # Whether the pages of a mapped file the seat's uid owns are cached, without reading them.
            ("mincore", lambda: _mincore(shared)),
        ]
        for name, call in calls:
            try:
                call()
                outcomes.append(f"{name}=done")
            except OSError as error:
                outcomes.append(f"{name}={errno.errorcode.get(error.errno or 0, error.errno)}")
    report("locks", any(outcome.endswith("=done") for outcome in outcomes), " ".join(outcomes))


def _mincore(file: Any) -> None:
    """mincore() over a fresh shared mapping of the file's first page (left mapped: the process is short-lived)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
    libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p)
    address = libc.mmap(None, mmap.PAGESIZE, mmap.PROT_READ, mmap.MAP_SHARED, file.fileno(), 0)
    if address is None or address == ctypes.c_void_p(-1).value:
        raise OSError(ctypes.get_errno(), "mmap")
    _checked(libc.mincore(address, mmap.PAGESIZE, bytes(1)))


IO_SETUP = {"x86_64": 206, "aarch64": 0}
"""The io_setup system call's number, by machine."""


def _checked(result: int) -> int:
    if result < 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number))
    return result


def attack_fork(options: argparse.Namespace) -> None:
    count = 0
    failure = "none"
    for _ in range(1000):
        try:
            pid = os.fork()
        except OSError as error:
            failure = errno.errorcode.get(error.errno or 0, str(error))
            break
        if pid == 0:
            signal.pause()  # a child that would live forever
            os._exit(0)
        count += 1
    report("fork", count >= 1000, f"forked={count} failure={failure}")


def attack_alloc(options: argparse.Namespace) -> None:
    blocks: list[bytearray] = []
    try:
        for _ in range(64):  # up to 4 GiB
            blocks.append(bytearray(64 * 1024 * 1024))
        report("alloc", True, f"allocated {len(blocks) * 64} MiB")
    except MemoryError:
        report("alloc", False, f"MemoryError after {len(blocks) * 64} MiB")
    blocks.clear()


def attack_forkalloc(options: argparse.Namespace) -> None:
    """Four children that each hold 600 MiB at once: under the per-process limit, over the seat's."""
    size = 600 * 1024 * 1024
    children = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:
            try:
                block = bytearray(size)
                block[::4096] = b"\1" * len(range(0, size, 4096))  # touch every page: resident, charged
            except MemoryError:
                os._exit(3)
            time.sleep(2)
            os._exit(0)
        children.append(pid)
    statuses = [os.waitpid(pid, 0)[1] for pid in children]
    held = sum(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 for status in statuses)
    killed = sum(os.WIFSIGNALED(status) for status in statuses)
    report("forkalloc", held == 4, f"held={held} killed={killed} of 4 children of 600 MiB")


def attack_print(options: argparse.Namespace) -> None:
    line = "x" * 1023 + "\n"
    for _ in range(20 * 1024):  # 20 MiB
        sys.stdout.write(line)
    sys.stdout.flush()
    report("print", False, "printed 20 MiB")


def attack_cpu(options: argparse.Namespace) -> None:
    report("cpu", False, "spinning")
    while True:
        pass


def attack_fsize(options: argparse.Namespace) -> None:
    written = 0
    try:
        with open("/tmp/big", "wb") as file:
            for _ in range(1024):
                file.write(b"\0" * 1024 * 1024)
                file.flush()
                written += 1
        report("fsize", True, "wrote 1 GiB in /tmp")
    except OSError as error:  # Python ignores SIGXFSZ: the write fails with EFBIG instead
        report("fsize", False, f"after {written} MiB: {errno.errorcode.get(error.errno or 0, error)}")
    Path("/tmp/big").unlink(missing_ok=True)


class SleepingBot(PassiveBot):
    """Joins its seat, then never answers: its decisions time out."""

    def decide(self, view: BotView) -> Action:
        while True:
            time.sleep(3600)


class SlowBot(PassiveBot):
    """Takes 20 ms over each decision, as a bot that thinks: time in which its partner could run beside it."""

    def decide(self, view: BotView) -> Action:
        time.sleep(0.02)
        return super().decide(view)


class LogsBot(PassiveBot):
    """At its first decision, once every seat has joined and writes its log, lists the match's logs folder
    (`--target`), which lies in the bot's own folder: it must see none of them (`launcher.Sandbox.hidden`)."""

    def __init__(self, folder: str) -> None:
        super().__init__()
        self.folder = folder
        self.listed = False

    def decide(self, view: BotView) -> Action:
        if not self.listed:
            self.listed = True
            names = sorted(os.listdir(self.folder))
            report("logs", bool(names), ",".join(names) or "empty")
        return super().decide(view)


RUNNING: list[int] = []
"""CLOCK_MONOTONIC in µs, sampled every 0.2 ms while the process runs (`attack_clock`)."""


def attack_clock(options: argparse.Namespace) -> None:
    """Watch when its process runs: a thread samples the clock every 0.2 ms for the whole match. Partners that
    both run at once can pass cards through the CPU (one spins, the other times its loop); `report_running`
    prints what was seen, and the test compares partners."""
    import threading

    def sample() -> None:
        while True:
            RUNNING.append(time.monotonic_ns() // 1000)
            time.sleep(0.0002)

    threading.Thread(target=sample, daemon=True).start()
    report("clock", False, "sampling when it runs")


def report_running() -> None:
    """`RUNNING a-b,c-d,...`: the spans (µs) in which it ran, a gap of over 1 ms between samples ending one."""
    spans: list[str] = []
    start = previous = RUNNING[0] if RUNNING else 0
    for now in RUNNING[1:]:
        if now - previous > 1000:
            spans.append(f"{start}-{previous}")
            start = now
        previous = now
    spans.append(f"{start}-{previous}")
    print("RUNNING " + ",".join(spans), flush=True)


COUNTED = ("meminfo", "loadavg", "stat", "vmstat", "uptime", "sys/fs/file-nr", "sys/fs/inode-state")
"""Host-wide counters in /proc that a seat moves with what it holds (memory, threads, open files, CPU used)."""


def attack_counters(options: argparse.Namespace) -> None:
    """Read the host's counters, then take 100 MB, 20 threads and 100 open files and burn 0.2 s of CPU, and read
    them again, with sysinfo(2) each time: what a seat can move and keep while it is frozen, its partner could read
    in its own turn. A breach is any change seen (or sysinfo answering at all)."""
    import threading

    libc = ctypes.CDLL(None, use_errno=True)
    info = ctypes.create_string_buffer(128)

    def read() -> dict[str, str]:
        seen = {}
        for name in COUNTED:
            with contextlib.suppress(OSError):
                seen[name] = Path("/proc", name).read_text()
        seen["sysinfo"] = "refused" if libc.sysinfo(info) != 0 else info.raw.hex()
        return seen

    before = read()
    held = bytearray(100 * 1024 * 1024)
    held[::4096] = b"x" * len(held[::4096])
    stop = threading.Event()
    threading.stack_size(256 * 1024)  # within the seat's address space (each thread's stack is reserved)
    threads = [threading.Thread(target=stop.wait, daemon=True) for _ in range(20)]
    for thread in threads:
        thread.start()
    files = [open(os.devnull) for _ in range(100)]  # noqa: SIM115
    deadline = time.process_time() + 0.2
    while time.process_time() < deadline:
        pass
    time.sleep(1.1)  # past the kernel's load average and counters' refresh
    after = read()
    changed = sorted(name for name in after if after[name] != before.get(name))
    stop.set()
    for file in files:
        file.close()
    del held
    report("counters", bool(changed), f"changed={','.join(changed) or 'none'} sysinfo={after['sysinfo'][:8]}")


def attack_procfs(options: argparse.Namespace) -> None:
    """List what /proc shows beside the processes: an entry that counts for the whole host (ext4's statistics in
    /proc/fs, /proc/cgroups, /proc/locks) is a channel between seats. A breach is any of those three readable."""
    readable = []
    for entry in sorted(os.scandir("/proc"), key=lambda entry: entry.name):
        if entry.name.isdigit():
            continue
        try:
            if entry.is_dir():
                shown = bool(os.listdir(entry.path))
            else:
                with open(entry.path, "rb") as file:
                    shown = bool(file.read(1))
        except OSError:
            shown = False
        if shown:
            readable.append(entry.name)
    breached = bool({"fs", "cgroups", "locks"} & set(readable))
    report("procfs", breached, f"readable={','.join(readable)}")


def attack_sleep(options: argparse.Namespace) -> None:
    report("sleep", False, "joining, then sleeping forever at its first decision")


def attack_exit(options: argparse.Namespace) -> None:
    report("exit", False, "exiting without joining; what it forked is left behind")


FLOOD_CHANNELS = 40
FLOOD_CALLS_PER_CHANNEL = 125


def attack_health(options: argparse.Namespace) -> None:
    """Open 5,000 grpc.health.v1 Watch streams (no token needed) on the referee, over 40 connections, and hold
    them for the whole match: on a shared referee, enough to fill every call slot (4,096) and void the match."""
    import asyncio
    import threading

    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    address = os.environ.get("MUS_REFEREE", "")
    counted: dict[str, int] = {}
    ready = threading.Event()

    async def flood() -> None:
        channels = [
            grpc.aio.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])
            for _ in range(FLOOD_CHANNELS)
        ]
        stubs: list[Any] = [health_pb2_grpc.HealthStub(channel) for channel in channels]
        calls = [
            stub.Watch(health_pb2.HealthCheckRequest(service=""), timeout=3600)
            for stub in stubs
            for _ in range(FLOOD_CALLS_PER_CHANNEL)
        ]

        async def first(call: Any) -> str:
            try:
                await asyncio.wait_for(call.read(), 20)
                return "held"
            except grpc.aio.AioRpcError as error:
                return error.code().name
            except TimeoutError:
                return "pending"

        for outcome in await asyncio.gather(*(first(call) for call in calls)):
            counted[outcome] = counted.get(outcome, 0) + 1
        ready.set()
        await asyncio.Event().wait()  # hold what was granted until the process ends

    threading.Thread(target=asyncio.run, args=(flood(),), daemon=True).start()
    ready.wait(60)
    held = counted.get("held", 0)
    shown = ",".join(f"{outcome}={count}" for outcome, count in sorted(counted.items()))
    report("health", held > 64, f"{shown}")


def attack_sigterm(options: argparse.Namespace) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    report("sigterm", False, "SIGTERM ignored; will not exit after the match")


ATTACKS: dict[str, Callable[[argparse.Namespace], None]] = {
    "env": attack_env,
    "db": attack_db,
    "proc": attack_proc,
    "signal": attack_signal,
    "tcp": attack_tcp,
    "frames": attack_frames,
    "write": attack_write,
    "conns": attack_conns,
    "share": attack_share,
    "locks": attack_locks,
    "fork": attack_fork,
    "alloc": attack_alloc,
    "forkalloc": attack_forkalloc,
    "print": attack_print,
    "cpu": attack_cpu,
    "fsize": attack_fsize,
    "sleep": attack_sleep,
    "exit": attack_exit,
    "sigterm": attack_sigterm,
    "health": attack_health,
    "clock": attack_clock,
    "counters": attack_counters,
    "procfs": attack_procfs,
    "logs": lambda options: None,  # as it plays: `LogsBot`
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("modes")
    parser.add_argument("--db", action="append", default=[])
    parser.add_argument("--target", action="append", default=[])
    parser.add_argument("--pid", action="append", type=int, default=[])
    parser.add_argument("--port", action="append", type=int, default=[])
    parser.add_argument("--tag", default="x")
    options = parser.parse_args()
    modes = options.modes.split(",")
    for mode in modes:
        ATTACKS[mode](options)
    if "exit" in modes:
        raise SystemExit(1)
    bot = SleepingBot() if "sleep" in modes else SlowBot() if "clock" in modes else PassiveBot()
    if "logs" in modes:
        bot = LogsBot(options.target[0])
    code = _join_briefly(bot) if "health" in modes else run_main(bot)
    if "clock" in modes:
        report_running()
    if "sigterm" in modes:
        while True:
            time.sleep(3600)
    raise SystemExit(code)


def _join_briefly(bot: PassiveBot) -> int:
    """Its own join finds the forwarder's few connections held by its flood: it gives up after a short grace, not
    the SDK's 10 s, and the match goes on without it all the same. The exit status as `run_main`'s."""
    try:
        run_bot(bot, grace_s=1.0)
    except SdkError as error:
        print(f"hostile: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    main()
