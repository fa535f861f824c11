"""The store on its own: signed blobs, atomic commits, permissions, retention, bad input."""

from __future__ import annotations

import os
import re
import sqlite3
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from jupyter_ckpt.errors import BadArgument, IntegrityError, StoreFullError, StoreVersionError
from jupyter_ckpt.remote_catalog import RemoteCatalog
from jupyter_ckpt.store import MANIFEST_MAX, Store, load_secret


def manifest(session: str = "nb.ipynb", parent: int | None = None, status: str = "ok") -> dict[str, object]:
    return {
        "parent": parent,
        "time": time.time(),
        "cell": 1,
        "last_cell": None,
        "trigger": "manual",
        "status": status,
        "changed": ["x"],
        "variables": {},
    }


def blob_file(store: Store, key: str) -> Path:
    return store.root / "blobs" / key[:2] / key


def test_blob_round_trip_dedupes_and_compresses_what_pays(store: Store) -> None:
    text = b"the same words again " * 10_000
    first = store.blobs.put(text)
    assert first.new and first.stored < len(text) / 10
    assert not store.blobs.put(text).new  # unchanged data is never written twice
    assert bytes(store.blobs.read(first.key)) == text

    noise = np.random.default_rng(0).random(200_000).tobytes()
    raw = store.blobs.put(noise)
    assert raw.stored == 4096 + len(noise)  # random doubles do not compress: kept raw behind a page header
    view = store.blobs.read(raw.key)
    assert bytes(view) == noise


def test_permissions_are_private(store: Store, jupyter_dirs: Path) -> None:
    info = store.blobs.put(b"x" * 100)
    assert stat.S_IMODE(store.root.stat().st_mode) == 0o700
    assert stat.S_IMODE(blob_file(store, info.key).stat().st_mode) == 0o600
    assert stat.S_IMODE((store.root / "catalog.sqlite").stat().st_mode) == 0o600
    secret = jupyter_dirs / "data" / "ckpt" / "secret"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert load_secret(secret) == load_secret(secret)  # created once, then reused


def test_a_directory_the_user_gave_keeps_its_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    os.chmod(shared, 0o755)
    load_secret(shared / "secret")
    store = Store(shared, b"x" * 64)
    assert stat.S_IMODE(shared.stat().st_mode) == 0o755  # ours inside it are private
    assert stat.S_IMODE((shared / "secret").stat().st_mode) == 0o600
    assert stat.S_IMODE((store.root / "blobs").stat().st_mode) == 0o700


@pytest.mark.parametrize(
    ("offset", "error"),
    [(30, "fails its signature check"), (60, "has a damaged header"), (-1, "fails its signature check")],
)
def test_a_flipped_byte_is_refused_before_anything_reads_it(store: Store, offset: int, error: str) -> None:
    info = store.blobs.put(b"payload " * 1000)
    path = blob_file(store, info.key)
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match=f"blob {info.key} {error}"):
        store.blobs.read(info.key)


def test_truncated_and_missing_blobs_are_refused(store: Store) -> None:
    info = store.blobs.put(b"payload " * 1000)
    path = blob_file(store, info.key)
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(IntegrityError, match="truncated"):
        store.blobs.read(info.key)
    path.unlink()
    with pytest.raises(IntegrityError, match="missing"):
        store.blobs.read(info.key)
    with pytest.raises(IntegrityError, match="malformed blob key"):
        store.blobs.read("../../secret")
    path.mkdir()  # a directory where the file belongs: damaged as a missing one is (it was an IsADirectoryError)
    with pytest.raises(IntegrityError, match="cannot be read: Is a directory"):
        store.blobs.read(info.key)


def test_a_tampered_manifest_is_refused(store: Store) -> None:
    cid = store.commit("nb.ipynb", manifest(), {})
    db = sqlite3.connect(store.root / "catalog.sqlite")
    db.execute("UPDATE checkpoints SET manifest = replace(manifest, '\"ok\"', '\"no\"') WHERE id=?", (cid,))
    db.commit()
    db.close()
    with pytest.raises(IntegrityError, match=f"checkpoint {cid}: its manifest fails its signature check"):
        store.manifest(cid)
    assert store.verify() == [f"checkpoint {cid}: its manifest fails its signature check; it will not be restored"]


def test_a_manifest_grown_past_any_checkpoints_is_refused_unread(store: Store) -> None:
    """A manifest is read whole, then its signature checked. One grown in the catalog by someone without the secret
    (SQLite holds a value of up to a gigabyte) was read into memory by every restore, ``show`` and ``verify`` before
    it was refused. Longer than any checkpoint writes, it is refused unread; the others stay usable."""
    grown, kept = store.commit("nb.ipynb", manifest(), {}), store.commit("nb.ipynb", manifest(), {})
    with sqlite3.connect(store.root / "catalog.sqlite", isolation_level=None) as db:
        spaces = "replace(hex(zeroblob(?)), '0', ' ')"  # made by SQLite: no copy in this process
        db.execute(f"UPDATE checkpoints SET manifest = {spaces} || manifest WHERE id=?", (MANIFEST_MAX // 2, grown))
    refused = f"checkpoint {grown}: its manifest is longer than any checkpoint writes (64.0 MiB); it was not read"
    with pytest.raises(IntegrityError, match=re.escape(refused)):
        store.manifest(grown)
    assert store.verify() == [refused + ", and will not be restored"]
    assert store.manifest(kept)["status"] == "ok"
    assert [r.id for r in store.checkpoints("nb.ipynb")] == [grown, kept]  # its row is signed: listed, not restored


def test_another_secret_cannot_read_the_store(store: Store) -> None:
    cid = store.commit("nb.ipynb", manifest(), {})
    other = Store(store.root, b"another secret that is long enough to use")
    with pytest.raises(IntegrityError):
        other.manifest(cid)


def test_a_store_from_a_newer_version_is_refused_unchanged(store: Store) -> None:
    db = sqlite3.connect(store.root / "catalog.sqlite")
    db.execute("UPDATE meta SET value='99' WHERE key='format'")
    db.commit()
    db.close()
    before = (store.root / "catalog.sqlite").read_bytes()
    with pytest.raises(StoreVersionError, match="newer jupyter-ckpt"):
        Store(store.root, b"x" * 64)
    assert (store.root / "catalog.sqlite").read_bytes() == before


def test_a_corrupt_catalog_is_reported_not_replaced(tmp_path: Path) -> None:
    root = tmp_path / "store"
    root.mkdir()
    (root / "catalog.sqlite").write_bytes(b"this is not a database" * 100)
    with pytest.raises(IntegrityError, match="unreadable"):
        Store(root, b"x" * 64)
    assert (root / "catalog.sqlite").read_bytes() == b"this is not a database" * 100


def test_a_session_moves_whole_into_another_or_not_at_all(store: Store) -> None:
    a = store.commit("kernel-1", manifest(), {})
    cell = store.add_cell("kernel-1", None, 1, "x = 1", "ok", 0.1)
    store.set_policy("kernel-1", {"auto": True, "every": 3, "interval": None, "exclude": []})
    earlier = store.commit("nb.ipynb", manifest(), {})
    remote = RemoteCatalog(store)
    uid = remote.record(a)["uid"]
    remote.mark_uploaded(a, uid)  # the remote store holds it under the old key

    store.move_session("kernel-1", "nb.ipynb")
    assert [r.id for r in store.checkpoints("nb.ipynb")] == [a, earlier]
    moved = store._query("SELECT s.key FROM cells c JOIN sessions s ON s.id = c.session_id WHERE c.id=?", (cell,))
    assert [row["key"] for row in moved] == ["nb.ipynb"]  # its cells went with it
    assert [s["key"] for s in store.sessions()] == ["nb.ipynb"]
    assert store.policy("nb.ipynb") == {"auto": True, "every": 3, "interval": None, "exclude": []}
    # Uploaded again under the new key, with a new uid; the old record is deleted at the next push.
    assert remote.record(a)["uid"] != uid and remote.tombstones() == [uid]
    assert (a, remote.record(a)["uid"]) in remote.to_upload()

    b = store.commit("kernel-2", manifest(), {})
    store.tag(b, "baseline")
    store.tag(earlier, "baseline")
    with pytest.raises(BadArgument, match=r"tag 'baseline' is used in both 'kernel-2' and 'nb\.ipynb'"):
        store.move_session("kernel-2", "nb.ipynb")
    assert [r.id for r in store.checkpoints("kernel-2")] == [b]  # nothing was moved


def test_gc_removes_only_what_nothing_references(store: Store) -> None:
    kept = store.blobs.put(b"kept" * 100)
    orphan = store.blobs.put(b"orphan" * 100)
    os.utime(blob_file(store, orphan.key), (time.time() - 60, time.time() - 60))  # not a save's in progress
    store.commit("nb.ipynb", manifest(), {kept.key: kept})
    dead_writer_tmp = store.root / "blobs" / "tmp" / f"{'0' * 32}.999999999.1"
    dead_writer_tmp.write_bytes(b"half")
    files, _ = store.gc()
    assert files == 2
    assert blob_file(store, kept.key).exists()
    assert not blob_file(store, orphan.key).exists()
    assert not dead_writer_tmp.exists()
    assert store.verify() == []


def test_a_full_disk_gives_a_clear_error_and_keeps_earlier_checkpoints(tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(small)], capture_output=True).returncode:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        store = Store(small / "store", b"x" * 64)
        first = store.blobs.put(b"fits" * 1000)
        cid = store.commit("nb.ipynb", manifest(), {first.key: first})
        noise = os.urandom(3 << 20)
        with pytest.raises(StoreFullError, match="full"):
            store.blobs.put(noise)
        with pytest.raises(StoreFullError, match="full"), store.blobs.batch() as batch:
            fitted = batch.put(os.urandom(1 << 20))  # fits, but its checkpoint does not: it never shows
            batch.put(noise)
        assert not store.blobs.has(fitted.key)
        assert list((small / "store" / "blobs" / "tmp").iterdir()) == []
        assert store.verify() == []
        assert store.manifest(cid)["status"] == "ok"
    finally:
        subprocess.run(["umount", "-l", str(small)], check=True)


def test_a_secret_file_holds_raw_bytes_or_text_and_too_short_is_refused(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    raw.write_bytes(b"\xff\n" + os.urandom(30))  # not text: every byte is key, line ends too
    raw.chmod(0o600)
    assert load_secret(raw) == raw.read_bytes()
    text = tmp_path / "text"
    text.write_text("  a passphrase of thirty-two characters or more\n")
    text.chmod(0o600)
    assert load_secret(text) == b"a passphrase of thirty-two characters or more"  # as it always was read
    for content in (b"\xff" * 31, b"0123456789abcdef0123456789abcde\n"):
        text.write_bytes(content)
        with pytest.raises(IntegrityError, match="holds 31 bytes, fewer than 32"):
            load_secret(text)
    with pytest.raises(BadArgument, match="cannot read the checkpoint secret"):
        load_secret(tmp_path)


def test_a_secret_being_created_is_never_read_half_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel and the server start at once: the second reads the secret while the first is still making it."""
    import secrets
    import threading

    path = tmp_path / "fresh" / "secret"
    second_done = threading.Event()
    make = secrets.token_hex
    calls: list[int] = []

    def slow_first(n: int) -> str:
        calls.append(n)
        if len(calls) == 1:  # the first creator stops mid-way until the second has read the secret
            second_done.wait(10)
        return make(n)

    monkeypatch.setattr(secrets, "token_hex", slow_first)
    seen: dict[str, bytes | Exception] = {}

    def load(who: str) -> None:
        try:
            seen[who] = load_secret(path)
        except Exception as e:
            seen[who] = e
        finally:
            if who == "second":
                second_done.set()

    first = threading.Thread(target=load, args=("first",))
    first.start()
    while not calls:
        pass
    load("second")
    first.join()
    assert seen["first"] == seen["second"] and len(seen["first"]) == 64, seen
    assert sorted(p.name for p in path.parent.iterdir()) == ["secret"]  # no temp file left behind


def test_deleting_many_at_once_hangs_each_survivor_from_its_nearest_kept_ancestor(store: Store) -> None:
    """Checkpoints 1 to 8 in a line and a branch from 3; one call deletes a run (2, 3, 4), a single one (6) and the
    branch."""
    ids: list[int] = []
    for _ in range(8):
        ids.append(store.commit("nb.ipynb", manifest(parent=ids[-1] if ids else None), {}))
    branch = store.commit("nb.ipynb", manifest(parent=ids[2]), {})
    store.delete([ids[1], ids[2], ids[3], ids[5], branch])
    parents = {r.id: r.parent for r in store.checkpoints("nb.ipynb")}
    assert parents == {ids[0]: None, ids[4]: ids[0], ids[6]: ids[4], ids[7]: ids[6]}
    assert store.verify() == []  # each survivor is signed with the parent it has now
    for cid in parents:
        assert store.manifest(cid)["parent"] == parents[cid]


def test_verify_beside_a_gc_reports_nothing_the_gc_took(store: Store, jupyter_dirs: Path) -> None:
    """``jupyter ckpt verify`` while a kernel thinned the store (or another ``gc`` ran) reported what the thinning
    was taking as damage, exit 3: "no checkpoint 569", a checkpoint deleted after verify listed it, and "blob ...
    is missing from the store", one collected after verify read its checkpoint's references."""
    blobs = [store.blobs.put(os.urandom(99)) for _ in "abc"]
    cids = [store.commit("nb.ipynb", manifest(), {b.key: b}) for b in blobs]
    for b in blobs:  # written an hour ago: a gc may collect them
        os.utime(blob_file(store, b.key), (time.time() - 3600,) * 2)
    other = Store(store.root, load_secret(jupyter_dirs / "data" / "ckpt" / "secret"))  # another process's

    def thin(cid: int) -> None:
        other.delete([cid])
        assert other.gc()[0] == 1  # its blob file goes with it

    read_manifest, read_blob = store.manifest, store.blobs.read

    def manifest_then(cid: int) -> Any:  # verify has listed every checkpoint when it reads the first manifest
        if cid == cids[0]:
            thin(cids[1])
        return read_manifest(cid)

    def blob_then(key: str) -> bytes:  # and every reference when it reads the first blob
        if store.exists(cids[2]):
            thin(cids[2])
        return read_blob(key)

    store.manifest, store.blobs.read = manifest_then, blob_then  # type: ignore[method-assign]
    assert store.verify() == []
    assert [r.id for r in store.checkpoints("nb.ipynb")] == cids[:1] and Store.verify(other) == []


def _returns_in_time(call: Any, path: Path) -> Any:
    """Run ``call`` in a thread and return what it raised; fail if it is still blocked after 10 s, then let it go
    (a writer opens the pipe ``path`` it waits on)."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except Exception as e:
            outcome.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(10)
    if thread.is_alive():
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"blocked opening the pipe {path}")
    return outcome[0]


def test_a_pipe_in_place_of_a_blob_or_the_secret_is_refused_without_blocking(store: Store, tmp_path: Path) -> None:
    """A file opened for reading waits for a writer when it is a named pipe: a blob replaced by one made a restore,
    ``verify`` and the kernel's undo wait forever; a secret replaced by one, ``%load_ext``."""
    info = store.blobs.put(b"the bytes of a variable" * 100)
    blob_file(store, info.key).unlink()
    os.mkfifo(blob_file(store, info.key), 0o600)
    refused = _returns_in_time(lambda: store.blobs.read(info.key), blob_file(store, info.key))
    assert isinstance(refused, IntegrityError) and f"blob {info.key} cannot be read: it is not a file" in str(refused)
    secret = tmp_path / "secret"
    os.mkfifo(secret, 0o600)
    refused = _returns_in_time(lambda: load_secret(secret), secret)
    assert isinstance(refused, BadArgument) and f"the checkpoint secret {secret}: it is not a file" in str(refused)
    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.truncate(1 << 40)  # sparse: a terabyte that takes no room, and that a whole read would try to hold
    big.chmod(0o600)
    with pytest.raises(BadArgument, match="holds more than 65536 bytes"):
        load_secret(big)
