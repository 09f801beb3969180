"""The instant bot of `mus bench league`: one seat over bare mus.v1, answered at once, with the least start-up.

`python bench/league_bot.py` plays the seat named by `MUS_REFEREE` and `MUS_TOKEN`, like any hosted bot, over the
frames of `MUS_FRAMES` when the worker offers them. It
imports only the generated messages, the random wire policy (clients/bots/wire_random.py; no SDK, no rules
engine) and, unless it plays over frames (below), grpc. It answers every DecisionRequest as soon as it arrives
with a random legal action built from the request's structured legal actions (a legal kind uniformly, then its
bounds), and once it has the outcome leaves with `os._exit`, skipping the interpreter's teardown of grpc (about
80 ms in which the worker would wait for it).
It asks for what a fast bot would (docs/protocol.md): `Join.batch_events` (a step's events and its request in
one Update) and `Join.omit_hand_events` (it keeps no view, so the hand's events need not ride in each request).
Under MUS_SEATS=stdin (a persistent bot, docs/pool.md) it plays each seat over frames when the seat line names
where (`clients.frames`: it then never imports grpc, about half of its start-up), else it keeps one channel per
referee address, seat after seat.

Its choices are seeded from its seat and the cards of its first decision, which the match seed fixes: the same
league plays exactly the same matches (same decisions, same results) in every configuration of the benchmark,
whatever the broker, the number of workers or the order the matches are played in.
"""

from __future__ import annotations

import os
import queue
import random
import sys
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Protocol

from clients.bots.wire_random import random_wire_action
from clients.frames import FrameStream, StreamEnded
from mus.v1 import play_pb2

if TYPE_CHECKING:
    import grpc

BOT_NAME = "instant"
THINK_ENV = "MUS_BENCH_THINK_MS"
"""Milliseconds to wait before each answer (default 0: instant); `mus bench league --think-ms` sets it."""


class _Outbox(Protocol):
    def put(self, message: play_pb2.PlayRequest) -> None: ...


def _requests(outbox: queue.SimpleQueue[play_pb2.PlayRequest | None]) -> Iterator[play_pb2.PlayRequest]:
    while (message := outbox.get()) is not None:
        yield message


def _join(token: str) -> play_pb2.PlayRequest:
    join = play_pb2.Join(
        seat_token=token,
        bot_name=BOT_NAME,
        bot_version="1",
        protocol_version=1,
        batch_events=True,
        omit_hand_events=True,
    )
    return play_pb2.PlayRequest(join=join)


def play(channel: grpc.Channel, token: str, think_s: float = 0.0) -> bool:
    """Play one seat to the end on `channel`; True when the outcome arrived. An error status is raised as
    `StreamEnded`, as over frames."""
    import grpc

    from mus.v1 import play_pb2_grpc

    outbox: queue.SimpleQueue[play_pb2.PlayRequest | None] = queue.SimpleQueue()
    outbox.put(_join(token))
    try:
        return _answer(play_pb2_grpc.PlayServiceStub(channel).Play(_requests(outbox)), outbox, think_s)
    except grpc.RpcError as error:
        raise StreamEnded(error.code().name, str(error.details())) from None
    finally:
        outbox.put(None)


def _channel(address: str) -> grpc.Channel:
    import grpc  # only for a seat played over gRPC: over frames the bot starts without it

    return grpc.insecure_channel(address)


def play_frames(address: str, token: str, think_s: float = 0.0) -> bool:
    """The same over frames (a seat line's `frames` address, docs/pool.md)."""
    with FrameStream(address) as stream:
        stream.put(_join(token))
        return _answer(stream, stream, think_s)


def _answer(responses: Iterable[play_pb2.PlayResponse], outbox: _Outbox, think_s: float) -> bool:
    """Answer every decision request of the stream at once; True when the outcome arrived."""
    seat = -1
    rng: random.Random | None = None
    finished = False
    for response in responses:
        kind = response.WhichOneof("message")
        if kind == "update" and response.update.HasField("decision_request"):
            request = response.update.decision_request
            if rng is None:
                cards = " ".join(f"{card.rank}/{card.suit}" for card in request.view.cards)
                rng = random.Random(f"mus/bench/instant/{seat}/{cards}")
            if think_s:
                time.sleep(think_s)
            action = random_wire_action(rng, request, senas=False)
            outbox.put(play_pb2.PlayRequest(act=play_pb2.Act(decision_id=request.decision_id, action=action)))
        elif kind == "joined":
            seat = response.joined.seat
        elif kind == "outcome":
            finished = True
    return finished


def play_seats(think_s: float) -> int:
    """Seats over standard input (MUS_SEATS=stdin, docs/protocol.md): one JSON line per seat, played in turn,
    until the input ends. A seat that fails is logged; the next one is played."""
    import json

    channels: dict[str, grpc.Channel] = {}  # the address stays the same from seat to seat: one channel serves all
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            seat = json.loads(line)
            if seat.get("frames"):
                play_frames(str(seat["frames"]), seat["seat_token"], think_s)
                continue
            address = str(seat["referee"])
            if address not in channels:
                channels[address] = _channel(address)
            play(channels[address], seat["seat_token"], think_s)
        except (ValueError, KeyError, TypeError) as error:
            print(f"instant bot: not a seat line ({error}): {line.strip()[:200]}", file=sys.stderr)
        except StreamEnded as error:
            print(f"instant bot: {error.code}: {error.details}", file=sys.stderr)
        sys.stderr.flush()
    return 0


def main() -> int:
    """Play the seat (or, with MUS_SEATS=stdin, every seat given); the exit status: 0 when the outcome arrived."""
    try:
        think_s = float(os.environ.get(THINK_ENV) or 0) / 1000
        if os.environ.get("MUS_SEATS") == "stdin":
            return play_seats(think_s)
        if os.environ.get("MUS_FRAMES"):  # a worker's own referee offers the seat frames of its own
            finished = play_frames(os.environ["MUS_FRAMES"], os.environ["MUS_TOKEN"], think_s)
        else:
            with _channel(os.environ["MUS_REFEREE"]) as channel:
                finished = play(channel, os.environ["MUS_TOKEN"], think_s)
    except ValueError:
        print(f"instant bot: {THINK_ENV} must be a number of milliseconds", file=sys.stderr)
        return 1
    except KeyError as missing:
        print(f"instant bot: {missing.args[0]} is not set", file=sys.stderr)
        return 1
    except StreamEnded as error:
        print(f"instant bot: {error.code}: {error.details}", file=sys.stderr)
        return 1
    return 0 if finished else 1


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # no interpreter teardown: the worker waits for this process to exit before it goes on
