"""What the REST API does, as one service object over the store and the server's kernels.

The handlers are thin over it, as jupyter_server's contents handlers are over
their manager. Every Store call runs in a worker thread (``asyncio.to_thread``):
a catalog write can wait up to SQLite's lock timeout for another writer (a
kernel committing a checkpoint), and the server's event loop must go on
answering every other request meanwhile.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from jupyter_server.services.kernels.kernelmanager import MappingKernelManager
from jupyter_server.utils import to_api_path

from .errors import BadArgument, UnknownSession
from .kernelclient import KernelConnection, KernelDied
from .recipes import check_mode
from .remote import Replica
from .retention import Limits, usage
from .session import NAME_MAX, check_text
from .store import Store
from .timeline import Timeline, tree_rows

Params = ParamSpec("Params")
Result = TypeVar("Result")


class CheckpointService:
    """Checkpoints of the server's notebooks: browsed in the store, taken and restored in live kernels."""

    def __init__(
        self,
        open_store: Callable[[], Store],
        kernels: MappingKernelManager,
        kernel_timeout: float,
        limits: Limits | None = None,
    ) -> None:
        self._open_store = open_store
        self.limits = limits or Limits()  # the retention options, to show the store's size against its budget
        self._store: Store | None = None
        self._opening = threading.Lock()
        self.kernels = kernels
        self.kernel_timeout = kernel_timeout
        # Crash events for clients that poll (``CrashRecovery`` appends them).
        self.events: deque[dict[str, Any]] = deque(maxlen=1000)
        # Kernels that died and whose state is not back yet: a request now would run before the crash
        # recovery, in an empty kernel (``CrashRecovery`` keeps it).
        self.recovering: set[str] = set()
        # By kernel id, the crash restores running now and how far they are, {"session", "what", "done",
        # "total"}, for the crash notification (``CrashRecovery`` keeps it from the kernel's progress displays).
        self.restoring: dict[str, dict[str, Any]] = {}
        # The object store the server follows, when store_url names one (set by the app's pull thread).
        self.replica: Replica | None = None

    @property
    def store(self) -> Store:
        """The store, opened at its first use (in a worker thread). One this version cannot use (a newer
        format, a lost catalog) fails each request with its error, and the server runs on."""
        with self._opening:
            if self._store is None:
                self._store = self._open_store()
            return self._store

    @property
    def timeline(self) -> Timeline:
        """The front door to the store's timeline, for every read and change below."""
        return Timeline(self.store)

    async def in_thread(self, work: Callable[Params, Result], *args: Params.args, **kwargs: Params.kwargs) -> Result:
        """``work(*args, **kwargs)`` run in a worker thread, off the event loop."""
        return await asyncio.to_thread(work, *args, **kwargs)

    def session_keys(self, name: str) -> tuple[str, str]:
        """The store keys a session name can mean: itself, and the key of the notebook at that path.

        Clients name a session by its key or by its notebook's path relative to the
        server root. The second key is what jupyter_server puts in ``JPY_SESSION_NAME``
        for a kernel on that notebook (``SessionManager.get_kernel_env``): a string to
        look up in the catalog, never a file to open. An empty one names none: refused, as on every surface (a
        notebook's file name may start with a space, or hold any character but ``/``).
        """
        if not check_text(name, "a session name", NAME_MAX).strip():
            raise BadArgument("a session name needs at least one character that is not a space")
        cwd = self.kernels.cwd_for_path(name)  # type: ignore[no-untyped-call]
        return name, os.path.join(cwd, os.path.basename(name))

    def api_path(self, key: str) -> str | None:
        """The notebook path relative to the server root of a session key, if it lies under the root."""
        root = self.kernels.root_dir
        return to_api_path(key, root) if key.startswith(os.path.join(root, "")) else None

    def kernel(self, kernel_id: str) -> KernelConnection:
        """A connection to a live kernel that is not busy, for ``async with``."""
        connection = KernelConnection(self.kernels, kernel_id, self.kernel_timeout)
        if kernel_id in self.recovering:
            raise KernelDied(
                f"kernel {kernel_id} died and is being brought back to its last good state; "
                "nothing was done. Try again once it is back."
            )
        return connection

    # -- read from the store alone: they work while the kernel is dead ----------

    def _sessions(self) -> list[dict[str, Any]]:
        return [
            {
                "key": s["key"],
                "path": self.api_path(s["key"]),
                "checkpoints": s["checkpoints"],
                "last": s["last"],
                "bytes": s["bytes"],
            }
            for s in self.timeline.sessions()
        ]

    async def sessions(self) -> list[dict[str, Any]]:
        """Every session in the store, with its notebook's path when it lies under the server root."""
        return await self.in_thread(self._sessions)

    def _checkpoints(self, name: str) -> dict[str, Any]:
        for key in self.session_keys(name):
            try:
                records = self.timeline.checkpoints(key)
            except UnknownSession:
                continue
            return {
                "session": key,
                "checkpoints": [r.as_dict() for r in records],
                "rows": tree_rows(records),
                "remote": self.replica.status() if self.replica is not None else None,
                "store": usage(self.store, self.limits).as_dict(),
            }
        raise UnknownSession(f"no session {name!r} in the checkpoint store")

    async def checkpoints(self, name: str) -> dict[str, Any]:
        """A session's key and its checkpoints, oldest first; ``name`` is the key or the notebook's path."""
        return await self.in_thread(self._checkpoints, name)

    async def details(self, checkpoint_id: int) -> dict[str, Any]:
        return await self.in_thread(self.timeline.details, checkpoint_id)

    async def record(self, checkpoint_id: int) -> dict[str, Any]:
        return await self.in_thread(lambda: self.store.get(checkpoint_id).as_dict())

    async def tag(self, checkpoint_id: int, tag: str | None) -> dict[str, Any]:
        """Tag a checkpoint (None: untag it); its record."""
        return (await self.in_thread(self.timeline.tag, checkpoint_id, tag)).as_dict()

    async def delete(self, checkpoint_id: int) -> None:
        await self.in_thread(self.timeline.delete, [checkpoint_id])

    def events_since(self, since: float, name: str | None = None) -> dict[str, list[dict[str, Any]]]:
        """Crash events after ``since`` (seconds since the epoch), and the crash restores running now: of one
        session if ``name`` is given."""
        keys = self.session_keys(name) if name is not None else None
        return {
            "events": [e for e in self.events if e["time"] > since and (keys is None or e["session"] in keys)],
            "restoring": [
                {**r, "kernel_id": k, "path": self.api_path(r["session"])}
                for k, r in self.restoring.items()
                if keys is None or r["session"] in keys
            ],
        }

    # -- run in a live kernel ---------------------------------------------------

    async def save(self, name: str, kernel_id: str, message: str | None, tag: str | None) -> dict[str, Any]:
        """Checkpoint a kernel now, which must be the one of session ``name``; the new checkpoint's record."""
        keys = self.session_keys(name)  # a name no notebook could have is refused before the kernel is asked
        async with self.kernel(kernel_id) as kernel:
            session = await kernel.call("session")
            if session not in keys:
                raise BadArgument(f"kernel {kernel_id} checkpoints {session!r}, not {name!r}")
            cid = await kernel.call("save", message=message, tag=tag)
        return await self.record(cid)

    async def restore(self, checkpoint_id: int, kernel_id: str, replay: str | None) -> dict[str, Any]:
        """Restore a checkpoint into a live kernel; its id, the restore's summary, and what replay would rebuild."""
        cid = (await self.record(checkpoint_id))["id"]
        if replay is not None:
            check_mode(replay)
        async with self.kernel(kernel_id) as kernel:
            result = await kernel.call("restore", checkpoint=cid, replay=replay)
        return {"checkpoint": cid, **result}

    async def offer(self, kernel_id: str) -> dict[str, Any] | None:
        """What a kernel offers to resume: the last good state its notebook's earlier kernels left (a kernel
        culled for idling, one that crashed or was restarted), until it restores something; None if nothing."""
        async with self.kernel(kernel_id) as kernel:
            offer: dict[str, Any] | None = await kernel.call("offer")
        return offer

    async def replay(self, kernel_id: str) -> dict[str, str]:
        """Run the cells that rebuild what the kernel's last restore could not; what each variable got."""
        async with self.kernel(kernel_id) as kernel:
            outcome: dict[str, str] = await kernel.call("replay")
        return outcome
