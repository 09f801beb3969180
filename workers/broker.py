"""The embedded broker: kombu's filesystem transport, with messages written atomically.

kombu's own `_put` creates the message file under its final name and only then writes it, while a consumer takes
any file with that name (it moves it away, then reads it): a worker that sends a message to its own queue (the
lease reclaimer) could read it empty and die on the JSON. Here a message is written under a name no consumer
takes, then renamed into place, which is atomic on one file system.
"""

from __future__ import annotations

import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import TRANSPORT_ALIASES, filesystem
from kombu.utils.json import dumps

SCHEME = "mus-filesystem"
"""The broker URL scheme of this transport (`mus-filesystem://`)."""


class Channel(filesystem.Channel):
    def _put(self, queue: Any, payload: Any, **kwargs: Any) -> Any:  # type: ignore[override]  # kombu names the argument two ways
        """Put `payload` onto `queue`: written under a temporary name, then renamed to the one consumers take."""
        final = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        partial = os.path.join(self.data_folder_out, f".{final}.partial")
        try:
            with open(partial, "wb") as file:
                file.write(dumps(payload).encode())  # type: ignore[no-untyped-call]
            os.replace(partial, os.path.join(self.data_folder_out, final))
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel


TRANSPORT_ALIASES[SCHEME] = f"{__name__}:Transport"
