"""The Celery app: an embedded broker by default, Redis or RabbitMQ with `MUS_BROKER_URL`.

The embedded broker is kombu's filesystem transport (its messages written atomically: `workers/broker.py`) in
a folder beside the database (`./.mus-broker` by default, `MUS_BROKER_DIR` to move it): no server to install,
real worker processes. Its polling interval is set through the transport options (the virtual transport reads
`polling_interval` from them); the default of one second would cap a league at about one match per second per
worker. Processed messages are moved within that folder, so a message is taken by exactly one worker (an atomic
rename on one file system).

The database, not the broker, is the source of truth: a message is only a hint to play a match id, and
`play_match` claims the match in the database before doing anything, so a lost or duplicated message never
loses or double-counts a result.

A match is sent to the queue of its half (`match_queues`, `repo.half_of`): a worker that prefers one half takes
its matches first and the other half's only when none is left, so its pool of persistent bots needs two processes
a bot rather than four (docs/pool.md). On the embedded broker and Redis a worker takes from its queues in the
order given (`worker_queues`); RabbitMQ delivers from both as they come.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from celery import Celery
from celery.concurrency.solo import TaskPool as SoloPool
from celery.exceptions import SecurityWarning
from celery.signals import celeryd_init, worker_init, worker_process_init, worker_process_shutdown, worker_ready
from kombu.entity import Exchange, Queue
from kombu.exceptions import ChannelError, OperationalError

from workers import broker

EMBEDDED_POLLING_S = 0.02
"""How often an idle embedded worker looks for a message."""

LONGEST_MATCH_S = 6 * 3600
"""Redis redelivers an unacknowledged message after its visibility timeout: keep it above any match."""


def broker_dir() -> Path:
    """The embedded broker's folder."""
    return Path(os.environ.get("MUS_BROKER_DIR", ".mus-broker")).resolve()


def _broker_folders() -> tuple[Path, Path, Path]:
    """The embedded broker's queue, processed and control folders."""
    folder = broker_dir()
    return folder / "queue", folder / "processed", folder / "control"


def make_broker_folders() -> None:
    """Make the embedded broker's folders, where a process is about to use it (they are not made on import: a
    command such as `mus bot add`, run in a bot's folder, would leave them there, for the bot's sandbox to show)."""
    if is_embedded():
        for path in _broker_folders():
            path.mkdir(parents=True, exist_ok=True)


def is_embedded() -> bool:
    """True when no `MUS_BROKER_URL` is set: `mus league run` then starts its own workers."""
    return not os.environ.get("MUS_BROKER_URL")


def broker_settings() -> dict[str, Any]:
    """Celery's broker settings for this process's environment."""
    url = os.environ.get("MUS_BROKER_URL")
    if url:
        options: dict[str, Any] = {}
        if url.startswith(("redis://", "rediss://")):
            options["visibility_timeout"] = LONGEST_MATCH_S
            options["queue_order_strategy"] = "priority"  # a worker's first queue first (`worker_queues`)
        return {"broker_url": url, "broker_transport_options": options}
    queue, processed, control = _broker_folders()
    return {
        "broker_url": f"{broker.SCHEME}://",
        "broker_transport_options": {
            "data_folder_in": str(queue),
            "data_folder_out": str(queue),
            "processed_folder": str(processed),
            "control_folder": str(control),  # broadcast exchanges (kombu's default is ./control)
            "store_processed": True,
            "polling_interval": EMBEDDED_POLLING_S,
        },
    }


def match_queues() -> tuple[str, str]:
    """The queues of the two halves of the duplicate pairs (`repo.half_of`), named from MUS_QUEUE, so that
    several deployments (or test runs) can share one broker."""
    base = os.environ.get("MUS_QUEUE", "mus")
    return f"{base}.half0", f"{base}.half1"


def worker_queues(prefer_half: int) -> str:
    """A worker's `-Q`: its preferred half's queue first (a single worker prefers half 0: it plays every pair's
    first match before any twin)."""
    first, second = match_queues()
    return f"{second},{first}" if prefer_half == 1 else f"{first},{second}"


def later(app: Celery, delay_s: float) -> dict[str, Any]:
    """`apply_async` options that send a message `delay_s` seconds from now (none for 0). The embedded broker holds
    the message back itself (`workers.broker.DELAY_HEADER`): under Celery's countdown the worker that takes it would
    run it from its timer thread, beside the match in hand. Elsewhere Celery's countdown: the worker's timer runs in
    its event loop, and a prefork worker hands the task to an idle child."""
    if delay_s <= 0:
        return {}
    if str(app.conf.broker_url).startswith(f"{broker.SCHEME}://"):
        return {"headers": {broker.DELAY_HEADER: delay_s}}
    return {"countdown": delay_s}


def send_match(app: Celery, match_id: int, half: int) -> None:
    """Ask a worker to play `match_id`, on its half's queue."""
    app.send_task("mus.play_match", (match_id,), queue=match_queues()[half])


def waiting_messages(app: Celery, half: int) -> int | None:
    """How many messages wait in `half`'s queue on the broker, taken by no worker yet: 0 where it has no such queue
    (Redis drops an emptied list), None where the broker cannot be asked (then nobody knows)."""
    with app.connection_for_read() as connection:
        try:
            connection.ensure_connection(max_retries=1, interval_start=0)  # one try: the broker is down, or not
            declared = connection.default_channel.queue_declare(queue=match_queues()[half], passive=True)
        except (ChannelError, *connection.channel_errors):
            return 0
        except (OperationalError, OSError, *connection.connection_errors):
            return None
        return int(declared.message_count)


def make_app() -> Celery:
    """The Celery app of this moment's environment, its embedded broker's folders made."""
    make_broker_folders()
    return _new_app()


def _new_app() -> Celery:
    app = Celery("mus", include=["workers.tasks"])
    app.conf.update(
        broker_settings(),
        task_default_queue=match_queues()[0],
        # Both halves' queues: a worker started without -Q (plain `celery worker`) takes both, in this order.
        task_queues=[Queue(name, Exchange(name), routing_key=name) for name in match_queues()],  # type: ignore[no-untyped-call]
        task_ignore_result=True,
        accept_content=["json"],  # never pickle: a worker runs as root (`_root_is_expected`)
        task_serializer="json",
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        # Task events only while a monitor turns them on (Flower does): a worker sending them for every match
        # spent about 0.3 ms of CPU a match on them, whether anyone listened or not.
        worker_send_task_events=False,
        task_send_sent_event=True,
    )
    return app


app = _new_app()
"""The app of `celery -A workers.app worker` and of the tasks: its folders are made once a worker starts."""


def _cancel_the_match_in_hand(self: SoloPool, pid: int, signal: int | None = None) -> None:
    """The solo pool's `terminate_job`, which a cold shutdown (Ctrl-C of `mus league run`) calls from its signal
    handler, in the thread that plays the match. Celery's raises NotImplementedError there, into whatever that
    thread runs: a review's landed in the referee's read of a seat's stream, which charged the seat a protocol
    error, and the match's forfeit was stored (stop 39). The match in hand is cancelled at its next await instead,
    and voided (`workers.play`), as any match its worker stopped."""
    from workers.matches import stop_match_in_hand

    stop_match_in_hand()


SoloPool.terminate_job = _cancel_the_match_in_hand  # `mus league run`'s workers: `--pool=solo`


@celeryd_init.connect  # type: ignore[untyped-decorator]
def _root_is_expected(sender: Any = None, **_: Any) -> None:
    """Celery warns a worker started as root, which the docs ask of a worker that plays strangers' bots (each seat
    then runs as a user of its own: docs/sandbox.md). Its warning is against pickle, which would run what a message
    holds: this app accepts JSON only (`accept_content`). Set just before Celery's check, in the worker alone."""
    warnings.filterwarnings("ignore", message="You're running the worker with superuser", category=SecurityWarning)


@worker_init.connect  # type: ignore[untyped-decorator]
def _make_folders(sender: Any = None, **_: Any) -> None:
    make_broker_folders()


@worker_ready.connect  # type: ignore[untyped-decorator]
def _reclaim_expired_leases(sender: Any = None, **_: Any) -> None:
    """Every live worker requeues and sends again the matches of workers that died (workers.play)."""
    from workers.play import database, start_reclaimer  # the database only once a worker runs

    start_reclaimer(database(), lambda match_id, half: send_match(app, match_id, half))


@worker_process_init.connect  # type: ignore[untyped-decorator]
def _own_connections(sender: Any = None, **_: Any) -> None:
    """A prefork worker's child takes database connections of its own (`workers.play.after_fork`)."""
    from workers.play import after_fork

    after_fork()


@worker_process_shutdown.connect  # type: ignore[untyped-decorator]
def _clean_up_child(sender: Any = None, **_: Any) -> None:
    """A prefork worker's child ends with os._exit, which runs no atexit function: what a worker process cleans up
    there (its pools' processes and folders, its referee's sockets, its seats' /proc copies) is done here. A
    review's warm shutdown of a `mus worker` left its child's `mus-pool` folder behind (stop 39)."""
    from workers.launcher import remove_own_folders
    from workers.matches import close_worker_referee
    from workers.pool import close_pools

    close_pools()
    close_worker_referee()
    remove_own_folders()


@worker_ready.connect  # type: ignore[untyped-decorator]
@worker_process_init.connect  # type: ignore[untyped-decorator]
def _settle_heap(sender: Any = None, **_: Any) -> None:
    """After start-up, in the process that plays the matches: a solo worker once ready (the reclaimer above has
    loaded the match path), each child of a prefork worker (`mus worker`) as it starts, for a freeze in its parent
    is not its own. The full garbage collections of a worker walked its whole start-up heap, about 100 ms a pass in
    the middle of a match (docs/pool.md)."""
    from referee.service.server import settle_start_up_heap

    settle_start_up_heap()
