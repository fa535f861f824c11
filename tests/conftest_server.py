"""Fixtures for tests against a real jupyter_server with jupyter_ckpt enabled, and real kernels.

Test modules load them with ``pytest_plugins = ("pytest_jupyter.jupyter_server", "conftest_server")``.
A ``Notebook`` is what a frontend has: a session opened through ``/api/sessions``,
cells run through the kernel's websocket, the checkpoint REST API.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import restapi
from jupyter_client.jsonutil import json_default
from jupyter_client.session import Session
from tornado.httpclient import HTTPClientError, HTTPResponse
from traitlets.config import Config

from jupyter_ckpt.recovery import CRASH_EVENTS

Fetch = Callable[..., Awaitable[HTTPResponse]]


@pytest.fixture
def jp_server_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Config:
    """jupyter_ckpt enabled with its defaults, on a store private to the test (kernels inherit the env)."""
    monkeypatch.setenv("JUPYTER_CKPT_DIR", str(tmp_path / "store"))
    return Config({"ServerApp": {"jpserver_extensions": {"jupyter_ckpt": True}}})


@pytest.fixture
def ckpt_app(jp_serverapp: Any) -> Any:
    return jp_serverapp.extension_manager.extension_points["jupyter_ckpt"].app


class Api:
    """JSON requests to the server, as the lab extension makes them; every reply is checked against
    ``docs/rest-api.yml`` (``restapi.py``)."""

    def __init__(self, fetch: Fetch) -> None:
        self.fetch = fetch

    async def __call__(self, method: str, *parts: str, body: Any = None, **kwargs: Any) -> Any:
        """The decoded JSON reply (None when empty) of a request that must succeed."""
        data = None if body is None else body if isinstance(body, str) else json.dumps(body)
        if data is None and method in ("POST", "PATCH"):
            data = ""
        try:
            response = await self.fetch(*parts, method=method, body=data, **kwargs)
        except HTTPClientError as e:
            if e.response is not None:
                restapi.check(method, parts, e.code, json.loads(e.response.body) if e.response.body else None)
            raise
        reply = json.loads(response.body) if response.body else None
        restapi.check(method, parts, response.code, reply)
        return reply

    async def error(self, method: str, *parts: str, **kwargs: Any) -> tuple[int, str]:
        """A request that must fail: its status and the message of its JSON error body."""
        with pytest.raises(HTTPClientError) as info:
            await self(method, *parts, **kwargs)
        response = info.value.response
        assert response is not None
        assert response.headers["Content-Type"].startswith("application/json")
        return info.value.code, json.loads(response.body)["message"]


@pytest.fixture
def api(jp_fetch: Fetch) -> Api:
    return Api(jp_fetch)


@dataclass
class Result:
    stdout: str
    stderr: str
    error: str | None


class Notebook:
    """A notebook session opened through the server's REST API, as JupyterLab opens one."""

    def __init__(
        self, api: Api, ws_fetch: Callable[..., Any], serverapp: Any, path: str, kernel: str = "python3"
    ) -> None:
        self.api, self.ws_fetch, self.serverapp, self.path = api, ws_fetch, serverapp, path
        self.kernel_name = kernel
        self.kernel_id = ""
        self.crashes: list[tuple[float, dict[str, Any]]] = []  # (time received, event) from the event bus
        self._session = Session()

    async def open(self) -> Notebook:
        model = {
            "path": self.path,
            "name": os.path.basename(self.path),
            "type": "notebook",
            "kernel": {"name": self.kernel_name},
        }
        session = await self.api("POST", "api", "sessions", body=model)
        self.kernel_id = session["kernel"]["id"]

        async def listener(logger: Any, schema_id: str, data: dict[str, Any]) -> None:
            if data["kernel_id"] == self.kernel_id:
                self.crashes.append((time.perf_counter(), data))

        self.serverapp.event_logger.add_listener(schema_id=CRASH_EVENTS, listener=listener)
        await self.until_loaded()
        return self

    async def until_loaded(self, timeout: float = 60) -> None:
        """Wait until the server has loaded jupyter_ckpt into the kernel, as a user does by the time they type.

        The server sends its request as the kernel starts; a cell sent at once can reach the kernel first,
        and the state it leaves before the extension is there cannot be checkpointed. The check is a silent
        request: no cell, no execution count, no history.
        """
        deadline = time.monotonic() + timeout
        check = "print(get_ipython().find_line_magic('checkpoint') is not None)"
        while (await self.run(check, silent=True)).stdout.strip() != "True":
            assert time.monotonic() < deadline, "the server did not load jupyter_ckpt into the kernel"
            await asyncio.sleep(0.05)

    async def run(self, code: str, timeout: float = 60, *, silent: bool = False) -> Result:
        """Run one cell through the kernel's websocket, as a frontend does (``silent``: a request that is no cell)."""
        ws = await self.ws_fetch(
            "api", "kernels", self.kernel_id, "channels", params={"session_id": self._session.session}
        )
        msg = self._session.msg("execute_request", {"code": code, "silent": silent, "store_history": not silent})
        msg["channel"] = "shell"

        async def outputs() -> Result:
            stdout, stderr, failure, replied, idle = "", "", None, False, False
            while not (replied and idle):  # the reply (shell) and idle (iopub) come in either order
                reply = json.loads(await ws.read_message())
                if reply["parent_header"].get("msg_id") != msg["header"]["msg_id"]:
                    continue
                kind, content = reply["msg_type"], reply["content"]
                if kind == "stream" and content["name"] == "stdout":
                    stdout += content["text"]
                elif kind == "stream":
                    stderr += content["text"]
                elif kind == "error":
                    failure = f"{content['ename']}: {content['evalue']}"
                replied = replied or kind == "execute_reply"
                idle = idle or (kind == "status" and content["execution_state"] == "idle")
            return Result(stdout, stderr, failure)

        try:
            ws.write_message(json.dumps(msg, default=json_default))
            return await asyncio.wait_for(outputs(), timeout)
        finally:
            ws.close()

    async def ok(self, code: str) -> str:
        """Run a cell that must succeed; returns what it printed."""
        result = await self.run(code)
        assert result.error is None, f"{code!r} failed: {result.error}"
        return result.stdout

    async def value(self, expression: str) -> Any:
        """The value of an expression in the kernel, whose repr is a Python literal."""
        code = f"print(repr({expression}))"
        printed = await self.ok(code)
        if not printed:
            # Once, under load, a cell's reply and idle status came through the websocket and its output did not.
            # Asked again as a request that is no cell (it checkpoints nothing); pure expressions answer the same.
            printed = (await self.run(code, silent=True)).stdout
        return ast.literal_eval(printed.strip())

    async def checkpoints(self) -> list[dict[str, Any]]:
        body = await self.api("GET", "api", "ckpt", "checkpoints", params={"session": self.path})
        return list(body["checkpoints"])

    async def wait_for_checkpoints(self, count: int, timeout: float = 30) -> list[dict[str, Any]]:
        """The timeline once it holds ``count`` checkpoints (automatic ones are written in the background)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                records = await self.checkpoints()
            except HTTPClientError:
                records = []
            if len(records) >= count or time.monotonic() > deadline:
                return records
            await asyncio.sleep(0.05)

    def kill(self) -> float:
        """SIGKILL the kernel process, as the out-of-memory killer does; returns when."""
        process = self.serverapp.kernel_manager.get_kernel(self.kernel_id).provisioner.process
        os.kill(process.pid, signal.SIGKILL)
        return time.perf_counter()

    async def next_crash_event(self, seen: int, timeout: float = 30) -> tuple[float, dict[str, Any]]:
        """The crash event after the first ``seen`` ones, and when the event bus delivered it."""
        deadline = time.monotonic() + timeout
        while len(self.crashes) <= seen:
            assert time.monotonic() < deadline, f"no crash event within {timeout} s"
            await asyncio.sleep(0.02)
        return self.crashes[seen]


@pytest.fixture
def notebook(
    api: Api, jp_ws_fetch: Any, jp_serverapp: Any, jp_create_notebook: Callable[[str], Any]
) -> Callable[..., Awaitable[Notebook]]:
    """``await notebook("work/analysis.ipynb")``: that notebook, open with a running kernel (of the kernelspec
    ``kernel``, default python3)."""

    async def open_notebook(path: str, kernel: str = "python3") -> Notebook:
        jp_create_notebook(path)
        return await Notebook(api, jp_ws_fetch, jp_serverapp, path, kernel).open()

    return open_notebook
