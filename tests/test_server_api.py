"""The REST API under /api/ckpt/, against a real jupyter_server (and, where a kernel is needed, a real kernel)."""

from __future__ import annotations

import asyncio
import json
import os
import platform
import re
import shutil
import sqlite3
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import yaml
from jupyter_server.auth.authorizer import Authorizer
from tornado.routing import PathMatches, RuleRouter
from traitlets import TraitError

from jupyter_ckpt.checkpointer import Checkpointer, Policy

pytest_plugins = ("pytest_jupyter.jupyter_server", "conftest_server")

CKPT = ("api", "ckpt")
VERBS = ("get", "post", "put", "patch", "delete")


@pytest.fixture
def timeline(ckpt_app: Any) -> dict[str, Any]:
    """A notebook's session with two checkpoints, written by the core as a kernel would: n = 1, then n = 2."""
    path = "analysis.ipynb"
    key = ckpt_app.service.session_keys(path)[1]
    module = types.ModuleType("notebook")
    ckpt = Checkpointer(ckpt_app.store, key, module, policy=Policy(every=1))
    module.n = 1
    first = ckpt.after_cell(1, "n = 1", ok=True, duration=0.1)
    module.n, module.words = 2, "two"
    second = ckpt.after_cell(2, "n = 2\nwords = 'two'", ok=True, duration=0.2)
    return {"path": path, "key": key, "ids": [first, second]}


def ckpt_routes(web_app: Any) -> set[tuple[str, str]]:
    """Every (path under /api/ckpt, verb) the server serves, read from tornado's routing table."""
    found = set()
    pending = list(web_app.default_router.rules)
    while pending:
        rule = pending.pop()
        if isinstance(rule.target, RuleRouter):
            pending.extend(rule.target.rules)
        elif isinstance(rule.matcher, PathMatches) and "/api/ckpt/" in rule.matcher.regex.pattern:
            template = re.sub(r"\([^)]*\)", "{id}", rule.matcher.regex.pattern).removesuffix("$")
            path = template.split("/api/ckpt", 1)[1]
            found |= {(path, verb.upper()) for verb in VERBS if _defines(rule.target, verb)}
    return found


def _defines(handler: type, verb: str) -> bool:
    """Whether a handler class (or a jupyter_ckpt base of it) implements ``verb``."""
    return any(verb in vars(c) for c in handler.__mro__ if c.__module__.startswith("jupyter_ckpt"))


async def test_every_endpoint_is_documented(jp_serverapp: Any) -> None:
    spec = yaml.safe_load((Path(__file__).parents[1] / "docs" / "rest-api.yml").read_text())
    documented = {(path, verb.upper()) for path, item in spec["paths"].items() for verb in item if verb in VERBS}
    assert ckpt_routes(jp_serverapp.web_app) == documented


class DenyCheckpoints(Authorizer):
    """A deployment's authorizer that lets users do anything except touch checkpoints."""

    def is_authorized(self, handler: Any, user: Any, action: str, resource: str) -> bool:
        return resource != "jupyter_ckpt"


async def test_every_endpoint_refuses_unauthenticated_and_unauthorized_requests(
    jp_serverapp: Any,
    http_server_client: Any,
    jp_auth_header: dict[str, str],
    jp_base_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    routes = ckpt_routes(jp_serverapp.web_app)
    assert len(routes) >= 8  # sessions, checkpoints (GET, POST), one (GET, PATCH, DELETE), restore, events

    async def unrefused(headers: dict[str, str]) -> dict[str, int]:
        """The endpoints that answer such a request with anything but 403, and what they answer."""
        out = {}
        for path, verb in routes:
            url = f"{jp_base_url}api/ckpt{path.replace('{id}', '1')}"
            body = "{}" if verb in ("POST", "PATCH") else None
            response = await http_server_client.fetch(url, method=verb, body=body, headers=headers, raise_error=False)
            if response.code != 403:
                out[f"{verb} {url}"] = response.code
        return out

    assert await unrefused({}) == {}
    unknown = await http_server_client.fetch(f"{jp_base_url}api/ckpt/no-such-endpoint", raise_error=False)
    assert unknown.code == 403  # what is not there is not told to whoever is not signed in
    authorizer = DenyCheckpoints(parent=jp_serverapp, identity_provider=jp_serverapp.identity_provider)
    monkeypatch.setitem(jp_serverapp.web_app.settings, "authorizer", authorizer)
    assert await unrefused(jp_auth_header) == {}


async def test_browse_a_timeline_from_the_store(api: Any, timeline: dict[str, Any]) -> None:
    first, second = timeline["ids"]
    (session,) = (await api("GET", *CKPT, "sessions"))["sessions"]
    assert (session["key"], session["path"], session["checkpoints"]) == (timeline["key"], "analysis.ipynb", 2)
    assert session["bytes"] > 0 and session["last"] > 0

    listing = await api("GET", *CKPT, "checkpoints", params={"session": timeline["path"]})
    assert listing["session"] == timeline["key"]
    assert [(r["id"], r["cell"], r["trigger"], r["status"]) for r in listing["checkpoints"]] == [
        (first, 1, "cell", "ok"),
        (second, 2, "cell", "ok"),
    ]
    # The store's size against its retention budget, for the sidebar (free space changes from call to call).
    store = listing.pop("store")
    assert 0 < store["size"] < store["budget"] and store["floor"] < store["free"] and store["why"]
    # The key itself names the session too.
    by_key = await api("GET", *CKPT, "checkpoints", params={"session": timeline["key"]})
    assert by_key.pop("store")["budget"] == store["budget"] and by_key == listing

    details = await api("GET", *CKPT, "checkpoints", str(second))
    assert details["id"] == second and details["parent"] == first
    assert details["variables"]["n"]["type"] == "int" and details["variables"]["n"]["repr"] == "2"
    assert details["variables"]["words"]["repr"] == "'two'"
    assert [(c["count"], c["source"], c["status"]) for c in details["cells"]] == [(2, "n = 2\nwords = 'two'", "ok")]
    assert list(details["diff"]["added"]) == ["words"]
    assert details["diff"]["changed"]["n"]["before"]["repr"] == "1"
    assert details["diff"]["changed"]["n"]["after"]["repr"] == "2"
    assert details["diff"]["removed"] == {}
    assert details["versions"]["python"] == platform.python_version()  # the Python it was taken under
    oldest = await api("GET", *CKPT, "checkpoints", str(first))
    assert list(oldest["diff"]["added"]) == ["n"] and [c["source"] for c in oldest["cells"]] == ["n = 1"]


async def test_tag_and_delete(api: Any, timeline: dict[str, Any]) -> None:
    first, second = timeline["ids"]
    tagged = await api("PATCH", *CKPT, "checkpoints", str(first), body={"tag": "baseline"})
    assert tagged["id"] == first and tagged["tag"] == "baseline"
    untagged = await api("PATCH", *CKPT, "checkpoints", str(first), body={"tag": None})
    assert untagged["tag"] is None

    response = await api.fetch(*CKPT, "checkpoints", str(first), method="DELETE")
    assert response.code == 204 and response.body == b""
    listing = await api("GET", *CKPT, "checkpoints", params={"session": timeline["path"]})
    assert [(r["id"], r["parent"]) for r in listing["checkpoints"]] == [(second, None)]
    assert await api.error("GET", *CKPT, "checkpoints", str(first)) == (404, f"no checkpoint {first}")


async def test_malformed_requests_get_clear_errors_and_change_nothing(
    api: Any, timeline: dict[str, Any], http_server_client: Any, jp_auth_header: dict[str, str], jp_base_url: str
) -> None:
    first, _ = timeline["ids"]
    one = (*CKPT, "checkpoints", str(first))
    before = await api("GET", *CKPT, "checkpoints", params={"session": timeline["path"]})
    cases: list[tuple[tuple[Any, ...], dict[str, Any], int, str]] = [
        (("GET", *CKPT, "checkpoints"), {}, 400, "needs a 'session'"),
        (("GET", *CKPT, "no-such-endpoint"), {}, 404, "no endpoint /api/ckpt/no-such-endpoint"),
        (("POST", *CKPT, "checkpoints", str(first), "undo"), {"body": {}}, 404, "no endpoint"),
        (("GET", *CKPT, "checkpoints"), {"params": {"session": "/etc/passwd"}}, 404, "no session"),
        # A session name that names none was looked up anyway, and said 404 "no session ''".
        (("GET", *CKPT, "checkpoints"), {"params": {"session": ""}}, 400, "a session name needs at least one"),
        (("POST", *CKPT, "checkpoints"), {"body": {"session": "  ", "kernel_id": "x"}}, 400, "a session name needs"),
        (("GET", *CKPT, "checkpoints", "abc"), {}, 400, "not a checkpoint id"),
        (("GET", *CKPT, "checkpoints", "-1"), {}, 400, "not a checkpoint id"),
        (("GET", *CKPT, "checkpoints", "1.5"), {}, 400, "not a checkpoint id"),
        (("GET", *CKPT, "checkpoints", "9" * 30), {}, 400, "whole numbers of at most 18 digits"),  # "are whole"
        (("DELETE", *CKPT, "checkpoints", "999"), {}, 404, "no checkpoint 999"),
        (("DELETE", *CKPT, "checkpoints", "latest"), {}, 400, "not a checkpoint id"),
        (("PATCH", *one), {"body": "[1]"}, 400, "must be a JSON object"),
        (("PATCH", *one), {"body": {}}, 400, "needs 'tag'"),
        (("PATCH", *one), {"body": {"tag": 5}}, 400, "must be a string or null"),
        # A field the endpoint does not take was ignored, and the reply said 200 with nothing done.
        (("PATCH", *one), {"body": {"tags": "x"}}, 400, "unknown field 'tags' in the request body, which takes 'tag'"),
        (("PATCH", *one), {"body": {"tag": "x", "message": "y"}}, 400, "unknown field 'message'"),
        # A field given twice: the last one was read, and the reply said 200.
        (("PATCH", *one), {"body": '{"tag": "a", "tag": "b"}'}, 400, "'tag' is given 2 times in the request body"),
        (("POST", *one, "restore"), {"body": {"kernel_id": "x", "only": ["n"]}}, 400, "unknown field 'only'"),
        (("POST", *one, "restore"), {"body": {"kernel_id": "x", "replay": True}}, 400, "'replay' must be a string"),
        (("POST", *CKPT, "replay"), {"body": {"kernel_id": "x", "cells": [1]}}, 400, "unknown field 'cells'"),
        (
            ("POST", *CKPT, "checkpoints"),
            {"body": {"session": timeline["path"], "kernel_id": "x", "label": "y"}},
            400,
            "which takes 'session', 'kernel_id', 'message', 'tag'",
        ),
        *[
            (("PATCH", *one), {"body": {"tag": tag}}, 400, why)
            for tag, why in [
                ("last-good", "cannot be a tag"),
                ("3", "cannot be a tag"),
                ("-1", "cannot be a tag"),
                ("", "at least one character"),
                (" 5", "starts or ends with a space"),
            ]
        ],
        (("POST", *one, "restore"), {"body": ""}, 400, "must be a JSON object"),
        (("POST", *one, "restore"), {"body": {}}, 400, "needs 'kernel_id'"),
        (("POST", *one, "restore"), {"body": {"kernel": "x"}}, 400, "unknown field 'kernel'"),
        (("POST", *CKPT, "checkpoints", "999", "restore"), {"body": {"kernel_id": "x"}}, 404, "no checkpoint 999"),
        (("POST", *CKPT, "checkpoints"), {"body": {"session": timeline["path"]}}, 400, "needs 'kernel_id'"),
        (
            ("POST", *CKPT, "checkpoints"),
            {"body": {"session": timeline["path"], "kernel_id": "no-such-kernel"}},
            404,
            "no running kernel",
        ),
    ]
    for (method, *parts), kwargs, status, message in cases:
        code, text = await api.error(method, *parts, **kwargs)
        assert code == status and message in text, (method, parts, kwargs, code, text)

    # A query parameter given twice: the last one was read.
    for query, name in [
        (f"checkpoints?session=nope.ipynb&session={timeline['path']}", "session"),
        ("events?since=0&since=1e9", "since"),
        ("offer?kernel_id=a&kernel_id=b&kernel_id=c", "kernel_id"),
    ]:
        url = f"{jp_base_url}api/ckpt/{query}"
        response = await http_server_client.fetch(url, headers=jp_auth_header, raise_error=False)
        assert response.code == 400, (query, response.body)
        assert f"'{name}' is given" in json.loads(response.body)["message"], (query, response.body)

    # A body that is no JSON, or no text at all (a byte that is not UTF-8 was a 500 with a traceback in the log).
    for raw in (b"{", b'{"tag": "\xff"}', b"\xff\xfe"):
        url = f"{jp_base_url}api/ckpt/checkpoints/{first}"
        response = await http_server_client.fetch(
            url, method="PATCH", body=raw, headers=jp_auth_header, raise_error=False
        )
        assert response.code == 400, (raw, response.code, response.body)
        assert "not valid JSON" in json.loads(response.body)["message"], (raw, response.body)

    # Spaces around an id are not part of it, as around any REF.
    padded = await http_server_client.fetch(f"{jp_base_url}api/ckpt/checkpoints/%20{first}%20", headers=jp_auth_header)
    assert json.loads(padded.body)["id"] == first

    # An id that tries to climb out of the URL, encoded as a browser's encodeURIComponent does.
    url = f"{jp_base_url}api/ckpt/checkpoints/..%2F{first}"
    for method in ("GET", "DELETE"):
        response = await http_server_client.fetch(url, method=method, headers=jp_auth_header, raise_error=False)
        assert response.code == 400 and "not a checkpoint id" in json.loads(response.body)["message"]

    after = await api("GET", *CKPT, "checkpoints", params={"session": timeline["path"]})
    # The free space of the disk under the store is the machine's, which other processes change meanwhile.
    # The disk's free space and free files change beside the test (other programs write there).
    steady = {"free": 0, "files_free": 0}
    assert {**after, "store": {**after["store"], **steady}} == {**before, "store": {**before["store"], **steady}}


async def test_writes_waiting_for_the_catalog_do_not_hold_up_other_requests(
    api: Any, timeline: dict[str, Any], ckpt_app: Any
) -> None:
    first, second = timeline["ids"]
    # Another writer (a kernel committing a checkpoint, say) holds the catalog's write lock.
    holder = sqlite3.connect(ckpt_app.store.root / "catalog.sqlite", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        tagging = asyncio.create_task(api("PATCH", *CKPT, "checkpoints", str(first), body={"tag": "held"}))
        deleting = asyncio.ensure_future(api.fetch(*CKPT, "checkpoints", str(second), method="DELETE"))
        await asyncio.sleep(0.5)  # both reach the store and wait for the lock (up to SQLite's 30 s timeout)
        # The server answers meanwhile: its event loop is not waiting on SQLite.
        assert "started" in await api("GET", "api", "status")
        assert await api("GET", *CKPT, "events") == {"events": [], "restoring": []}
        assert not tagging.done() and not deleting.done()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert (await tagging)["tag"] == "held"
    assert (await deleting).code == 204
    listing = await api("GET", *CKPT, "checkpoints", params={"session": timeline["path"]})
    assert [(r["id"], r["tag"]) for r in listing["checkpoints"]] == [(first, "held")]


async def test_a_tampered_checkpoint_is_refused_with_409(api: Any, timeline: dict[str, Any], ckpt_app: Any) -> None:
    _, second = timeline["ids"]
    with sqlite3.connect(ckpt_app.store.root / "catalog.sqlite") as db:
        db.execute('UPDATE checkpoints SET manifest = replace(manifest, \'"repr": "2"\', \'"repr": "3"\')')
    code, message = await api.error("GET", *CKPT, "checkpoints", str(second))
    assert code == 409 and re.search(rf"checkpoint {second}: .*signature", message)


async def test_checkpoint_and_restore_a_live_kernel(api: Any, notebook: Any, jp_base_url: str) -> None:
    nb = await notebook("work/analysis.ipynb")
    await nb.ok("n = 1")
    (first,) = await nb.wait_for_checkpoints(1)
    await nb.ok("n = 2")
    await nb.wait_for_checkpoints(2)

    body = {"session": nb.path, "kernel_id": nb.kernel_id, "message": "before cleanup", "tag": "two"}
    response = await api.fetch(*CKPT, "checkpoints", method="POST", body=json.dumps(body))
    record = json.loads(response.body)
    location = response.headers["Location"]
    assert response.code == 201 and location == f"{jp_base_url}api/ckpt/checkpoints/{record['id']}"
    assert (record["trigger"], record["tag"], record["message"]) == ("manual", "two", "before cleanup")

    restore = (*CKPT, "checkpoints", str(first["id"]), "restore")
    # While a cell runs, a restore is refused rather than queued behind it to happen at some later moment.
    long_cell = asyncio.create_task(nb.run("import time; time.sleep(3)"))
    await asyncio.sleep(0.5)
    code, message = await api.error("POST", *restore, body={"kernel_id": nb.kernel_id})
    assert code == 409 and "is running a cell" in message
    await long_cell
    # Each cell's own checkpoint, taken once the kernel is idle (cells run back to back would share one).
    await nb.wait_for_checkpoints(4)
    assert await nb.value("n") == 2
    await nb.wait_for_checkpoints(5)

    restored = await api("POST", *restore, body={"kernel_id": nb.kernel_id})
    assert restored["checkpoint"] == first["id"] and "restored kernel checkpoint #" in restored["summary"]
    assert await nb.value("n") == 1
    assert (await nb.checkpoints())[-1]["trigger"] == "restore"

    wrong = {"session": "other.ipynb", "kernel_id": nb.kernel_id}
    code, message = await api.error("POST", *CKPT, "checkpoints", body=wrong)
    assert code == 400 and "not 'other.ipynb'" in message

    # The kernel gone, the timeline is still there to browse.
    await nb.wait_for_checkpoints(7)
    sessions = await api("GET", "api", "sessions")
    await api.fetch("api", "sessions", sessions[0]["id"], method="DELETE")
    listing = await api("GET", *CKPT, "checkpoints", params={"session": nb.path})
    triggers = [r["trigger"] for r in listing["checkpoints"]]
    assert triggers == ["cell", "cell", "manual", "cell", "cell", "restore", "cell"]
    details = await api("GET", location.removeprefix(jp_base_url))
    assert details["id"] == record["id"] and details["variables"]["n"]["repr"] == "2"


async def test_a_restore_offers_replay_and_the_replay_endpoint_runs_it(api: Any, notebook: Any) -> None:
    nb = await notebook("work/gen.ipynb")
    await nb.ok("gen = (i * i for i in range(5))\nfirst = next(gen)")
    (made,) = await nb.wait_for_checkpoints(1)
    await nb.ok("del gen\nfirst = -1")
    await nb.wait_for_checkpoints(2)
    code, message = await api.error("POST", *CKPT, "replay", body={"kernel_id": nb.kernel_id})
    assert code == 400 and "nothing to replay" in message

    restore = (*CKPT, "checkpoints", str(made["id"]), "restore")
    code, message = await api.error("POST", *restore, body={"kernel_id": nb.kernel_id, "replay": "sometimes"})
    assert code == 400 and "'replay' must be one of ask, auto, never" in message
    restored = await api("POST", *restore, body={"kernel_id": nb.kernel_id})
    assert "not restored: gen" in restored["summary"] and restored["replayable"] == "gen (cells [1])"
    # The code that would run, shown before anything runs: the cell as it was recorded.
    assert restored["replay_cells"] == [{"count": 1, "source": "gen = (i * i for i in range(5))\nfirst = next(gen)"}]
    assert "[1] gen = (i * i for i in range(5))\n        first = next(gen)" in restored["summary"]
    assert await nb.value("('gen' in dir(), first)") == (False, 0)
    replayed = await api("POST", *CKPT, "replay", body={"kernel_id": nb.kernel_id})
    assert replayed == {"variables": {"gen": "replayed"}}
    assert await nb.value("(next(gen), first)") == (1, 0)  # the generator rebuilt; the restored value kept


async def test_a_store_this_version_cannot_use_fails_each_request_as_json(
    api: Any, jp_server_config: Any, ckpt_app: Any
) -> None:
    root = Path(os.environ["JUPYTER_CKPT_DIR"])
    root.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(root / "catalog.sqlite") as db:  # written by a future jupyter-ckpt
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("INSERT INTO meta VALUES ('format', '7')")
    for _ in range(2):  # and again: the server runs on, refusing the store each time
        code, message = await api.error("GET", *CKPT, "sessions")
        assert code == 409 and "newer jupyter-ckpt (format 7" in message
    assert await ckpt_app.stop_extension() is None  # stops cleanly, with nothing to stop


async def test_a_new_kernel_offers_what_the_last_one_left_until_it_restores(api: Any, notebook: Any) -> None:
    first = await notebook("work/culled.ipynb")
    await first.ok("model = {'weights': [1, 2, 3]}")
    (left,) = await first.wait_for_checkpoints(1)
    assert await api("GET", *CKPT, "offer", params={"kernel_id": first.kernel_id}) == {"offer": None}
    # The kernel goes, as a culler or a restart makes it go; the notebook opens again with a new kernel.
    sessions = await api("GET", "api", "sessions")
    await api.fetch("api", "sessions", sessions[0]["id"], method="DELETE")
    second = await notebook("work/culled.ipynb")
    assert await second.value("'model' in dir()") is False
    offer = (await api("GET", *CKPT, "offer", params={"kernel_id": second.kernel_id}))["offer"]
    assert (offer["checkpoint"], offer["number"], offer["cell"], offer["variables"]) == (left["id"], 1, 1, 1)
    await api("POST", *CKPT, "checkpoints", str(offer["checkpoint"]), "restore", body={"kernel_id": second.kernel_id})
    assert await second.value("model") == {"weights": [1, 2, 3]}
    assert await api("GET", *CKPT, "offer", params={"kernel_id": second.kernel_id}) == {"offer": None}
    code, message = await api.error("GET", *CKPT, "offer")
    assert code == 400 and "'kernel_id'" in message


async def test_a_checkpoint_the_store_refuses_is_the_server_s_failure_and_loses_nothing(
    api: Any, notebook: Any, ckpt_app: Any
) -> None:
    """A checkpoint asked for over REST that the store refuses to hold (its directory of files being written made a
    file, as a disk gone bad can leave it) is a 500 naming why, not a 400 that blames the request; and once the store
    is mended the same request checkpoints the state."""
    nb = await notebook("refused.ipynb")
    await nb.ok("n = 1")
    await nb.wait_for_checkpoints(1)
    body = {"session": nb.path, "kernel_id": nb.kernel_id, "tag": "after-mend"}
    tmp = ckpt_app.store.blobs.tmp
    shutil.rmtree(tmp)
    tmp.write_text("")
    try:
        code, message = await api.error("POST", *CKPT, "checkpoints", body=body)
        assert code == 500 and message.startswith("checkpoint failed: cannot write to the checkpoint store"), message
    finally:
        tmp.unlink()
        tmp.mkdir(mode=0o700)
    record = await api("POST", *CKPT, "checkpoints", body=body)
    assert record["tag"] == "after-mend"


async def test_a_store_file_the_kernel_cannot_read_does_not_stop_checkpoints(
    api: Any, ckpt_app: Any, jp_create_notebook: Any
) -> None:
    """A writer's result record in the store made a directory (a damaged store): the kernel's answer was a 502,
    "the kernel raised IsADirectoryError", then a 500 naming the file, and the notebook was never checkpointed.
    The file is passed over (the kernel says so in its output) and the checkpoint is taken."""
    record = ckpt_app.store.blobs.tmp / "result.999999999.0.json"  # of a writer whose kernel is gone
    record.mkdir()
    jp_create_notebook("damaged.ipynb")
    model = {"path": "damaged.ipynb", "type": "notebook", "kernel": {"name": "python3"}}
    kernel_id = (await api("POST", "api", "sessions", body=model))["kernel"]["id"]
    body = {"session": "damaged.ipynb", "kernel_id": kernel_id, "tag": "taken"}
    assert (await api("POST", *CKPT, "checkpoints", body=body))["tag"] == "taken"
    listing = await api("GET", *CKPT, "checkpoints", params={"session": "damaged.ipynb"})
    assert [r["tag"] for r in listing["checkpoints"]] == ["taken"] and record.is_dir()


async def test_a_store_on_a_read_only_disk_is_browsed_and_a_change_is_refused_as_json(api: Any) -> None:
    """An archived store, a snapshot, a disk mounted read-only: the sidebar and the REST API got 409 for every
    request, the timeline too, where the command line lists it."""
    root = Path(os.environ["JUPYTER_CKPT_DIR"])
    write = (
        "import types\nfrom jupyter_ckpt.checkpointer import Checkpointer\nfrom jupyter_ckpt.config import open_store\n"
        "module = types.ModuleType('notebook')\nmodule.kept = [1, 2]\n"
        "print(Checkpointer(open_store(), 'archived', module).save(tag='final'))\n"
    )
    written = subprocess.run([sys.executable, "-c", write], capture_output=True, text=True, check=True)
    cid = int(written.stdout)
    subprocess.run(["mount", "--bind", str(root), str(root)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(root)], check=True)
        (session,) = (await api("GET", *CKPT, "sessions"))["sessions"]
        assert (session["key"], session["checkpoints"]) == ("archived", 1)
        listing = await api("GET", *CKPT, "checkpoints", params={"session": "archived"})
        assert [(r["id"], r["tag"]) for r in listing["checkpoints"]] == [(cid, "final")]
        details = await api("GET", *CKPT, "checkpoints", str(cid))
        assert details["variables"]["kept"]["repr"] == "[1, 2]"
        code, message = await api.error("DELETE", *CKPT, "checkpoints", str(cid))
        assert code == 500 and "cannot be written" in message, message
        listing = await api("GET", *CKPT, "checkpoints", params={"session": "archived"})
        assert [r["id"] for r in listing["checkpoints"]] == [cid]
    finally:
        subprocess.run(["umount", "-l", str(root)], check=True)  # the server keeps the catalog open


async def test_a_server_option_set_to_a_value_it_cannot_take_is_refused(ckpt_app: Any) -> None:
    """``kernel_timeout = 0`` made every request to a kernel time out at once (502); a negative poll interval was
    handed to the kernel restarter."""
    for name, value in [
        ("kernel_timeout", 0.0),
        ("kernel_timeout", float("nan")),
        ("kernel_poll_interval", -1.0),
        ("remote_poll", -1.0),
    ]:
        before = getattr(ckpt_app, name)
        with pytest.raises(TraitError, match=f"c.CkptServerApp.{name} must be"):
            setattr(ckpt_app, name, value)
        assert getattr(ckpt_app, name) == before
