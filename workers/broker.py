"""The embedded broker: kombu's filesystem transport, with messages written atomically, in order, delivered no
sooner than their sender asked, and queues taken in the order a worker gives them.

kombu's own `_put` creates the message file under its final name and only then writes it, while a consumer takes
any file with that name (it moves it away, then reads it): a worker that sends a message to its own queue (the
lease reclaimer) could read it empty and die on the JSON. Here a message is written under a name no consumer
takes, then renamed into place, which is atomic on one file system.

A message sent for later (`DELAY_HEADER`, which `workers.app.later` sets) stays in its queue until then. Celery's
own countdown hands the message to a worker at once, which holds it until it is due; on this transport a worker
has no event loop, so it runs the due task from its timer thread, and a solo worker (`mus league run`'s) would
then play two matches at once on one referee.

Each queue is a folder of its own, and a consumer lists it only when it has taken every due message of its last
listing: kombu lists the one folder of every queue, sorted, for every message, and `mus league run` queues a whole
league at once, so a league of 10,000 matches cost its worker about 9 ms a match on the listing alone (and the
league's two halves are two queues: a worker whose own half was done listed the other's whole for each match).
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import os
import shutil
import time
import urllib.parse
import uuid
from pathlib import Path
from queue import Empty
from time import monotonic, monotonic_ns
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import TRANSPORT_ALIASES, filesystem
from kombu.utils.json import dumps, loads
from kombu.utils.scheduling import FairCycle

SCHEME = "mus-filesystem"
"""The broker URL scheme of this transport (`mus-filesystem://`)."""

DELAY_HEADER = "mus_delay_s"
"""A message header: seconds from its sending before any worker may take it."""

MAX_DELAY_S = 60.0
"""The longest a message may be held back. A name due later than this from now was written before the machine
last booted (its monotonic clock started again from zero): it is due now."""

_DUE_DIGITS = 20
"""A message's name starts with when it is due, in ns of the machine's monotonic clock, at this width."""


class _InOrder(FairCycle):
    """The channel's queues tried in the order the worker gave them (`-Q`), from the first each time: kombu's own
    cycle goes round them, and a worker would take the other half's matches while its own wait (workers.app)."""

    def get(self, callback: Any, **kwargs: Any) -> Any:
        self.pos = 0
        return super().get(callback, **kwargs)  # type: ignore[no-untyped-call]  # kombu is untyped here


class Channel(filesystem.Channel):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]  # kombu is untyped here
        self._listed: dict[str, collections.deque[str]] = {}
        """Per queue, the names of its last listing not yet taken (by this consumer or another), in order."""

    def _reset_cycle(self) -> None:
        self._cycle = _InOrder(self._get_and_deliver, self._active_queues, Empty)  # type: ignore[no-untyped-call]

    def _folder(self, queue: str) -> str:
        """The queue's own folder (made as it is first written to): its name made safe as one path component."""
        name = urllib.parse.quote(queue, safe="")
        if name in ("", ".", ".."):
            name = "%" + name.replace(".", "%2E")
        return os.path.join(self.data_folder_in, name)

    def _put(self, queue: Any, payload: Any, **kwargs: Any) -> Any:  # type: ignore[override]  # kombu names the argument two ways
        """Put `payload` onto `queue`: written under a temporary name, then renamed to the one consumers take.

        Consumers take the names in sorted order: the name starts with when the message is due (now, or
        `DELAY_HEADER` seconds from now) on the machine's monotonic clock in ns, at a fixed width, so a queue is
        first in, first out (kombu's milliseconds left the messages sent within one millisecond, a whole league's at
        once, in the random order of their uuids)."""
        delay_s = float((payload.get("headers") or {}).get(DELAY_HEADER) or 0)
        due = monotonic_ns() + (int(min(delay_s, MAX_DELAY_S) * 1e9) if delay_s > 0 else 0)  # NaN: now
        final = f"{due:0{_DUE_DIGITS}d}_{uuid.uuid4()}.msg"
        folder = self._folder(queue)
        partial = os.path.join(folder, f".{final}.partial")
        try:
            os.makedirs(folder, exist_ok=True)
            with open(partial, "wb") as file:
                file.write(dumps(payload).encode())  # type: ignore[no-untyped-call]
            os.replace(partial, os.path.join(folder, final))
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc

    def _get(self, queue: Any, timeout: Any = None) -> Any:
        """The first message of `queue` that is due, read and then kept in the processed folder (or removed); else
        `Empty`. As kombu's own, but for the due time (the names sort by it, `_put`), the taking (a rename in place,
        atomic, so of two workers exactly one gets a message) and the listing, made again only once every due name
        of the last one is gone: a message put since is due no sooner than those (a delayed one excepted, which
        is why a listing whose due names are all gone is made again)."""
        folder = self._folder(queue)
        listed = self._listed.get(queue)
        for fresh in (False, True) if listed else (True,):
            clock = monotonic_ns()
            now, latest = f"{clock:0{_DUE_DIGITS}d}", f"{clock + int(MAX_DELAY_S * 1e9):0{_DUE_DIGITS}d}"
            if fresh or listed is None:
                names = sorted(_messages(folder))
                # A name past `latest` was written before the machine last booted (`MAX_DELAY_S`): due now, first.
                old_boot = bisect.bisect_right(names, latest)
                listed = self._listed[queue] = collections.deque(names[old_boot:] + names[:old_boot])
            while listed and not (now < listed[0][:_DUE_DIGITS] <= latest):
                name = listed.popleft()  # taken now, by this consumer or (the rename fails) by another
                taken = os.path.join(folder, f".{name}.taken")  # a name no consumer takes
                try:
                    os.replace(os.path.join(folder, name), taken)
                except OSError:  # another worker took it first
                    continue
                try:
                    with open(taken, "rb") as file:
                        payload = file.read()
                    if self.store_processed:  # named by the queue's folder: one path component, whatever the queue
                        shutil.move(
                            taken, os.path.join(self.processed_folder, f"{name}.{os.path.basename(folder)}.msg")
                        )
                    else:
                        os.remove(taken)
                except OSError as exc:
                    raise ChannelError(f"Cannot read file {taken!r} from queue.") from exc
                return loads(payload)  # type: ignore[no-untyped-call]  # kombu is untyped here
        raise Empty()

    def _size(self, queue: Any) -> int:
        """The messages in `queue` (due or not)."""
        return len(_messages(self._folder(queue)))

    def _purge(self, queue: Any) -> int:
        """Remove every message of `queue`; how many."""
        folder, count = self._folder(queue), 0
        for name in _messages(folder):
            with contextlib.suppress(OSError):  # taken meanwhile
                os.remove(os.path.join(folder, name))
                count += 1
        self._listed.pop(queue, None)
        return count


def clear(queues: Path, processed: Path) -> None:
    """Empty the broker's folders: every queue's messages, what a killed process left half written or taken there,
    the messages an earlier version kept in the queue folder itself, and the processed ones. A queue's folder left
    empty is removed (Celery's reply and control queues leave one each)."""
    folders = [path for path in queues.iterdir() if path.is_dir()] if queues.is_dir() else []
    for folder in (queues, processed, *folders):
        if folder.is_dir():
            for path in folder.iterdir():
                if path.suffix in (".msg", ".partial", ".taken"):
                    path.unlink(missing_ok=True)
    for folder in folders:
        with contextlib.suppress(OSError):  # not empty: a message being written
            folder.rmdir()


def _messages(folder: str) -> list[str]:
    """The names of the messages in a queue's folder (not those being written or taken), none if it has none."""
    try:
        return [name for name in os.listdir(folder) if not name.startswith(".")]
    except FileNotFoundError:
        return []


class Transport(filesystem.Transport):
    Channel = Channel

    def drain_events(self, connection: Any, timeout: float | None = None, **kwargs: Any) -> None:
        """kombu's polling loop, which also returns as soon as the worker is asked to stop.

        A solo-pool worker waits in here for up to 2 s at a time and reads its stop flags only between calls, so
        a stopped worker lingered 2-4 s before its clean-up (its pooled bots, its referee) began. Nor does one take
        a message once it is asked to stop: Celery's loop drains once more after its stop flag is set, and a warm
        shutdown (`mus league run`'s Ctrl-C) would start another match, to be cut short and voided (a review)."""
        if _stopping():
            raise TimeoutError  # socket.timeout: "nothing arrived"
        deadline = None if timeout is None else monotonic() + timeout
        cycle = self.cycle
        assert cycle is not None  # set when the transport was made
        while True:
            try:
                cycle.get(self._deliver, timeout=timeout)  # type: ignore[no-untyped-call]  # kombu is untyped here
                return
            except Empty:
                if _stopping() or (deadline is not None and monotonic() >= deadline):
                    raise TimeoutError from None  # socket.timeout: "nothing arrived", as kombu's loop raises
                if self.polling_interval:
                    time.sleep(self.polling_interval)


def _stopping() -> bool:
    """Whether this process is a Celery worker that was asked to stop (warm or cold shutdown). A flag holds the
    exit code, 0 included: only None and False mean unset (as `celery.worker.state.maybe_shutdown` reads them)."""
    from celery.worker import state  # a worker's flags; never set in a process that only sends messages

    return any(flag is not None and flag is not False for flag in (state.should_stop, state.should_terminate))


TRANSPORT_ALIASES[SCHEME] = f"{__name__}:Transport"
