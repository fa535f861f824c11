"""The remote tier against a real S3-protocol server: moto's server mode, on loopback, started here."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import sqlite3
import threading
import time
import types
from pathlib import Path
from typing import Any

import fsspec.config
import numpy as np
import pytest
from conftest import cli
from objectstore import NOTEBOOK, S3, machine, notebook, objects
from oracle import digest

from jupyter_ckpt import remote as remote_module
from jupyter_ckpt.capture import blob_keys
from jupyter_ckpt.checkpointer import Checkpointer
from jupyter_ckpt.errors import IntegrityError, RemoteError
from jupyter_ckpt.remote import Remote, Replica
from jupyter_ckpt.remote_catalog import RemoteCatalog
from jupyter_ckpt.restore import restore_namespace
from jupyter_ckpt.retention import Limits
from jupyter_ckpt.store import Store, load_secret


def test_a_kernel_on_another_machine_restores_what_the_first_one_left(kernels: Any, s3: S3, jupyter_dirs: Path) -> None:
    a = kernels("analysis.ipynb", JUPYTER_CKPT_DIR=str(jupyter_dirs / "machine-a"))
    a.ok("%load_ext jupyter_ckpt\n%checkpoint auto on")
    a.ok(NOTEBOOK)
    a.ok("box.v.append(4)\nx = total(data)")
    a.ok("y = 1")
    a.ok("%checkpoint wait")
    status = a.ok("%checkpoint status")
    assert "0 checkpoints (0 B) not uploaded yet" in status
    want = a.value("(x, total(data), box.v, view is not None and view.base is data, same['data'] is data)")
    a.kill()  # the machine is gone, and its disk with it
    shutil.rmtree(jupyter_dirs / "machine-a")

    b = kernels("analysis.ipynb", JUPYTER_CKPT_DIR=str(jupyter_dirs / "machine-b"))
    b.ok("%load_ext jupyter_ckpt")
    listing = b.ok("%checkpoint list")
    assert "box" in listing and "x" in listing
    b.ok("%checkpoint restore last-good")
    assert b.value("(x, total(data), box.v, view.base is data, same['data'] is data)") == want
    history = b.ok("%checkpoint history")  # the cells came with the state: B's go on from A's
    assert history.index("box.v.append(4)") < history.index("y = 1") < history.index("restore last-good")


def test_checkpoints_go_on_while_the_store_is_down_and_the_backlog_uploads_after(
    kernels: Any, s3: S3, jupyter_dirs: Path
) -> None:
    k = kernels("down.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto on\na = 1")
    k.ok("%checkpoint wait")
    s3.stop()
    try:
        for i in range(3):
            assert k.ok(f"a = {i + 2}\nprint(a)").startswith(str(i + 2))  # cells run and print as ever
        deadline = time.time() + 120
        said = ""
        while "cannot be used" not in said and time.time() < deadline:
            said += k.run("b = 0").stderr
            time.sleep(0.2)
        assert said.count("cannot be used") == 1, said  # one clear message, not one per cell or retry
        assert "Checkpoints go on locally" in said
        status = k.ok("%checkpoint status")
        assert re.search(r": [1-9]\d* checkpoints \(.*\) not uploaded yet", status), status
        failed = k.run("%checkpoint wait")  # wait() promises the remote has everything: it says it cannot
        assert failed.stderr.startswith("UsageError: the checkpoint store s3://") and "cannot be used" in failed.stderr
    finally:
        s3.start()
    k.ok("%checkpoint wait")  # retries with backoff reach the store again, and wait() sees it all uploaded
    assert "0 checkpoints (0 B) not uploaded yet" in k.ok("%checkpoint status")
    other, replica = machine(jupyter_dirs / "machine-c", s3)
    replica.pull()
    mine = [
        r.changed
        for r in Store(jupyter_dirs / "store", load_secret(jupyter_dirs / "shared-secret")).checkpoints("down.ipynb")
    ]
    assert [r.changed for r in other.checkpoints("down.ipynb")] == mine


def test_an_unusable_store_gets_one_clear_error(s3: S3, jupyter_dirs: Path) -> None:
    store, _ = machine(jupyter_dirs / "a", s3)
    notebook(store).save()
    no_bucket = Replica(store, Remote("s3://no-such-bucket-here/x"))
    with pytest.raises(RemoteError, match=r"s3://no-such-bucket-here/x cannot be used .*check that the bucket exists"):
        no_bucket.push()
    with pytest.raises(RemoteError, match=r"is not a store URL|needs a client"):
        Remote("nosuchscheme://bucket/x")


def test_a_store_that_takes_connections_and_never_answers_is_said_once_and_holds_nothing_up(
    jupyter_dirs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hung proxy: every request is read until it times out. botocore's defaults (60 s a read, retried) made a
    pull take many minutes, and each look at the timeline waited a minute for it. Here a read times out after
    1 s (10 s by default) so that the test is short."""
    import socket

    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):  # closed at the end
            while True:
                held.append(listener.accept()[0])  # and never answered

    accepting = threading.Thread(target=accept, daemon=True)
    accepting.start()
    for name, value in {
        "AWS_ACCESS_KEY_ID": "a",
        "AWS_SECRET_ACCESS_KEY": "b",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{listener.getsockname()[1]}",
    }.items():
        monkeypatch.setenv(name, value)
    assert remote_module.S3_TIMEOUTS["read_timeout"] == 10
    monkeypatch.setitem(remote_module.S3_TIMEOUTS, "read_timeout", 1)
    said: list[str] = []
    store = Store(jupyter_dirs / "a", load_secret(jupyter_dirs / "shared-secret"))
    replica = Replica(store, Remote("s3://hung/x"), notify=said.append)
    ckpt = notebook(store, replica)
    ckpt.save()
    started = time.monotonic()
    assert ckpt.checkpoints() and time.monotonic() - started < 30  # waited for the pull to fail, once
    with pytest.raises(RemoteError, match="Read timeout"):
        replica.flush()
    assert time.monotonic() - started < 60
    ckpt.module.y = 2
    ckpt.save()
    again = time.monotonic()
    assert len(ckpt.checkpoints()) == 2 and time.monotonic() - again < 1  # the next look does not wait again
    assert sum("cannot be used" in line for line in said) == 1, said  # the pull's and the uploads' failures: once
    replica.stop()
    listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept(); close() alone does not, on Linux
    listener.close()
    accepting.join()
    for connection in held:
        connection.close()


def test_wrong_credentials_are_refused_with_a_clear_error(jupyter_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that checks signatures (moto with authentication on, in its own process) refuses unknown keys."""
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"INITIAL_NO_AUTH_ACTION_COUNT": "0", "PATH": "/usr/bin:/bin"}
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        for name, value in {
            "AWS_ACCESS_KEY_ID": "wrong",
            "AWS_SECRET_ACCESS_KEY": "wrong",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        }.items():
            monkeypatch.setenv(name, value)
        store = Store(jupyter_dirs / "a", load_secret(jupyter_dirs / "shared-secret"))
        notebook(store).save()
        with pytest.raises(RemoteError, match="access denied, check the credentials"):
            Replica(store, Remote(f"s3://bucket-{port}/x")).push()
        assert RemoteCatalog(store).behind()[0] == 1  # nothing was lost: it is still waiting to be uploaded
    finally:
        server.terminate()
        server.wait(10)


def test_a_changed_object_in_the_bucket_is_refused(s3: S3, jupyter_dirs: Path) -> None:
    a, up = machine(jupyter_dirs / "a", s3)
    notebook(a, up).save(tag="good")
    up.push()
    client = s3.client()
    blobs = objects(s3, "users/alice/blobs/")
    key, data = max(blobs.items(), key=lambda item: len(item[1]))
    client.put_object(Bucket=s3.bucket, Key=key, Body=data[:-1] + bytes([data[-1] ^ 1]))

    b, down = machine(jupyter_dirs / "b", s3)
    (cid,) = down.pull()
    with pytest.raises(IntegrityError, match="fails its signature check"):
        down.fetch(cid)
    assert not b.blobs.has(key.rsplit("/", 1)[1])  # nothing unverified was kept

    (record,) = objects(s3, "users/alice/sessions/").items()
    client.put_object(Bucket=s3.bucket, Key=record[0], Body=record[1].replace(b"good", b"evil"))
    c, fresh = machine(jupyter_dirs / "c", s3)
    with pytest.raises(IntegrityError, match="fails its signature check; it was not pulled"):
        fresh.pull()
    assert c.sessions() == []


def test_a_fetch_asks_the_store_once_per_object_and_an_emptied_one_is_refused(s3: S3, jupyter_dirs: Path) -> None:
    a, up = machine(jupyter_dirs / "a", s3)
    notebook(a, up).save()
    up.push()
    b, down = machine(jupyter_dirs / "b", s3)
    (cid,) = down.pull()
    asked: list[str] = []
    down.remote.fs.s3.meta.events.register("before-send.s3", lambda event_name, **_: asked.append(event_name))
    down.fetch(cid)
    # One GET per blob, and no HEAD before it (s3fs asks for the size first unless given a range).
    assert sorted(asked) == ["before-send.s3.GetObject"] * len(set(blob_keys(b.manifest(cid))))

    key = next(iter(objects(s3, "users/alice/blobs/")))
    s3.client().put_object(Bucket=s3.bucket, Key=key, Body=b"")
    c, fresh = machine(jupyter_dirs / "c", s3)
    (cid,) = fresh.pull()
    with pytest.raises(IntegrityError, match=key.rsplit("/", 1)[1]):
        fresh.fetch(cid)
    assert not c.blobs.has(key.rsplit("/", 1)[1])


def test_a_pull_lists_only_its_session_and_asks_for_all_its_records_at_once(s3: S3, jupyter_dirs: Path) -> None:
    a, up = machine(jupyter_dirs / "a", s3)
    nb, other = notebook(a), notebook(a, session="other.ipynb")
    for i in range(40):
        nb.module.x = i
        nb.save()
    other.save()
    up.push()
    c, down = machine(jupyter_dirs / "c", s3)
    listed: list[str] = []
    gets: list[float] = []
    events = down.remote.fs.s3.meta.events
    events.register("before-parameter-build.s3.ListObjectsV2", lambda params, **_: listed.append(params["Prefix"]))
    events.register("before-send.s3.GetObject", lambda **_: gets.append(time.perf_counter()))
    pulled = down.pull("nb.ipynb")
    assert len(pulled) == 40 and [s["key"] for s in c.sessions()] == ["nb.ipynb"]  # not the other notebook's
    assert listed == [f"{down.remote.root}/{down.remote.records_of('nb.ipynb')}/"[len(s3.bucket) + 1 :]]
    assert len(gets) == 40  # one request per record, sent together rather than in turns of a thread pool
    fresh = Checkpointer(c, "nb.ipynb", types.ModuleType("__main__"), replica=down)
    fresh.restore("latest")
    assert fresh.module.x == 39

    # A record deleted by another machine after the listing is left out; the others are read.
    paths = list(down.remote.listing(down.remote.records_of("nb.ipynb")))[:3]
    s3.client().delete_object(Bucket=s3.bucket, Key=paths[1].split("/", 1)[1])
    assert list(down.remote.get_records(paths)) == [paths[0], paths[2]]


def _long_session(store: Store, replica: Replica | None, cells: int) -> Checkpointer:
    nb = notebook(store, replica)
    for i in range(cells):
        nb.module.x = i
        nb.save()
    return nb


def _gets(replica: Replica) -> list[str]:
    """The objects a replica's client asks the store for, as it asks."""
    asked: list[str] = []
    events = replica.remote.fs.s3.meta.events
    events.register("before-parameter-build.s3.GetObject", lambda params, **_: asked.append(params["Key"]))
    return asked


def test_a_long_timeline_is_pulled_from_packs_and_a_deleted_checkpoint_leaves_none_behind(
    s3: S3, jupyter_dirs: Path
) -> None:
    a, up = machine(jupyter_dirs / "a", s3)
    nb = _long_session(a, None, 150)
    up.push()
    packs = sorted(k for k in objects(s3, "users/alice/sessions/") if "/packs/" in k)
    assert len(packs) == 2  # every 64 records uploaded are also copied into one object

    b, down = machine(jupyter_dirs / "b", s3)
    asked = _gets(down)
    assert len(down.pull()) == 150
    assert sorted(k for k in asked if "/packs/" in k) == packs and len(asked) == 2 + 150 - 128  # not 150 requests
    fresh = Checkpointer(b, "nb.ipynb", types.ModuleType("__main__"), replica=down)
    fresh.restore("latest")
    assert fresh.module.x == 149
    assert [r.id for r in b.checkpoints("nb.ipynb")] == sorted(r.id for r in b.checkpoints("nb.ipynb"))
    fresh.restore("10")
    assert fresh.module.x == 9

    gone = nb.checkpoints()[9]  # held by the first pack
    nb.module.secret = "deleted with its checkpoint"
    nb.delete(str(gone.id))
    up.push()
    left = [k for k in objects(s3, "users/alice/sessions/") if "/packs/" in k]
    assert left == packs[1:]  # the pack holding it went with it: no copy of a deleted checkpoint stays
    c, other = machine(jupyter_dirs / "c", s3)
    other.pull()  # A's checkpoints less the deleted one (and those B's restores made)
    assert len([r for r in c.checkpoints("nb.ipynb") if r.trigger == "manual"]) == 149
    assert gone.time not in {r.time for r in c.checkpoints("nb.ipynb")}


def test_a_damaged_pack_is_passed_over_for_the_records_themselves(s3: S3, jupyter_dirs: Path) -> None:
    a, up = machine(jupyter_dirs / "a", s3)
    _long_session(a, None, 70)
    up.push()
    (pack,) = [k for k in objects(s3, "users/alice/sessions/") if "/packs/" in k]
    body = json.loads(objects(s3, pack)[pack])
    first = sorted(body["records"])[0]
    copy = json.loads(body["records"][first])
    copy["record"] = json.dumps({**json.loads(copy["record"]), "tag": "forged"}, sort_keys=True)  # the mac kept
    body["records"][first] = json.dumps(copy)
    s3.client().put_object(Bucket=s3.bucket, Key=pack, Body=json.dumps(body).encode())
    b, down = machine(jupyter_dirs / "b", s3)
    asked = _gets(down)
    assert len(down.pull()) == 70  # nothing refused: the forged copy's record was read from its own object
    assert [r.tag for r in b.checkpoints("nb.ipynb")] == [None] * 70
    assert sum(1 for k in asked if k.endswith(f"/{first}.json")) == 1

    s3.client().put_object(Bucket=s3.bucket, Key=pack, Body=b"not json")
    _, other = machine(jupyter_dirs / "c", s3)
    assert len(other.pull()) == 70  # read alone, and packed again in its place
    _, again = machine(jupyter_dirs / "d", s3)
    asked = _gets(again)
    assert len(again.pull()) == 70 and len(asked) == 1 + 6

    s3.client().put_object(Bucket=s3.bucket, Key=pack, Body=b"not json")
    again.gc()  # gc reads every record too, so it mends a damaged pack as a pull does
    assert len(json.loads(objects(s3, pack)[pack])["records"]) == 64


def test_records_a_pull_read_one_by_one_are_packed_for_the_next_machine_and_gc_drops_stale_packs(
    s3: S3, jupyter_dirs: Path
) -> None:
    a, _ = machine(jupyter_dirs / "a", s3)
    nb = _long_session(a, None, 40)
    Replica(a, Remote(s3.url)).push()  # two kernels one after the other: 80 records, none packed by them
    for i in range(40):
        nb.module.x = 100 + i
        nb.save()
    Replica(a, Remote(s3.url)).push()
    assert not [k for k in objects(s3, "users/alice/sessions/") if "/packs/" in k]
    _, down = machine(jupyter_dirs / "b", s3)
    assert len(down.pull()) == 80
    (pack,) = [k for k in objects(s3, "users/alice/sessions/") if "/packs/" in k]
    _, other = machine(jupyter_dirs / "c", s3)
    asked = _gets(other)
    assert len(other.pull()) == 80 and len(asked) == 1 + 16

    # A record deleted after a pack copied it, by a machine that did not know the pack: gc drops the pack.
    held = sorted(json.loads(objects(s3, pack)[pack])["records"])[5]
    record = next(k for k in objects(s3, "users/alice/sessions/") if k.endswith(f"/{held}.json"))
    s3.client().delete_object(Bucket=s3.bucket, Key=record)
    other.gc()
    assert not [k for k in objects(s3, "users/alice/sessions/") if "/packs/" in k]
    _, last = machine(jupyter_dirs / "d", s3)
    assert len(last.pull()) == 79


def test_two_machines_write_one_prefix_without_colliding(s3: S3, jupyter_dirs: Path) -> None:
    a, up_a = machine(jupyter_dirs / "a", s3)
    b, up_b = machine(jupyter_dirs / "b", s3)
    na, nb = notebook(a, session="nb.ipynb"), notebook(b, session="nb.ipynb")
    for i in range(3):
        na.module.x = i
        na.save()
        nb.module.y = -i
        nb.save()
    assert [r.id for r in na.checkpoints()] == [r.id for r in nb.checkpoints()]  # the same local ids...
    up_a.push()
    up_b.push()
    assert len(up_a.pull()) == 3 and len(a.checkpoints("nb.ipynb")) == 6  # a pull brings the other's in, once
    assert up_a.pull() == []
    c, down = machine(jupyter_dirs / "c", s3)
    assert len(down.pull()) == 6  # ...six checkpoints in the bucket, none overwritten
    both = Checkpointer(c, "nb.ipynb", types.ModuleType("__main__"), replica=down)
    xs, ys = set(), set()
    for record in c.checkpoints("nb.ipynb"):
        both.restore(str(record.id))
        xs.add(both.module.__dict__.get("x"))
        ys.add(both.module.__dict__.get("y"))
    assert xs >= {0, 1, 2} and ys >= {0, -1, -2}


def test_another_machine_takes_the_checkpoints_in_the_order_they_were_made(s3: S3, jupyter_dirs: Path) -> None:
    """A second kernel on the notebook that did not restore starts a root of its own, newer than the first
    kernel's chain: another machine must list it last and take it for ``latest``, not the chain's end."""
    a, up = machine(jupyter_dirs / "a", s3)
    first = notebook(a)
    for x in (1, 2, 3):
        first.module.x = x
        first.save()
        time.sleep(0.002)  # uids hold milliseconds
    second = notebook(a)
    second.module.x = 100
    second.save()
    up.push()
    c, down = machine(jupyter_dirs / "c", s3)
    down.pull()
    records = c.checkpoints("nb.ipynb")
    assert [r.time for r in records] == sorted(r.time for r in records)
    fresh = Checkpointer(c, "nb.ipynb", types.ModuleType("__main__"), replica=down)
    fresh.restore("latest")
    assert fresh.module.x == 100


def test_an_older_state_pulled_after_a_newer_one_here_never_becomes_latest(s3: S3, jupyter_dirs: Path) -> None:
    """Machine A's newest state was never uploaded (its kernel died first); B uploads an older one. A pull on A
    brings B's in after A's own: the timeline, latest, last-good and a new kernel's resume go by when each state
    was taken, not by the order the pull found them in."""
    a, up_a = machine(jupyter_dirs / "a", s3)
    b, up_b = machine(jupyter_dirs / "b", s3)
    older = notebook(b)
    older.module.x = "older, machine B"
    older.save()
    time.sleep(0.01)
    newer = notebook(a)
    newer.module.x = "newer, machine A"
    newer.save()
    up_b.push()
    assert len(up_a.pull()) == 1  # B's state comes in after A's own
    records = a.checkpoints("nb.ipynb")
    assert [r.time for r in records] == sorted(r.time for r in records)
    for ref in ("latest", "last-good", "#2"):
        fresh = Checkpointer(a, "nb.ipynb", types.ModuleType("__main__"))
        fresh.restore(ref)
        assert fresh.module.x == "newer, machine A", ref
    again = Checkpointer(a, "nb.ipynb", types.ModuleType("__main__"))
    again.restore("previous")
    assert again.module.x == "newer, machine A"


def _newer_state_elsewhere(root: Path, s3: S3) -> None:
    """Another machine's newer state of the notebook (``box.v`` grew a 4), uploaded."""
    elsewhere, other = machine(root, s3)
    newer = notebook(elsewhere, other)
    newer.module.box.v.append(4)
    newer.save()
    other.push()


def _hold_uploads(replica: Replica) -> threading.Event:
    """Hold up each upload of ``replica`` (20 s at most) until the event returned is set."""
    release = threading.Event()

    async def hold(**_: Any) -> None:
        held = time.monotonic()
        while not release.is_set() and time.monotonic() - held < 20:
            await asyncio.sleep(0.01)

    replica.remote.fs.s3.meta.events.register("before-send.s3.PutObject", hold)
    return release


def test_a_kernel_starting_beside_a_backlog_restores_the_newest_state_without_waiting_for_the_backlog_to_upload(
    s3: S3, jupyter_dirs: Path
) -> None:
    """A kernel that died before its checkpoints were uploaded leaves a backlog. The kernel started in its place
    pulls the timeline (here with a newer checkpoint another machine uploaded meanwhile) and restores its newest
    state at once; the backlog uploads behind it (its uploads held up here for 20 s)."""
    a, up = machine(jupyter_dirs / "a", s3)
    notebook(a).save()  # not uploaded: its kernel died first
    time.sleep(0.002)  # uids hold milliseconds
    _newer_state_elsewhere(jupyter_dirs / "b", s3)
    release = _hold_uploads(up)
    started = time.monotonic()
    restarted = Checkpointer(a, "nb.ipynb", types.ModuleType("__main__"), replica=up)
    try:
        restarted.restore("last-good")
        took = time.monotonic() - started
        assert restarted.module.box.v == [1, 2, 3, 4]  # the other machine's newer state
        assert took < 15, f"the restore waited {took:.1f} s for the backlog's upload"
        assert up.status()["behind"] == 2  # the backlog and the restore's own checkpoint, uploading behind
    finally:
        release.set()
    up.flush(timeout=60)
    assert up.status()["behind"] == 0
    up.stop()
    assert len(objects(s3, "users/alice/sessions/")) == 3  # every record reached the bucket


def test_a_kernel_that_moves_to_its_notebook_while_a_backlog_uploads_waits_for_that_notebook_s_timeline(
    s3: S3, jupyter_dirs: Path
) -> None:
    """The round that pulled the kernel's first session goes on to upload a backlog; the kernel moves to its
    notebook's session meanwhile (VS Code names the notebook after start-up). That timeline is not taken for
    pulled until it is: a restore takes the newer state another machine left in the notebook's session."""
    a, up = machine(jupyter_dirs / "a", s3)
    notebook(a, session="kernel-1234").save()  # a backlog in the kernel's own session
    _newer_state_elsewhere(jupyter_dirs / "b", s3)
    release = _hold_uploads(up)
    kernel = Checkpointer(a, "kernel-1234", types.ModuleType("__main__"), replica=up)
    try:
        assert up.pulled.wait(15)  # its own session's timeline is in, while the backlog's upload is held up
        kernel.move_to("nb.ipynb", take_along=False)
        assert not up.pulled.is_set()  # the notebook's is not, until the next round pulls it
        threading.Timer(1.0, release.set).start()
        kernel.restore("last-good")
        assert kernel.module.box.v == [1, 2, 3, 4]
    finally:
        release.set()
    up.flush(timeout=60)
    up.stop()


def test_gc_keeps_the_blobs_of_a_writer_still_uploading_and_collects_a_dead_ones(s3: S3, jupyter_dirs: Path) -> None:
    a, up = machine(jupyter_dirs / "a", s3)
    nb = notebook(a)  # pushed by hand below, not by a replica's thread
    first = nb.save()
    up.push()
    nb.module.data = nb.module.data + 1  # new chunks
    second = nb.save()
    for key in up.catalog.blobs_to_upload(second):  # a writer uploading: its blobs are there, its record not yet
        up.remote.blobs.write_file(key, a.blobs.path(key))
    before = set(objects(s3, "users/alice/blobs/"))

    assert up.gc(grace=3600) == (0, 0)  # young unreferenced blobs may be a writer's: kept
    assert set(objects(s3, "users/alice/blobs/")) == before
    b, down = machine(jupyter_dirs / "b", s3)
    assert [b.get(i).id for i in down.pull()] and len(b.checkpoints("nb.ipynb")) == 1  # half-uploaded: invisible

    removed, _ = up.gc(grace=0)  # the writer died long ago: its blobs go, the committed ones stay
    assert removed > 0
    restored = Checkpointer(b, "nb.ipynb", types.ModuleType("__main__"), replica=down)
    restored.restore("latest")
    assert float(restored.module.data.sum()) == float(nb.module.data.sum() - len(nb.module.data))
    assert first is not None


def test_delete_and_tag_reach_the_bucket(s3: S3, jupyter_dirs: Path) -> None:
    a, up = machine(jupyter_dirs / "a", s3)
    nb = notebook(a, up)
    keep, drop = nb.save(), nb.save()
    up.push()
    nb.tag(str(keep), "baseline")
    nb.delete(str(drop))
    up.push()
    b, down = machine(jupyter_dirs / "b", s3)
    down.pull()
    assert [r.tag for r in b.checkpoints("nb.ipynb")] == ["baseline"]


def test_the_cli_lists_and_exports_from_the_bucket_on_an_empty_machine(s3: S3, jupyter_dirs: Path) -> None:
    a, up = machine(jupyter_dirs / "a", s3)
    notebook(a, up).save(tag="done")
    up.push()
    env = dict(__import__("os").environ, JUPYTER_CKPT_DIR=str(jupyter_dirs / "empty"))
    listed = cli("list", "nb.ipynb", env=env)
    assert listed.returncode == 0 and "done" in listed.stdout, listed.stderr
    out = jupyter_dirs / "state.pkl"
    exported = cli("export", "done", str(out), "--session", "nb.ipynb", env=env)
    assert exported.returncode == 0, exported.stderr
    import dill

    assert float(dill.load_module_asdict(str(out))["data"][:3].sum()) > 0
    verified = cli("verify", env=env)
    assert verified.returncode == 0 and "1 checkpoint(s) in 1 session(s), 0 problem(s)" in verified.stdout
    collected = cli("gc", "--grace", "0", env=env)
    assert collected.returncode == 0 and f"{s3.url}: removed 0 unreferenced object(s)" in collected.stdout


def test_the_cli_checks_the_blobs_in_the_bucket_and_works_past_a_refused_record(s3: S3, jupyter_dirs: Path) -> None:
    a, up = machine(jupyter_dirs / "a", s3)
    nb = notebook(a, up)
    nb.save(tag="good")
    nb.module.extra = list(range(10))
    nb.save(tag="kept")
    up.push()

    def on_empty_machine(*args: str) -> Any:
        return cli(*args, env=dict(os.environ, JUPYTER_CKPT_DIR=str(jupyter_dirs / f"empty-{time.monotonic_ns()}")))

    assert on_empty_machine("verify").returncode == 0
    client = s3.client()
    key, data = max(objects(s3, "users/alice/blobs/").items(), key=lambda item: len(item[1]))
    client.put_object(Bucket=s3.bucket, Key=key, Body=data[:-1] + bytes([data[-1] ^ 1]))
    checked = on_empty_machine("verify")  # the blobs only the bucket holds are downloaded and checked
    assert checked.returncode == 3 and "fails its signature check" in checked.stdout, checked.stdout
    client.put_object(Bucket=s3.bucket, Key=key, Body=data)

    path, body = next((k, v) for k, v in objects(s3, "users/alice/sessions/").items() if b"good" in v)
    client.put_object(Bucket=s3.bucket, Key=path, Body=body.replace(b"good", b"evil"))
    listed = on_empty_machine("list", "nb.ipynb")  # said, and the intact checkpoints are there
    assert listed.returncode == 0 and "kept" in listed.stdout and "fails its signature check" in listed.stderr
    verified = on_empty_machine("verify")
    assert verified.returncode == 3 and "it was not pulled" in verified.stdout


def test_a_machine_killed_while_uploading_leaves_only_whole_checkpoints_in_the_bucket(
    kernels: Any, s3: S3, jupyter_dirs: Path
) -> None:
    """Each cell seals its state (the oracle's digest); the kill comes while uploads are in flight."""
    here = str(Path(__file__).parent)
    a = kernels("upload.ipynb", JUPYTER_CKPT_DIR=str(jupyter_dirs / "machine-a"), PYTHONPATH=here)
    seal = "seal = __import__('oracle').digest(globals(), skip=('seal',))"
    a.ok(f"%load_ext jupyter_ckpt\n%checkpoint auto on\nimport numpy as np\n{seal}")  # checkpointed: it leaves np
    for i in range(8):
        a.ok(f"big = np.random.default_rng({i}).random(1_000_000)\nn = {i}\n{seal}")
    deadline = time.time() + 60
    while not objects(s3, "users/alice/sessions/") and time.time() < deadline:
        time.sleep(0.02)
    a.kill()  # the first record is in, the others are on their way
    shutil.rmtree(jupyter_dirs / "machine-a")

    b, replica = machine(jupyter_dirs / "machine-b", s3)
    pulled = replica.pull()  # only checkpoints whose record was written: each complete
    assert 1 <= len(pulled) <= 9
    for cid in pulled:
        replica.fetch(cid)
        module = types.ModuleType("__main__")
        restore_namespace(b.blobs, module, cid, b.manifest(cid))
        assert digest(module.__dict__, skip=("seal",)) == module.__dict__["seal"], f"checkpoint {cid} is torn"


def test_a_restore_reads_the_downloaded_bytes_and_a_full_disk_here_loses_nothing(s3: S3, jupyter_dirs: Path) -> None:
    a, up = machine(jupyter_dirs / "a", s3)
    first = notebook(a, up)
    first.module.big = np.random.default_rng(2).random(1_300_000)  # raw chunks: two whole and a part
    first.save()
    up.push()
    want = digest(first.module.__dict__)

    b, down = machine(jupyter_dirs / "b", s3)
    (cid,) = down.pull()
    b.blobs.limit.keep_free = 1 << 62  # no disk has this much free: every write here is refused
    said: list[str] = []
    down._notify = said.append
    module = types.ModuleType("__main__")
    with down.fetched(cid):
        restore_namespace(b.blobs, module, cid, b.manifest(cid))  # from the downloaded bytes
    down.wait_fetched()
    assert digest(module.__dict__) == want
    assert len(said) == 1 and "was fetched but not kept here" in said[0] and "nearly full" in said[0], said
    assert RemoteCatalog(b).remote_only() == {cid}  # to be fetched again
    assert set(RemoteCatalog(b).missing_blobs(cid)) == set(blob_keys(b.manifest(cid)))  # nor kept in memory

    b.blobs.limit.keep_free = 0  # room again: the next fetch keeps it
    down.fetch(cid)
    assert RemoteCatalog(b).remote_only() == set()
    module = types.ModuleType("__main__")
    restore_namespace(b.blobs, module, cid, b.manifest(cid))
    assert digest(module.__dict__) == want


def test_a_restore_reads_each_blob_as_it_comes_and_one_it_left_out_that_fails_is_said_once(
    s3: S3, jupyter_dirs: Path
) -> None:
    """A restore from the remote store reads each blob as soon as it is downloaded and checked: restoring ``box``
    does not wait for ``big``, whose download is held up here. ``big``'s blob, changed in the bucket meanwhile,
    fails its check after the restore: said once, nothing of it kept, and the checkpoint stays to be fetched."""
    import asyncio

    a, up = machine(jupyter_dirs / "a", s3)
    source = notebook(a, up)
    source.module.big = np.random.default_rng(3).random(1_300_000)  # raw chunks: two whole and a part
    source.save()
    up.push()
    key, data = max(objects(s3, "users/alice/blobs/").items(), key=lambda item: len(item[1]))  # one of big's
    b, down = machine(jupyter_dirs / "b", s3)
    said: list[str] = []
    down._notify = said.append
    release = threading.Event()

    async def hold(request: Any, **_: Any) -> None:
        held = time.monotonic()
        while request.url.endswith(key) and not release.is_set() and time.monotonic() - held < 20:
            await asyncio.sleep(0.01)

    down.remote.fs.s3.meta.events.register("before-send.s3.GetObject", hold)
    here = Checkpointer(b, "nb.ipynb", types.ModuleType("__main__"), replica=down)
    started = time.monotonic()
    here.restore("latest", only="box")
    assert here.module.box.v == [1, 2, 3] and "big" not in vars(here.module)
    assert time.monotonic() - started < 15  # it did not wait for big's blob, held up for 20 s
    s3.client().put_object(Bucket=s3.bucket, Key=key, Body=data[:-1] + bytes([data[-1] ^ 1]))
    release.set()
    down.wait_fetched()
    assert len(said) == 1 and "was fetched but not kept here" in said[0] and "fails its signature check" in said[0]
    (cid,) = RemoteCatalog(b).remote_only()  # to be fetched again
    assert not b.blobs.has(key.rsplit("/", 1)[1])  # nothing unverified kept, in memory or on disk
    with pytest.raises(IntegrityError, match="fails its signature check"):
        here.restore(cid)
    assert here.module.box.v == [1, 2, 3] and "big" not in vars(here.module)  # the refused restore changed nothing


def on_disk(root: Path) -> int:
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file())


def test_a_fetched_checkpoint_counts_against_the_budget_here(s3: S3, jupyter_dirs: Path) -> None:
    """The bytes a restore fetched are the local tier's too: the size the budget is kept by (and ``status``
    shows) is the store's. The blobs were counted as 0 bytes: the restore's own checkpoint named them while
    they were held in memory, before they were written."""
    a, up = machine(jupyter_dirs / "a", s3)
    source = notebook(a, up)
    for seed in (1, 2):
        source.module.big = np.random.default_rng(seed).random(500_000)  # 4 MB each
        source.save()
    up.push()
    b, down = machine(jupyter_dirs / "b", s3)
    here = Checkpointer(
        b, "nb.ipynb", types.ModuleType("__main__"), replica=down, limits=Limits(max_store_size=6 << 20)
    )
    for ref in ("1", "2"):
        here.restore(ref)
        down.wait_fetched()
        here.retention.settle()
        # The catalog's log may take a page between the pass's measure and this one (the remote tier records
        # what it pulled and pushed); the blobs, 4 MB each, were what went uncounted.
        assert abs(here.retention.usage().size - b.size()) < 64 << 10
        assert b.size() >= on_disk(b.root) - (1 << 20)  # the catalog aside
    assert here.module.big[0] == source.module.big[0]


def test_a_restore_from_a_changed_object_is_refused_and_changes_nothing(s3: S3, jupyter_dirs: Path) -> None:
    a, up = machine(jupyter_dirs / "a", s3)
    notebook(a, up).save()
    up.push()
    key, data = max(objects(s3, "users/alice/blobs/").items(), key=lambda item: len(item[1]))
    s3.client().put_object(Bucket=s3.bucket, Key=key, Body=data[:-1] + bytes([data[-1] ^ 1]))

    b, down = machine(jupyter_dirs / "b", s3)
    (cid,) = down.pull()
    module = types.ModuleType("__main__")
    module.__dict__["data"] = "the live value"
    before = dict(module.__dict__)
    with pytest.raises(IntegrityError, match="fails its signature check"), down.fetched(cid):
        restore_namespace(b.blobs, module, cid, b.manifest(cid))
    assert module.__dict__ == before
    down.wait_fetched()
    assert RemoteCatalog(b).remote_only() == {cid} and not b.blobs.has(key.rsplit("/", 1)[1])


def test_a_checkpoint_after_a_restore_from_the_bucket_uploads_without_asking_it_for_what_came_from_it(
    s3: S3, jupyter_dirs: Path
) -> None:
    a, up = machine(jupyter_dirs / "a", s3)
    notebook(a, up).save()
    up.push()

    b, down = machine(jupyter_dirs / "b", s3)
    (cid,) = down.pull()
    module = types.ModuleType("__main__")
    b.blobs.limit.keep_free = 1 << 62  # the local tier is not written after the restore: no disk has this much free
    with down.fetched(cid):
        restore_namespace(b.blobs, module, cid, b.manifest(cid))
    down.wait_fetched()
    b.blobs.limit.keep_free = 0
    asked: list[str] = []
    exists = down.remote.exists
    down.remote.exists = lambda path: asked.append(path) or exists(path)  # type: ignore[method-assign]
    module.__dict__["note"] = "written on the second machine"
    new = Checkpointer(b, "nb.ipynb", module).save()
    assert new is not None and down.push() == 1
    fetched = set(blob_keys(b.manifest(cid)))
    assert {path.rsplit("/", 1)[1] for path in asked} == set(blob_keys(b.manifest(new))) - fetched != set()


def test_s3_checksums_are_left_to_the_signatures_unless_the_user_configured_them(
    s3: S3, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = Remote(s3.url).fs.s3._client_config  # botocore's, as every request of the tier uses it
    assert (config.request_checksum_calculation, config.response_checksum_validation) == ("when_required",) * 2
    monkeypatch.setitem(fsspec.config.conf, "s3", {"config_kwargs": {"response_checksum_validation": "when_supported"}})
    config = Remote(s3.url).fs.s3._client_config
    assert (config.request_checksum_calculation, config.response_checksum_validation) == (
        "when_required",
        "when_supported",
    )


def test_a_record_planted_nested_or_huge_is_refused_unparsed_and_the_others_are_pulled(
    s3: S3, jupyter_dirs: Path
) -> None:
    """Anyone who can write the bucket can put objects among the records. One of nested brackets made a pull fail
    with a RecursionError (a traceback from the command line, and a kernel's pull failing at every retry, so the
    notebook's timeline never came); one of gigabytes was downloaded into memory whole. Each is refused in one line
    without being parsed or downloaded, and the signed records are pulled."""
    a, up = machine(jupyter_dirs / "a", s3)
    nb = notebook(a, up)
    nb.save(tag="kept")
    up.push()
    folder = f"users/alice/{Remote.records_of('nb.ipynb')}"
    client = s3.client()
    client.put_object(Bucket=s3.bucket, Key=f"{folder}/0000000000aa-0000000000000000.json", Body=b"[" * 200_000)
    big = remote_module.RECORD_MAX + 1
    client.put_object(Bucket=s3.bucket, Key=f"{folder}/0000000000bb-0000000000000000.json", Body=b" " * big)
    client.put_object(Bucket=s3.bucket, Key=f"{folder}/packs/0_z.json", Body=b'{"records": ' + b"[" * 200_000)

    listed = cli("list", "nb.ipynb", env=dict(os.environ, JUPYTER_CKPT_DIR=str(jupyter_dirs / "empty")))
    assert listed.returncode == 0 and "kept" in listed.stdout, listed
    assert "Traceback" not in listed.stderr and listed.stderr.count("\n") == 1, listed.stderr
    assert "0000000000bb-0000000000000000.json holds" in listed.stderr and "(and 1 more)" in listed.stderr
    b, down = machine(jupyter_dirs / "b", s3)
    client.delete_object(Bucket=s3.bucket, Key=f"{folder}/0000000000bb-0000000000000000.json")
    with pytest.raises(IntegrityError, match=r"0000000000aa-0000000000000000\.json is damaged; it was not pulled$"):
        down.pull("nb.ipynb")
    assert [r.tag for r in b.checkpoints("nb.ipynb")] == ["kept"]


@pytest.mark.parametrize("planted", ["../../../../escaped", "another checkpoint's"])
def test_a_uid_planted_in_the_catalog_never_names_what_a_push_writes(s3: S3, jupyter_dirs: Path, planted: str) -> None:
    """A push names each record's object by the checkpoint's uid, and read it from the catalog's ``uids`` table,
    which is not signed. A uid planted there (``../x``) made the push write outside the session's folder, or
    (another checkpoint's uid) over that checkpoint's record. The uid the signed manifest names is used, and a
    checkpoint whose row names another is not uploaded, said once; the others are."""
    a, up = machine(jupyter_dirs / "a", s3)
    said: list[str] = []
    up = Replica(a, up.remote, said.append)
    nb = notebook(a)  # pushed here, by hand: after the uid is planted
    nb.save()
    victim = notebook(a, session="other.ipynb").save()
    up.push()
    before = objects(s3)
    nb.save()  # uploaded with the next push
    planted_in = nb.save()
    with contextlib.closing(sqlite3.connect(a.root / "catalog.sqlite", isolation_level=None)) as db:
        (uid,) = db.execute("SELECT uid FROM uids WHERE checkpoint_id=?", (victim,)).fetchone()
        if planted != "../../../../escaped":
            db.execute("UPDATE uids SET uid='taken' WHERE checkpoint_id=?", (victim,))
            planted = uid
        db.execute("UPDATE uids SET uid=? WHERE checkpoint_id=?", (planted, planted_in))
    assert up.push() == 1
    after = objects(s3)
    assert all(after[key] == data for key, data in before.items())  # nothing written over
    new = [key for key in after if key not in before and "/blobs/" not in f"/{key}"]
    assert len(new) == 1 and "/sessions/" in f"/{new[0]}" and new[0].endswith(".json") and ".." not in new[0], new
    assert len(said) == 1 and f"checkpoint {planted_in} was not uploaded" in said[0], said
    b, down = machine(jupyter_dirs / "b", s3)
    down.pull()
    assert len(b.checkpoints("nb.ipynb")) == 2 and len(b.checkpoints("other.ipynb")) == 1  # first, kept; victim


def test_a_blob_object_grown_in_the_bucket_is_not_downloaded_past_what_its_checkpoint_holds(
    s3: S3, jupyter_dirs: Path
) -> None:
    """A fetch downloaded each blob object whole before checking it: one replaced in the bucket by an object of any
    length was read into the kernel's memory (a restore on another machine, ``jupyter ckpt --store s3://… verify``).
    The signed manifest says how long each blob can be; a longer object is refused after that many bytes."""
    a, up = machine(jupyter_dirs / "a", s3)
    cid = notebook(a, up).save(tag="good")
    up.push()
    stream = a.manifest(cid)["groups"][0]["key"]
    path = f"users/alice/blobs/{stream[:2]}/{stream}"
    grown = 32 << 20
    s3.client().put_object(Bucket=s3.bucket, Key=path, Body=b"\0" * grown)
    b, down = machine(jupyter_dirs / "b", s3)
    (cid,) = down.pull()
    with pytest.raises(IntegrityError, match=f"blob {stream} is longer than its checkpoint says it can be"):
        down.fetch(cid)
    assert not b.blobs.has(stream)
    assert len(down.remote.get_bytes(f"{down.remote.root}/blobs/{stream[:2]}/{stream}", 100)) == 101  # a range
    verified = cli("--store", s3.url, "verify", env=dict(os.environ, JUPYTER_CKPT_DIR=str(jupyter_dirs / "c")))
    assert verified.returncode == 3 and f"blob {stream} is longer than its checkpoint says" in verified.stdout


def test_a_record_grown_after_it_was_listed_is_not_downloaded_whole(s3: S3, jupyter_dirs: Path) -> None:
    """A record listed larger than any record is not downloaded; one replaced by a larger object after the listing
    was downloaded whole into memory. Its download stops a byte past the most a record holds, and it is refused."""
    a, up = machine(jupyter_dirs / "a", s3)
    notebook(a, up).save()
    up.push()
    _, down = machine(jupyter_dirs / "b", s3)
    listed = down.remote.listing(down.remote.records_of("nb.ipynb"))
    (path,) = listed
    s3.client().put_object(Bucket=s3.bucket, Key=path.split("/", 1)[1], Body=b" " * (remote_module.RECORD_MAX + 4096))
    assert len(down.remote.get_records([path])[path]) == remote_module.RECORD_MAX + 1
    records, refused, _ = down._read_records(listed, lambda uid: True)
    assert records == [] and refused == [
        f"the remote record {path} holds more than a record ever does (64.0 MiB); it was not pulled"
    ]
