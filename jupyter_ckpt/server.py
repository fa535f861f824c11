"""The jupyter_server extension: the REST API under ``/api/ckpt/`` and crash recovery.

Enabled on install by ``jupyter-config/server-config/jupyter_ckpt.json``;
configured as ``c.CkptServerApp.<option>`` in ``jupyter_server_config.py``.
The app wires one ``CheckpointService`` (the handlers' and crash recovery's
way to the store and the kernels) into the handlers' settings.
"""

from __future__ import annotations

import math
import threading
from typing import Any

from jupyter_server.extension.application import ExtensionApp
from traitlets import Bool, Float, validate

from .config import Range, StoreOptions, in_range, store_location
from .errors import CheckpointError
from .handlers import SERVICE, default_handlers
from .recovery import CrashRecovery
from .remote import Remote, Replica
from .service import CheckpointService
from .store import Store

# The numeric options of ``CkptServerApp`` and the values each takes (kernel_timeout 0 made every request to a
# kernel time out at once).
_RANGES: dict[str, Range] = {
    "kernel_poll_interval": ("a number of seconds, 0 or more (0: keep KernelRestarter's)", lambda v: 0 <= v < math.inf),
    "kernel_timeout": ("a number of seconds above 0", lambda v: v > 0),
    "remote_poll": ("a number of seconds, 0 or more (0: never pull)", lambda v: v >= 0),
}


class CkptServerApp(StoreOptions, ExtensionApp):
    """Checkpoints of the kernels this server runs: REST access and crash recovery."""

    name = "jupyter_ckpt"

    auto_restore_on_crash = Bool(
        True,
        help="When a kernel dies and the server restarts it, restore its session's last good checkpoint into it.",
    ).tag(config=True)
    autoload = Bool(
        True,
        help="Load the jupyter_ckpt IPython extension into every Python kernel this server starts or restarts, "
        "so its notebook is checkpointed from the first cell without %load_ext.",
    ).tag(config=True)
    kernel_poll_interval = Float(
        1.0,
        help="Seconds between checks that a kernel process is alive, so a crash is noticed and restored "
        "within about this long (sets KernelRestarter.time_to_dead unless that is configured; 0: keep it).",
    ).tag(config=True)
    kernel_timeout = Float(
        60.0, help="Seconds to wait for a kernel to answer when taking or restoring a checkpoint in it."
    ).tag(config=True)

    remote_poll = Float(
        10.0,
        help="With an object store as store_url: seconds between pulls of its timeline, so the sidebar and the "
        "REST API show what kernels on other machines checkpointed (0: never pull).",
    ).tag(config=True)

    service: CheckpointService
    recovery: CrashRecovery

    @validate(*_RANGES)
    def _in_range(self, proposal: dict[str, Any]) -> Any:
        return in_range(self, _RANGES, proposal)

    @property
    def store(self) -> Store:
        """The service's store, opened at its first use: one this version cannot use (a newer format,
        a lost catalog) fails each request with its error as JSON, and the server runs on."""
        return self.service.store

    def initialize_settings(self) -> None:
        assert self.serverapp is not None and self.serverapp.event_logger is not None  # set up by the server
        restarter = self.serverapp.config.KernelRestarter
        if self.kernel_poll_interval and "time_to_dead" not in restarter:
            restarter.time_to_dead = self.kernel_poll_interval
        self.service = CheckpointService(
            self.open_store, self.serverapp.kernel_manager, self.kernel_timeout, self.limits()
        )
        self.settings[SERVICE] = self.service
        self.recovery = CrashRecovery(
            self.service,
            self.serverapp.event_logger,
            self.log,
            restore=self.auto_restore_on_crash,
            autoload=self.autoload,
        )
        self.recovery.start()
        self._stopping = threading.Event()
        url = store_location(self.store_url)[1]
        if self.remote_poll > 0 and url is not None:
            threading.Thread(target=self._follow_remote, args=(url,), name="jupyter-ckpt-pull", daemon=True).start()

    def initialize_handlers(self) -> None:
        self.handlers.extend(default_handlers)

    async def stop_extension(self) -> None:
        self._stopping.set()
        await self.recovery.stop()

    def _follow_remote(self, url: str) -> None:
        """Pull the remote store's timeline now and every ``remote_poll`` seconds, in a thread of its own (the
        event loop never waits on the network); the kernels upload their own checkpoints."""
        said = None
        while True:
            try:
                if self.service.replica is None:
                    self.service.replica = Replica(self.service.store, Remote(url), self.log.warning)
                self.service.replica.pull()
                said = None
            except CheckpointError as e:
                if str(e) != said:  # once, not at every poll
                    self.log.warning("jupyter-ckpt: %s", e)
                said = str(e)
            if self._stopping.wait(self.remote_poll):
                return
