"""The REST API under ``/api/ckpt/``, documented in ``docs/rest-api.yml``.

Listing and browsing read the store, never a kernel, so they work while the
kernel is dead. Taking and restoring a checkpoint run in the live kernel.
Every verb is authenticated and authorized against the ``jupyter_ckpt``
resource; the core's errors become HTTP errors with their ``http_status``
in ``http_errors``, and APIHandler writes them as JSON.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import tornado.web
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado.web import HTTPError

from .errors import BadArgument, CheckpointError, UnknownSession
from .recipes import check_mode
from .recovery import ACTIVE, restored
from .store import parse_id
from .timeline import details

if TYPE_CHECKING:
    from .server import CkptServerApp

AUTH_RESOURCE = "jupyter_ckpt"

Verb = TypeVar("Verb", bound=Callable[..., Awaitable[None]])


def http_errors(method: Verb) -> Verb:
    """The one place where the core's errors become HTTP errors, with the status each error class carries."""

    @functools.wraps(method)
    async def wrapper(self: CkptHandler, *args: Any, **kwargs: Any) -> None:
        try:
            await method(self, *args, **kwargs)
        except CheckpointError as e:
            raise HTTPError(e.http_status, str(e)) from e

    return wrapper  # type: ignore[return-value]


def checkpoint_id(text: str) -> int:
    cid = parse_id(text)
    if cid is None:
        raise BadArgument(f"{text!r} is not a checkpoint id: ids are whole numbers")
    return cid


def _optional_text(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise BadArgument(f"{name!r} must be a string or null")
    return value


class CkptHandler(APIHandler):
    auth_resource = AUTH_RESOURCE

    @property
    def ckpt(self) -> CkptServerApp:
        return self.settings["jupyter_ckpt"]  # type: ignore[no-any-return]

    def json_body(self, *required: str) -> dict[str, Any]:
        """The request's JSON object, with every ``required`` field a string."""
        body = self.get_json_body()  # malformed JSON is a 400 already
        if not isinstance(body, dict):
            raise BadArgument("the request body must be a JSON object")
        for name in required:
            if not isinstance(body.get(name), str):
                raise BadArgument(f"the request body needs {name!r}, a string")
        return body

    def reply(self, data: dict[str, Any], status: int = 200) -> None:
        self.set_status(status)
        self.finish(json.dumps(data))


class SessionsHandler(CkptHandler):
    @tornado.web.authenticated
    @authorized
    @http_errors
    async def get(self) -> None:
        sessions = [
            {
                "key": s["key"],
                "path": self.ckpt.api_path(s["key"]),
                "checkpoints": s["checkpoints"],
                "last": s["last"],
                "bytes": s["bytes"],
            }
            for s in self.ckpt.store.sessions()
        ]
        self.reply({"sessions": sessions})


class CheckpointsHandler(CkptHandler):
    @tornado.web.authenticated
    @authorized
    @http_errors
    async def get(self) -> None:
        name = self.get_query_argument("session", None)
        if name is None:
            raise BadArgument("the request needs a 'session': the notebook's path or the session key")
        for key in self.ckpt.session_keys(name):
            try:
                records = self.ckpt.store.checkpoints(key)
            except UnknownSession:
                continue
            remote = self.ckpt.replica.status() if self.ckpt.replica is not None else None
            self.reply({"session": key, "checkpoints": [r.as_dict() for r in records], "remote": remote})
            return
        raise UnknownSession(f"no session {name!r} in the checkpoint store")

    @tornado.web.authenticated
    @authorized
    @http_errors
    async def post(self) -> None:
        body = self.json_body("session", "kernel_id")
        message, tag = _optional_text(body, "message"), _optional_text(body, "tag")
        async with self.ckpt.kernel(body["kernel_id"]) as kernel:
            session = await kernel.evaluate(f"{ACTIVE}.session")
            if session not in self.ckpt.session_keys(body["session"]):
                raise BadArgument(f"kernel {body['kernel_id']} checkpoints {session!r}, not {body['session']!r}")
            cid = await kernel.evaluate(f"__import__('jupyter_ckpt').save({message!r}, {tag!r})")
        self.set_header("Location", url_path_join(self.base_url, "api/ckpt/checkpoints", str(cid)))
        self.reply(self.ckpt.store.get(cid).as_dict(), status=201)


class CheckpointHandler(CkptHandler):
    @tornado.web.authenticated
    @authorized
    @http_errors
    async def get(self, ref: str) -> None:
        self.reply(details(self.ckpt.store, checkpoint_id(ref)))

    @tornado.web.authenticated
    @authorized
    @http_errors
    async def patch(self, ref: str) -> None:
        cid = checkpoint_id(ref)
        body = self.json_body()
        if "tag" not in body:
            raise BadArgument("the request body needs 'tag', a string or null")
        self.ckpt.store.tag(cid, _optional_text(body, "tag"))
        self.reply(self.ckpt.store.get(cid).as_dict())

    @tornado.web.authenticated
    @authorized
    @http_errors
    async def delete(self, ref: str) -> None:
        self.ckpt.store.delete([checkpoint_id(ref)])
        self.set_status(204)
        self.finish()


class RestoreHandler(CkptHandler):
    @tornado.web.authenticated
    @authorized
    @http_errors
    async def post(self, ref: str) -> None:
        cid = self.ckpt.store.get(checkpoint_id(ref)).id
        body = self.json_body("kernel_id")
        replay = _optional_text(body, "replay")
        if replay is not None:
            check_mode(replay)
        async with self.ckpt.kernel(body["kernel_id"]) as kernel:
            result = await kernel.evaluate(restored(f"__import__('jupyter_ckpt').restore({cid}, replay={replay!r})"))
        self.reply({"checkpoint": cid, **result})


class ReplayHandler(CkptHandler):
    @tornado.web.authenticated
    @authorized
    @http_errors
    async def post(self) -> None:
        body = self.json_body("kernel_id")
        async with self.ckpt.kernel(body["kernel_id"]) as kernel:
            outcome = await kernel.evaluate("__import__('jupyter_ckpt').replay()")
        self.reply({"variables": outcome})


class EventsHandler(CkptHandler):
    @tornado.web.authenticated
    @authorized
    @http_errors
    async def get(self) -> None:
        name = self.get_query_argument("session", None)
        keys = self.ckpt.session_keys(name) if name is not None else None
        try:
            since = float(self.get_query_argument("since", "0"))
        except ValueError:
            raise BadArgument("'since' must be a number of seconds since the epoch") from None
        events = [e for e in self.ckpt.recovery.events if e["time"] > since and (keys is None or e["session"] in keys)]
        self.reply({"events": events})


default_handlers = [
    (r"/api/ckpt/sessions", SessionsHandler),
    (r"/api/ckpt/checkpoints", CheckpointsHandler),
    (r"/api/ckpt/checkpoints/([^/]+)", CheckpointHandler),
    (r"/api/ckpt/checkpoints/([^/]+)/restore", RestoreHandler),
    (r"/api/ckpt/replay", ReplayHandler),
    (r"/api/ckpt/events", EventsHandler),
]
