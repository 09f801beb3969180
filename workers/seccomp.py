"""The seccomp filter of a sandboxed seat: the system calls that would let two seats talk through the kernel.

Two seats of one host share inodes (every seat binds the same runtime and SDK read-only) and one kernel. File
locks (`flock`, `fcntl` record and OFD locks, leases) and inotify/fanotify/dnotify watches on those shared files
work across mount, user and pid namespaces, so partners could pass their cards through them, and a bot could read
its rivals' cards from its own processes in the twin match. Linux AIO and io_uring contexts are counted host-wide
(/proc/sys/fs/aio-nr). The filter refuses them with EPERM, together with what
a bot never needs and could use to widen its reach: ptrace and other processes' memory, keyrings, new namespaces
(nested user namespaces, `unshare`, `setns`, `clone` with namespace flags; `clone3` answers ENOSYS so the C
library falls back to `clone`, whose flags can be checked), mounts, kernel modules, BPF and perf events.

The program is classic BPF over `struct seccomp_data`, built here without libseccomp; `bwrap --seccomp FD` loads
it just before it runs the bot. Only x86_64 and aarch64 are known: elsewhere `seccomp_filter()` returns None and
the worker logs that seats run without it. A call from another ABI (32-bit x86 via int 0x80, x32) is refused
whole, since its numbers differ.

The page cache is the host's too, over the same shared files: `fadvise` would let a seat drop a file's pages (again and
again) and `preadv2(RWF_NOWAIT)` or `cachestat` tell whether a file's pages are cached without bringing them in, a bit a
page each turn (a review passed 32 bits a decision). They answer ENOSYS, as on a kernel without them (the C library's
`preadv` uses `preadv`, not `preadv2`). And a seat's sockets are Unix sockets only: a TCP or UDP socket's buffers are
counted host-wide (`/proc/net/sockstat`'s `mem`, per network namespace only in name), and a netlink route lookup moves
the host's route cache statistics (`/proc/net/stat/rt_cache`), so `socket` answers EAFNOSUPPORT for any other family
(the C library's `getaddrinfo` then assumes both IPv4 and IPv6, as it does without netlink). The file systems a seat
binds are the host's, whose free space moves with what the worker writes of a seat's output to its log: `statfs`,
`fstatfs` and `ustat` answer ENOSYS (a review read a partner's output in `statvfs("/usr").f_bfree`). Host-wide numbers a
seat could take and read are refused: a new session (`setsid`: the scheduler's autogroup number), socket and network
namespace cookies and pidfds (their inode numbers).
"""

from __future__ import annotations

import errno
import platform
import struct

_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06

_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000

_ARCH_OFFSET = 4
_NR_OFFSET = 0
_ARG0_LOW = 16
_ARG1_LOW = 24
_ARG2_LOW = 32

_X32_BIT = 0x40000000

_NAMESPACE_FLAGS = 0x7E020000 | 0x1000
"""CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET, and CLONE_PIDFD (a pidfd's inode number
comes from one host-wide counter, which a seat could move and its partner read)."""

_SOCKET_OPTIONS_READ = (*range(1, 22), 30, 38, 39, 66, 67)
"""The socket options (level SOL_SOCKET) a seat may read: SO_DEBUG to SO_SNDTIMEO_OLD, SO_ACCEPTCONN, SO_PROTOCOL,
SO_DOMAIN and the new SO_RCVTIMEO/SO_SNDTIMEO; the others answer ENOPROTOOPT. Among them are host-wide numbers: a
socket's cookie (SO_COOKIE, one counter almost nothing else moves: a review passed 6 bits a decision through it
exactly, and 16 bits from a seat to the next match's), its network namespace's cookie, and a pidfd of the peer
(SO_PEERPIDFD: pidfd inode numbers), and whatever a newer kernel adds."""

_SO_PASSPIDFD = 76
"""setsockopt(SOL_SOCKET, SO_PASSPIDFD): a pidfd with every message received (SCM_PIDFD), refused as above."""

_FCNTL_REFUSED = (5, 6, 7, 36, 37, 38, 1024, 1025, 1026)
"""F_GETLK, F_SETLK, F_SETLKW, F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW, F_SETLEASE, F_GETLEASE, F_NOTIFY."""

_REFUSED_NAMES = (
    "flock",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "inotify_init",
    "inotify_init1",
    "inotify_add_watch",
    "fanotify_init",
    "fanotify_mark",
    "add_key",
    "request_key",
    "keyctl",
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsmount",
    "fspick",
    "userfaultfd",
    "perf_event_open",
    "bpf",
    "kexec_load",
    "init_module",
    "finit_module",
    "delete_module",
    "name_to_handle_at",
    "open_by_handle_at",
    "swapon",
    "swapoff",
    "reboot",
    "acct",
    "quotactl",
    # Linux AIO and io_uring: the contexts a seat sets up are counted host-wide in /proc/sys/fs/aio-nr, which any
    # seat reads (a review passed 8 bits a quarter second, without an error, between seats of one match).
    "io_setup",
    "io_destroy",
    "io_submit",
    "io_cancel",
    "io_getevents",
    "io_pgetevents",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    # sysinfo(2) counts the host's processes and threads and its free memory, which a seat can move (threads and
    # memory it keeps while it is frozen) and its partner read in its own turn (docs/sandbox.md).
    "sysinfo",
    # pidfds: their inode numbers come from one host-wide counter (a review: 3 bits a decision, exactly).
    "pidfd_open",
    "pidfd_getfd",
    # A new session makes a new scheduler autogroup, numbered from a host-wide counter that /proc/self/autogroup
    # shows (a review: 33 of 33 bits). bwrap's own --new-session comes before the filter is loaded.
    "setsid",
)
"""Refused with EPERM on every architecture that has them."""

_MISSING_NAMES = (
    "clone3",
    "fadvise64",
    "preadv2",
    "pwritev2",
    "cachestat",
    "mincore",
    "statfs",
    "fstatfs",
    "ustat",
)
"""Answer ENOSYS, as on a kernel without them: clone3 (the C library falls back to clone, whose flags the filter
checks), what would tell or change the host's page cache without a trace (mincore tells it of any mapped file
the seat's uid owns, as a user-namespaced seat owns the worker's files), and the free space of the file systems
a seat binds (the module's docstring)."""


_ARCHES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (
        0xC000003E,
        {
            "fcntl": 72,
            "clone": 56,
            "clone3": 435,
            "flock": 73,
            "ptrace": 101,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "inotify_init": 253,
            "inotify_init1": 294,
            "inotify_add_watch": 254,
            "fanotify_init": 300,
            "fanotify_mark": 301,
            "add_key": 248,
            "request_key": 249,
            "keyctl": 250,
            "unshare": 272,
            "setns": 308,
            "mount": 165,
            "umount2": 166,
            "pivot_root": 155,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsmount": 432,
            "fspick": 433,
            "userfaultfd": 323,
            "perf_event_open": 298,
            "bpf": 321,
            "kexec_load": 246,
            "init_module": 175,
            "finit_module": 313,
            "delete_module": 176,
            "name_to_handle_at": 303,
            "open_by_handle_at": 304,
            "swapon": 167,
            "swapoff": 168,
            "reboot": 169,
            "acct": 163,
            "quotactl": 179,
            "io_setup": 206,
            "io_destroy": 207,
            "io_submit": 209,
            "io_cancel": 210,
            "io_getevents": 208,
            "io_pgetevents": 333,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "sysinfo": 99,
            "pidfd_open": 434,
            "pidfd_getfd": 438,
            "getsockopt": 55,
            "setsockopt": 54,
            "setsid": 112,
            "mincore": 27,
            "fadvise64": 221,
            "preadv2": 327,
            "pwritev2": 328,
            "cachestat": 451,
            "socket": 41,
            "statfs": 137,
            "fstatfs": 138,
            "ustat": 136,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "fcntl": 25,
            "clone": 220,
            "clone3": 435,
            "flock": 32,
            "ptrace": 117,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "inotify_init1": 26,
            "inotify_add_watch": 27,
            "fanotify_init": 262,
            "fanotify_mark": 263,
            "add_key": 217,
            "request_key": 218,
            "keyctl": 219,
            "unshare": 97,
            "setns": 268,
            "mount": 40,
            "umount2": 39,
            "pivot_root": 41,
            "open_tree": 428,
            "move_mount": 429,
            "fsopen": 430,
            "fsmount": 432,
            "fspick": 433,
            "userfaultfd": 282,
            "perf_event_open": 241,
            "bpf": 280,
            "kexec_load": 104,
            "init_module": 105,
            "finit_module": 273,
            "delete_module": 106,
            "name_to_handle_at": 264,
            "open_by_handle_at": 265,
            "swapon": 224,
            "swapoff": 225,
            "reboot": 142,
            "acct": 89,
            "quotactl": 60,
            "io_setup": 0,
            "io_destroy": 1,
            "io_submit": 2,
            "io_cancel": 3,
            "io_getevents": 4,
            "io_pgetevents": 292,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "sysinfo": 179,
            "pidfd_open": 434,
            "pidfd_getfd": 438,
            "getsockopt": 209,
            "setsockopt": 208,
            "setsid": 157,
            "mincore": 232,
            "fadvise64": 223,
            "preadv2": 286,
            "pwritev2": 287,
            "cachestat": 451,
            "socket": 198,
            "statfs": 43,
            "fstatfs": 44,
        },
    ),
}


def seccomp_filter(machine: str | None = None) -> bytes | None:
    """The filter for this machine's architecture (`platform.machine()`), as `bwrap --seccomp` reads it; None
    where the architecture is unknown."""
    known = _ARCHES.get(machine or platform.machine())
    if known is None:
        return None
    arch, numbers = known
    deny, enosys, allow = "deny", "enosys", "allow"
    # Each instruction: (code, jump-if-true target, jump-if-false target, k); targets are labels or None (next).
    program: list[tuple[int, str | None, str | None, int]] = [
        (_LD_W_ABS, None, None, _ARCH_OFFSET),
        (_JEQ_K, None, deny, arch),
        (_LD_W_ABS, None, None, _NR_OFFSET),
    ]
    if arch == _ARCHES["x86_64"][0]:  # x32 calls (bit 30 set) come under the same audit arch
        program.append((_JGE_K, deny, None, _X32_BIT))
    for name in _REFUSED_NAMES:
        if name in numbers:
            program.append((_JEQ_K, deny, None, numbers[name]))
    for name in (name for name in _MISSING_NAMES if name in numbers):
        program.append((_JEQ_K, enosys, None, numbers[name]))
    program.append((_JEQ_K, "clone", None, numbers["clone"]))
    program.append((_JEQ_K, "socket", None, numbers["socket"]))
    program.append((_JEQ_K, "getsockopt", None, numbers["getsockopt"]))
    program.append((_JEQ_K, "setsockopt", None, numbers["setsockopt"]))
    program.append((_JEQ_K, None, allow, numbers["fcntl"]))
    program.append((_LD_W_ABS, None, None, _ARG1_LOW))
    for command in _FCNTL_REFUSED:
        program.append((_JEQ_K, deny, None, command))
    program.append((_RET_K, None, None, _RET_ALLOW))
    labels = {"clone": len(program)}
    program.append((_LD_W_ABS, None, None, _ARG0_LOW))
    program.append((_JSET_K, deny, allow, _NAMESPACE_FLAGS))
    labels["socket"] = len(program)
    program.append((_LD_W_ABS, None, None, _ARG0_LOW))
    program.append((_JEQ_K, allow, None, 1))  # AF_UNIX
    program.append((_RET_K, None, None, _RET_ERRNO | errno.EAFNOSUPPORT))
    labels["getsockopt"] = len(program)
    program.append((_LD_W_ABS, None, None, _ARG1_LOW))
    program.append((_JEQ_K, None, allow, 1))  # SOL_SOCKET
    program.append((_LD_W_ABS, None, None, _ARG2_LOW))
    for option in _SOCKET_OPTIONS_READ:
        program.append((_JEQ_K, allow, None, option))
    program.append((_RET_K, None, None, _RET_ERRNO | errno.ENOPROTOOPT))
    labels["setsockopt"] = len(program)
    program.append((_LD_W_ABS, None, None, _ARG1_LOW))
    program.append((_JEQ_K, None, allow, 1))  # SOL_SOCKET
    program.append((_LD_W_ABS, None, None, _ARG2_LOW))
    program.append((_JEQ_K, None, allow, _SO_PASSPIDFD))
    program.append((_RET_K, None, None, _RET_ERRNO | errno.ENOPROTOOPT))
    labels[allow] = len(program)
    program.append((_RET_K, None, None, _RET_ALLOW))
    labels[deny] = len(program)
    program.append((_RET_K, None, None, _RET_ERRNO | errno.EPERM))
    labels[enosys] = len(program)
    program.append((_RET_K, None, None, _RET_ERRNO | errno.ENOSYS))

    def offset(index: int, target: str | None) -> int:
        if target is None:
            return 0
        jump = labels[target] - index - 1
        assert 0 <= jump <= 255, "a classic BPF jump is one byte"
        return jump

    return b"".join(
        struct.pack("=HBBI", code, offset(index, true), offset(index, false), k)
        for index, (code, true, false, k) in enumerate(program)
    )
