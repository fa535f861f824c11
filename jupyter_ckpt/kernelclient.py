"""The server's client for calling jupyter-ckpt in a live kernel.

Every request is the same silent expression, ``DISPATCH`` with the request as
a JSON string, ``{"verb": ..., "args": {...}}``: the kernel's
``kernel_api.dispatch`` loads the extension if it is not loaded, finds the
shell's Checkpointer and answers in JSON. No code is built from the values
of a request. The request records no cell and prints nothing.
"""

from __future__ import annotations

import ast
import asyncio
import json
import queue
import time
from collections.abc import Callable
from typing import Any

from jupyter_client.session import new_id
from jupyter_server.services.kernels.kernelmanager import MappingKernelManager

from . import errors
from .errors import CheckpointError
from .progress import PROGRESS_MIME

# The one expression the server evaluates in a kernel; ``request`` is the JSON request.
DISPATCH = "__import__('jupyter_ckpt.kernel_api').kernel_api.dispatch(get_ipython(), {request!r})"
# Times a request the kernel aborted (a cell queued before it failed) is sent again.
ABORTED_RETRIES = 3
# The iopub messages that carry a progress display: its first showing and its updates in place.
PROGRESS_MESSAGES = ("display_data", "update_display_data")
# Seconds a request waits for the kernel's iopub to reach the server, to pass its progress on.
IOPUB_GRACE = 5.0
# Seconds a request waits for a busy kernel to go idle before it is refused.
IDLE_GRACE = 2.0


class UnknownKernel(CheckpointError):
    """A kernel id the server does not run."""

    http_status = 404


class KernelBusy(CheckpointError):
    """The kernel is running a cell; a request now would wait behind it."""

    http_status = 409


class KernelDied(CheckpointError):
    """The kernel died before it answered; the request was dropped, not kept for the kernel that replaces it."""

    http_status = 409


class KernelCallError(CheckpointError):
    """The kernel did not answer, or failed in a way that is not a checkpoint error."""

    http_status = 502


def request(verb: str, *, resume: bool = True, **args: Any) -> str:
    """The code that runs one verb in a kernel.

    ``resume`` False keeps the extension, if this request loads it, from restoring
    the session's last good checkpoint itself (``restore_on_start``): after a
    crash the server chooses the state to bring back.
    """
    return DISPATCH.format(request=json.dumps({"verb": verb, "args": args, "resume": resume}))


def _kernel_error(content: dict[str, Any]) -> CheckpointError:
    """The error a kernel reported, as the jupyter_ckpt error class it raised when it is one."""
    name, value = content.get("ename", "Error"), content.get("evalue", "")
    cls = getattr(errors, name, None)
    if isinstance(cls, type) and issubclass(cls, CheckpointError):
        return cls(value)
    return KernelCallError(f"the kernel raised {name}: {value}")


class KernelConnection:
    """A client on one live kernel, for ``async with``: ``await kernel.call("save", message=..., tag=...)``.

    ``idle`` (a user's request) refuses a dead kernel or one that runs a cell.
    Without it (the server's own requests at a kernel's start or restart) the
    request is sent at once, ahead of the cells a frontend sends later.
    """

    def __init__(
        self,
        kernels: MappingKernelManager,
        kernel_id: str,
        timeout: float,
        *,
        idle: bool = True,
        resume: bool = True,
    ) -> None:
        if kernel_id not in kernels:
            raise UnknownKernel(f"no running kernel {kernel_id!r}")
        self.kernel_id = kernel_id
        self.manager: Any = kernels.get_kernel(kernel_id)  # a ServerKernelManager: async, with execution_state
        self.timeout = timeout
        self.idle = idle
        self.resume = resume
        self.client: Any = None
        self._asked: Any = None  # the kernel's process when the request came (``_same_kernel``)
        self.progress: Callable[[dict[str, Any]], None] | None = None

    async def __aenter__(self) -> KernelConnection:
        self._asked = self._process()
        if self.idle:
            await self._check_alive()
            await self._wait_until_idle()
            self._same_kernel()
        # Requests queue on the shell socket until the kernel listens, ahead of any a frontend sends later:
        # the server's own requests at a (re)start go out with no await before them.
        # A session of its own: the shell socket's identity is the session id, and two clients of one
        # kernel sharing it (crash recovery and a REST request) would get each other's replies.
        session = self.manager.session.clone()
        session.session = new_id()
        self.client = self.manager.client(session=session)
        self.client.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=False)
        return self

    async def _wait_until_idle(self) -> None:
        """Refuse a kernel that runs a cell: a request would wait behind it and could outlive its caller.

        The server learns that the kernel went idle a moment after a reply, so a short busy spell is waited out.
        """
        deadline = time.monotonic() + IDLE_GRACE
        while self.manager.execution_state == "busy":
            if time.monotonic() > deadline:
                raise KernelBusy(f"kernel {self.kernel_id} is running a cell; try again when it is idle")
            await asyncio.sleep(0.05)

    def _process(self) -> Any:
        """The kernel's process as its provisioner launched it: another object once it restarted (a local
        provisioner's ``Popen``; None where a provisioner has none to show)."""
        return getattr(self.manager.provisioner, "process", None)

    def _same_kernel(self) -> None:
        """Refuse a request whose kernel was replaced while it waited (it died with a cell running, and the
        restarted one went idle): it would run in the new kernel, after or instead of its crash recovery."""
        if self._process() is not self._asked:
            raise KernelDied(
                f"kernel {self.kernel_id} restarted while the request waited; nothing was done. Try again once "
                "it is back (after its crash recovery, if that is on)."
            )

    async def __aexit__(self, *exc: object) -> None:
        self.client.stop_channels()

    async def _execute(self, expression: str) -> dict[str, Any]:
        """The reply's content to one silent request.

        The request is sent before any await, so at a kernel's (re)start it is
        ahead of the cells a frontend sends. A kernel that dies meanwhile ends the
        wait at once. The request must not wait in the socket for the restarted
        kernel either, where it would run before the crash recovery:
        ``__aexit__`` closes the socket, dropping it.
        """
        self._same_kernel()  # nothing awaited from here to the send
        msg_id = self.client.execute(  # not stop_on_error: a failure here must never abort the user's cells
            "", silent=True, user_expressions={"value": expression}, stop_on_error=False
        )
        deadline = time.monotonic() + self.timeout
        while True:
            await self._pass_on_progress(msg_id)
            try:
                reply = await self.client.get_shell_msg(timeout=0.1)
            except queue.Empty:
                await self._check_alive()
                if time.monotonic() > deadline:
                    raise KernelCallError(f"the kernel did not answer within {self.timeout:g} s") from None
                continue
            if reply["parent_header"].get("msg_id") == msg_id:
                return dict(reply["content"])

    async def follow_progress(self, progress: Callable[[dict[str, Any]], None]) -> None:
        """From the next request on, give ``progress`` the data of the progress displays it shows.

        Returns once the kernel's iopub reaches this client: a subscriber misses
        what is published before it has joined, so a request's status must come back.
        Progress is a courtesy: after ``IOPUB_GRACE`` seconds without, it goes on without.
        """
        self.client.iopub_channel.start()
        deadline = time.monotonic() + IOPUB_GRACE
        while time.monotonic() < deadline:
            # Not kernel_info: IPython picks its banner's tip with the global ``random``, which would move the
            # notebook's seeded stream.
            probe = self.client.comm_info()
            try:
                while (await self.client.get_iopub_msg(timeout=0.2))["parent_header"].get("msg_id") != probe:
                    pass
            except queue.Empty:
                await self._check_alive()
                continue
            self.progress = progress
            return

    async def _pass_on_progress(self, msg_id: str) -> None:
        """Give ``progress`` what the request's progress displays said since the last look."""
        while self.progress is not None:
            try:
                msg = await self.client.get_iopub_msg(timeout=0)
            except queue.Empty:
                return
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] in PROGRESS_MESSAGES:
                data = msg["content"]["data"].get(PROGRESS_MIME)
                if data is not None:
                    self.progress(data)

    async def _check_alive(self) -> None:
        if not await self.manager.is_alive():
            raise KernelDied(
                f"kernel {self.kernel_id} died; nothing was done. Try again once it has restarted "
                "(after its crash recovery, if that is on)."
            )

    async def call(self, verb: str, **args: Any) -> Any:
        """Run one verb of ``kernel_api`` in the kernel with JSON arguments; returns its JSON result.

        A request that the kernel aborted, because a cell before it failed, did not run: it is sent again.
        """
        code = request(verb, resume=self.resume, **args)
        for _ in range(ABORTED_RETRIES):
            content = await self._execute(code)
            if content["status"] != "aborted":
                break
        else:
            raise KernelCallError("the kernel skipped the request each time: the cells before it kept failing")
        if content["status"] != "ok":
            raise _kernel_error(content)
        result = content["user_expressions"]["value"]
        if result["status"] != "ok":
            raise _kernel_error(result)
        return json.loads(ast.literal_eval(result["data"]["text/plain"]))
