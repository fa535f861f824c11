"""The REST API under ``/api/ckpt/``, documented in ``docs/rest-api.yml``.

Each handler parses its request and awaits one ``CheckpointService`` call,
which does the work off the event loop. Listing and browsing read the store,
never a kernel, so they work while the kernel is dead. Taking and restoring a
checkpoint run in the live kernel. Every verb is authenticated and authorized
against the ``jupyter_ckpt`` resource; the core's errors become HTTP errors
with their ``http_status`` in ``http_errors``, and APIHandler writes them as JSON.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import tornado.web
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado.web import HTTPError

from .errors import BadArgument, CheckpointError
from .service import CheckpointService
from .session import check_text
from .store import parse_id

AUTH_RESOURCE = "jupyter_ckpt"
# The key of the CheckpointService in the web application's settings.
SERVICE = "jupyter_ckpt_service"

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
    cid = parse_id(text.strip())  # spaces around a REF are not part of it, on every surface
    if cid is None:
        raise BadArgument(f"{text!r} is not a checkpoint id: ids are whole numbers of at most 18 digits")
    return cid


def _given_once(fields: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose every field is given once, as a dict."""
    names = [name for name, _ in fields]
    for name in names:
        if names.count(name) > 1:
            raise BadArgument(f"{name!r} is given {names.count(name)} times in the request body; give it once")
    return dict(fields)


class CkptHandler(APIHandler):
    auth_resource = AUTH_RESOURCE

    @property
    def ckpt(self) -> CheckpointService:
        return self.settings[SERVICE]  # type: ignore[no-any-return]

    def json_body(self, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict[str, Any]:
        """The request's JSON object: every ``required`` field a string, each ``optional`` one a string or null
        when given, and no other field (a misspelt one was ignored: ``{"tags": "x"}`` changed nothing, and said
        200)."""
        try:  # once, refusing a field given twice (get_json_body read the last; a byte not UTF-8 was a 500)
            body = json.loads(self.request.body, object_pairs_hook=_given_once) if self.request.body.strip() else None
        except ValueError as e:  # a JSONDecodeError, or a UnicodeDecodeError for bytes that are not text
            raise BadArgument(f"the request body is not valid JSON: {e}") from None
        if not isinstance(body, dict):
            raise BadArgument("the request body must be a JSON object")
        unknown = [name for name in body if name not in required + optional]
        if unknown:
            fields = ", ".join(repr(name) for name in required + optional)
            raise BadArgument(f"unknown field {unknown[0]!r} in the request body, which takes {fields}")
        for name in required:
            if not isinstance(body.get(name), str):
                raise BadArgument(f"the request body needs {name!r}, a string")
        for name in optional:
            if body.get(name) is not None and not isinstance(body[name], str):
                raise BadArgument(f"{name!r} must be a string or null")
        for name, value in body.items():  # JSON can escape half a character; the catalog cannot store it
            if isinstance(value, str):
                check_text(value, repr(name))
        return body

    def query(self, name: str) -> str | None:
        """A query parameter, given at most once (``?session=a&session=b`` read b); None when absent."""
        values = self.get_query_arguments(name)
        if len(values) > 1:
            raise BadArgument(f"{name!r} is given {len(values)} times in the query; give it once")
        return values[0] if values else None

    def reply(self, data: dict[str, Any], status: int = 200) -> None:
        self.set_status(status)
        self.finish(json.dumps(data))


class SessionsHandler(CkptHandler):
    @tornado.web.authenticated
    @authorized
    @http_errors
    async def get(self) -> None:
        self.reply({"sessions": await self.ckpt.sessions()})


class CheckpointsHandler(CkptHandler):
    @tornado.web.authenticated
    @authorized
    @http_errors
    async def get(self) -> None:
        name = self.query("session")
        if name is None:
            raise BadArgument("the request needs a 'session': the notebook's path or the session key")
        self.reply(await self.ckpt.checkpoints(name))

    @tornado.web.authenticated
    @authorized
    @http_errors
    async def post(self) -> None:
        body = self.json_body(("session", "kernel_id"), ("message", "tag"))
        record = await self.ckpt.save(body["session"], body["kernel_id"], body.get("message"), body.get("tag"))
        self.set_header("Location", url_path_join(self.base_url, "api/ckpt/checkpoints", str(record["id"])))
        self.reply(record, status=201)


class CheckpointHandler(CkptHandler):
    @tornado.web.authenticated
    @authorized
    @http_errors
    async def get(self, ref: str) -> None:
        self.reply(await self.ckpt.details(checkpoint_id(ref)))

    @tornado.web.authenticated
    @authorized
    @http_errors
    async def patch(self, ref: str) -> None:
        cid = checkpoint_id(ref)
        body = self.json_body((), ("tag",))
        if "tag" not in body:
            raise BadArgument("the request body needs 'tag', a string or null")
        self.reply(await self.ckpt.tag(cid, body["tag"]))

    @tornado.web.authenticated
    @authorized
    @http_errors
    async def delete(self, ref: str) -> None:
        await self.ckpt.delete(checkpoint_id(ref))
        self.set_status(204)
        self.finish()


class RestoreHandler(CkptHandler):
    @tornado.web.authenticated
    @authorized
    @http_errors
    async def post(self, ref: str) -> None:
        cid = checkpoint_id(ref)
        body = self.json_body(("kernel_id",), ("replay",))
        self.reply(await self.ckpt.restore(cid, body["kernel_id"], body.get("replay")))


class ReplayHandler(CkptHandler):
    @tornado.web.authenticated
    @authorized
    @http_errors
    async def post(self) -> None:
        body = self.json_body(("kernel_id",))
        self.reply({"variables": await self.ckpt.replay(body["kernel_id"])})


class OfferHandler(CkptHandler):
    @tornado.web.authenticated
    @authorized
    @http_errors
    async def get(self) -> None:
        kernel_id = self.query("kernel_id")
        if kernel_id is None:
            raise BadArgument("the request needs a 'kernel_id'")
        self.reply({"offer": await self.ckpt.offer(kernel_id)})


class EventsHandler(CkptHandler):
    @tornado.web.authenticated
    @authorized
    @http_errors
    async def get(self) -> None:
        name, since_text = self.query("session"), self.query("since")
        try:
            since = 0.0 if since_text is None else float(since_text)
            if not math.isfinite(since):
                raise ValueError
        except ValueError:
            raise BadArgument("'since' must be a number of seconds since the epoch") from None
        self.reply(self.ckpt.events_since(since, name))


class UnknownHandler(CkptHandler):
    """Any other path under ``/api/ckpt/``: a 404 in JSON, as every error of this API is."""

    @tornado.web.authenticated
    def _unknown(self, rest: str | None = None) -> None:
        raise HTTPError(404, f"no endpoint /api/ckpt{rest or ''} in the jupyter-ckpt API (docs/rest-api.yml)")

    get = post = put = patch = delete = _unknown


default_handlers = [
    (r"/api/ckpt/sessions", SessionsHandler),
    (r"/api/ckpt/checkpoints", CheckpointsHandler),
    (r"/api/ckpt/checkpoints/([^/]+)", CheckpointHandler),
    (r"/api/ckpt/checkpoints/([^/]+)/restore", RestoreHandler),
    (r"/api/ckpt/replay", ReplayHandler),
    (r"/api/ckpt/events", EventsHandler),
    (r"/api/ckpt/offer", OfferHandler),
    (r"/api/ckpt(/.*)?", UnknownHandler),
]
