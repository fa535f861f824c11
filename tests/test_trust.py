"""Nothing unsigned ever runs: an attacker who can write the store, but has not the secret, runs no code.

Each test writes to the store as such an attacker would (a shared filesystem, a
wrong mode, a backup from elsewhere), then drives the surfaces a user has: the
magic, the REST API, the server's crash restore and the command line. The proof
is a marker file that the planted code would create and that must not appear.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import cli
from objectstore import notebook

from jupyter_ckpt import processes
from jupyter_ckpt.errors import IntegrityError
from jupyter_ckpt.manifest import new_uid
from jupyter_ckpt.restore import LAZY_MIN
from jupyter_ckpt.store import Store, load_secret
from jupyter_ckpt.writer import ForkWriter, adopt

pytest_plugins = ("pytest_jupyter.jupyter_server", "conftest_server")

CKPT = ("api", "ckpt")


@pytest.fixture(autouse=True)
def every_cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint after every cell, so each test knows which checkpoint holds which cell's state."""
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_kernel_config.py").write_text("c.Checkpoints.every = 1\n")
    monkeypatch.setenv("IPYTHONDIR", str(profile.parent))


def _payload_pickle(marker: Path) -> bytes:
    """A pickle stream that creates ``marker`` when it is unpickled, as planted code would run anything."""
    return f"cposix\nsystem\n(Vtouch {marker}\ntR.".encode()


def _catalog(root: Path) -> sqlite3.Connection:
    return sqlite3.connect(root / "catalog.sqlite", isolation_level=None)


async def test_a_planted_pickle_stream_in_a_lazily_restored_chunk_never_runs(
    notebook: Any, api: Any, ckpt_app: Any, tmp_path: Path
) -> None:
    """Two names share a pickle stream over ``LAZY_MIN`` that does not compress: it is stored as raw chunks.
    Its first chunk, rewritten without the secret, is refused before a byte of it is unpickled: by the magic
    (lazy restores are the default), by REST, and by the server's crash restore."""
    marker = tmp_path / "ran"
    nb = await notebook("work/shared.ipynb")
    await nb.ok("import os\nbig = [os.urandom(4096) for _ in range(20000)]\nalias = big")
    (made,) = await nb.wait_for_checkpoints(1)
    await nb.ok("%checkpoint wait")
    store = ckpt_app.store
    manifest = store.manifest(made["id"])
    group = manifest["groups"][manifest["variables"]["big"]["group"]]
    stream = group["buffers"][0]
    assert stream["size"] >= LAZY_MIN and not stream.get("mappable")  # a stream, that a lazy restore once mapped
    path, offset, _ = store.blobs.raw_extent(stream["chunks"][0])  # raw and page-aligned: mappable as a file
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(_payload_pickle(marker))

    nb.kill()  # the server restores the last good state, which holds the stream
    _, event = await nb.next_crash_event(0)
    assert event["type"] == "crash-restore-failed" and "fails its signature check" in event["message"]
    assert not marker.exists()
    code, message = await api.error(
        "POST", *CKPT, "checkpoints", str(made["id"]), "restore", body={"kernel_id": nb.kernel_id}
    )
    assert code == 409 and "fails its signature check" in message
    result = await nb.run(f"%checkpoint restore {made['id']}")
    assert result.stderr.startswith("UsageError: ") and "fails its signature check" in result.stderr
    assert not marker.exists()
    assert await nb.value("'big' in globals()") is False


async def test_an_edited_cell_is_never_replayed_and_verify_names_it(
    notebook: Any, api: Any, ckpt_app: Any, tmp_path: Path
) -> None:
    """Replay runs recorded cells: their sources are signed and chained. One edited in the catalog is run by
    neither the magic nor REST, and ``jupyter ckpt verify`` reports it; the offer shows the code first."""
    marker = tmp_path / "ran"
    nb = await notebook("work/replay.ipynb")
    await nb.ok("gen = (i * i for i in range(5))\nfirst = next(gen)")
    await nb.ok("import sqlite3\ndb = sqlite3.connect(':memory:')")
    made = (await nb.wait_for_checkpoints(2))[-1]
    await nb.ok("del gen, db\n%checkpoint wait")

    # Untouched, the offer shows the code that would run, before anything runs.
    shown = await nb.ok(f"%checkpoint restore {made['id']}")
    assert "%checkpoint replay would rebuild db, gen (cells [1], [2]) by running this code again:" in shown
    assert "[1] gen = (i * i for i in range(5))\n        first = next(gen)" in shown
    assert "[2] import sqlite3\n        db = sqlite3.connect(':memory:')" in shown

    root = ckpt_app.store.root
    with _catalog(root) as db:
        db.execute("UPDATE cells SET source=? WHERE count=1", (f"open({str(marker)!r}, 'w')\ngen = iter([0])",))
    assert ckpt_app.store.verify() != []
    r = cli("verify")
    assert r.returncode == 3 and "cell [1] fails its signature check" in r.stdout, r

    summary = await nb.ok(f"%checkpoint restore {made['id']} --replay")
    assert "fails its signature check" in summary and "would rebuild" not in summary
    result = await nb.run("%checkpoint replay")
    assert "nothing to replay" in result.stderr
    restored = await api("POST", *CKPT, "checkpoints", str(made["id"]), "restore", body={"kernel_id": nb.kernel_id})
    assert restored["replayable"] == "" and restored["replay_cells"] == []
    assert "fails its signature check" in restored["summary"]
    code, message = await api.error("GET", *CKPT, "checkpoints", str(made["id"]))
    assert code == 409 and "cell [1]" in message  # the details would show the edited source as recorded
    assert not marker.exists()
    assert await nb.value("('gen' in globals(), 'db' in globals())") == (False, False)


async def test_cells_dropped_or_reordered_in_the_catalog_break_the_chain(notebook: Any, ckpt_app: Any) -> None:
    nb = await notebook("work/chain.ipynb")
    for n in range(3):
        await nb.ok(f"step = {n}")
    last = (await nb.wait_for_checkpoints(3))[-1]
    await nb.ok("%checkpoint wait")
    store = ckpt_app.store
    with _catalog(store.root) as db:
        ids = [r[0] for r in db.execute("SELECT id FROM cells ORDER BY id")]
        db.execute("UPDATE cells SET prev=? WHERE id=?", (ids[0], ids[2]))  # the middle cell dropped
    problems = store.verify()
    assert any("cell [3] fails its signature check" in p for p in problems), problems
    result = await nb.run(f"%checkpoint history {last['id']}")
    assert result.stderr.startswith("UsageError: ") and "fails its signature check" in result.stderr


async def test_a_manifest_moved_to_another_checkpoint_is_refused(notebook: Any, api: Any, ckpt_app: Any) -> None:
    """A valid manifest and signature copied into another row would restore the older state under the newer id."""
    nb = await notebook("work/moved.ipynb")
    await nb.ok("state = 'old'")
    await nb.ok("state = 'new'")
    old, new = await nb.wait_for_checkpoints(2)
    await nb.ok("%checkpoint wait")
    store = ckpt_app.store
    with _catalog(store.root) as db:
        text, mac = db.execute("SELECT manifest, mac FROM checkpoints WHERE id=?", (old["id"],)).fetchone()
        db.execute("UPDATE checkpoints SET manifest=?, mac=? WHERE id=?", (text, mac, new["id"]))
    assert json.loads(text)["uid"]  # what binds it to its own row

    code, message = await api.error(
        "POST", *CKPT, "checkpoints", str(new["id"]), "restore", body={"kernel_id": nb.kernel_id}
    )
    assert code == 409 and "signed for another checkpoint" in message
    result = await nb.run(f"%checkpoint restore {new['id']}")
    assert result.stderr.startswith("UsageError: ") and "signed for another checkpoint" in result.stderr
    r = cli("verify")
    assert r.returncode == 3 and f"checkpoint {new['id']}: its manifest was signed for another checkpoint" in r.stdout
    assert await nb.value("state") == "new"


def refused_in_one_line(kernels: Any, notebook: str, said: str) -> Any:
    """The command line and ``%load_ext`` both refuse the store, in one line that says ``said``; returns the kernel."""
    r = cli("list")
    assert r.returncode == 3 and r.stderr.count("\n") == 1 and said in r.stderr, r
    fresh = kernels(notebook)
    loaded = fresh.run("%load_ext jupyter_ckpt")
    assert loaded.error is not None and said in loaded.error
    assert loaded.traceback == [loaded.error]
    return fresh


def test_a_store_or_secret_others_can_touch_is_refused_in_one_line(kernels: Any, jupyter_dirs: Path) -> None:
    """ssh's rule: a store directory others can write, or a secret others can read, is not used. Its mode is
    the user's to change: nothing here changes it."""
    k = kernels("perm.ipynb")
    k.ok("%load_ext jupyter_ckpt\nx = 1\n%checkpoint save\n%checkpoint wait")
    k.close()
    root, secret = Path(os.environ["JUPYTER_CKPT_DIR"]), jupyter_dirs / "data" / "ckpt" / "secret"
    assert secret.is_file()
    cases = [(root, 0o777, "chmod go-w"), (root / "blobs", 0o777, "chmod go-w"), (secret, 0o644, "chmod 600")]
    for path, mode, fix in cases:
        before = path.stat().st_mode & 0o777
        path.chmod(mode)
        fresh = refused_in_one_line(kernels, "perm.ipynb", f"it is not used until you run: {fix} {path}")
        assert "not found" in fresh.run("%checkpoint").stderr  # not loaded
        fresh.close()
        assert path.stat().st_mode & 0o777 == mode  # left as the user set it
        path.chmod(before)
    assert cli("list").returncode == 0


def test_the_one_time_signing_of_an_older_store_signs_nothing_planted(kernels: Any, jupyter_dirs: Path) -> None:
    """A store written before cells and identities were signed is signed once, when a kernel opens it; a note in
    the catalog says it was. Anyone who can write the catalog can delete that note: the signing that runs again
    must not sign a planted cell, nor a signed manifest moved to another checkpoint's row."""
    marker = jupyter_dirs / "ran"
    k = kernels("first.ipynb")
    # Saved in the notebook's first cell: no cell was recorded yet, so its manifest names no history.
    k.ok("%load_ext jupyter_ckpt\na = 1\ng = (i for i in range(3))\n%checkpoint save -t first")
    k.ok("b = 2\n%checkpoint save -t second\n%checkpoint wait")
    k.close()
    other = kernels("other.ipynb")
    other.ok("%load_ext jupyter_ckpt\nmine = 'base'\n%checkpoint save -t base")
    other.ok("mine = 'other notebook'\n%checkpoint save -t theirs\n%checkpoint wait")
    other.close()
    with _catalog(Path(os.environ["JUPYTER_CKPT_DIR"])) as db:
        (sid,) = db.execute("SELECT id FROM sessions WHERE key LIKE '%first.ipynb'").fetchone()
        planted = f"open({str(marker)!r}, 'w')\ng = (i for i in range(3))"
        cell = db.execute(
            "INSERT INTO cells (session_id, prev, count, source, status, duration, time, mac) "
            "VALUES (?, NULL, 1, ?, 'ok', 0.1, 0, NULL)",
            (sid, planted),
        ).lastrowid
        db.execute("UPDATE checkpoints SET last_cell=? WHERE tag='first'", (cell,))
        db.execute("UPDATE checkpoints SET session_id=? WHERE tag='theirs'", (sid,))  # another notebook's state
        db.execute("DELETE FROM meta WHERE key='bound'")

    fresh = kernels("first.ipynb")
    fresh.ok("%load_ext jupyter_ckpt")
    for tag in ("first", "theirs"):  # left out of the timeline: their manifests name another row
        r = fresh.run(f"%checkpoint restore {tag}")
        assert f"no checkpoint or tag {tag!r}" in r.stderr, r
    assert "nothing to replay" in fresh.run("%checkpoint replay").stderr
    assert fresh.value("'mine' in globals()") is False
    r = cli("verify")
    assert r.returncode == 3 and r.stdout.count("signed for another checkpoint") == 2, r
    assert not marker.exists()
    fresh.ok("%checkpoint restore second")  # what was signed as it is still restores
    assert fresh.value("(a, b)") == (1, 2)
    fresh.close()
    # Nor does a deletion that gives the moved checkpoint another parent sign it with its new row.
    store = Store(Path(os.environ["JUPYTER_CKPT_DIR"]), load_secret(jupyter_dirs / "data" / "ckpt" / "secret"))
    session = next(s["key"] for s in store.sessions() if s["key"].endswith("first.ipynb"))
    with _catalog(store.root) as db:
        theirs, parent = db.execute("SELECT id, parent FROM checkpoints WHERE tag='theirs'").fetchone()
    assert theirs not in [r.id for r in store.checkpoints(session)]
    store.delete([parent])
    with pytest.raises(IntegrityError, match="signed for another checkpoint"):
        store.manifest(theirs)


def test_a_missing_secret_beside_a_store_that_holds_checkpoints_is_not_made_again(
    kernels: Any, jupyter_dirs: Path
) -> None:
    """A new secret would make every checkpoint read as tampered, and the store would hold checkpoints signed with
    two secrets: a kernel and the CLI say the secret is missing and change nothing until it is back."""
    k = kernels("lost.ipynb")
    k.ok("%load_ext jupyter_ckpt\nx = 1\n%checkpoint save -t kept\n%checkpoint wait")
    k.close()
    secret = jupyter_dirs / "data" / "ckpt" / "secret"
    aside = secret.with_name("secret.aside")
    secret.rename(aside)
    refused_in_one_line(kernels, "lost.ipynb", f"the checkpoint secret {secret} is missing, but the store")
    # Loaded from the profile as the kernel starts: said in the first cell, and by %checkpoint, in one line.
    assert cli("enable").returncode == 0
    enabled = kernels("lost.ipynb")
    first = enabled.run("y = 2")
    assert first.error is None and first.stderr.count("\n") == 1, first
    assert first.stderr.startswith(f"jupyter-ckpt is not loaded: the checkpoint secret {secret} is missing")
    magic = enabled.run("%checkpoint list").stderr
    assert magic.startswith("UsageError: jupyter-ckpt is not loaded: the checkpoint secret")
    assert magic.endswith("start afresh; once that is fixed: %load_ext jupyter_ckpt\n")
    assert not secret.exists()
    aside.rename(secret)
    enabled.ok("%load_ext jupyter_ckpt\n%checkpoint restore kept")  # tried again, once the secret is back
    assert enabled.value("x") == 1


def test_a_writer_result_planted_in_the_store_is_never_committed(kernels: Any, jupyter_dirs: Path) -> None:
    """A kernel commits the results its checkpoint writers leave in ``blobs/tmp`` (also those of a kernel that was
    killed). One planted there without the secret, naming the notebook's session, was committed and signed as the
    notebook's newest checkpoint; its manifest put a directory of the attacker's on ``sys.path`` and a module of it
    among the imports, which the restore then imported."""
    marker = jupyter_dirs / "ran"
    k = kernels("victim.ipynb")
    k.ok("%load_ext jupyter_ckpt\nx = 1\n%checkpoint save\n%checkpoint wait")
    k.close()
    root = Path(os.environ["JUPYTER_CKPT_DIR"])
    lib = jupyter_dirs / "lib"
    lib.mkdir()
    (lib / "planted_module.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    with _catalog(root) as db:
        (text,) = db.execute("SELECT manifest FROM checkpoints ORDER BY id DESC LIMIT 1").fetchone()
        blobs = [[key, 0, 0, False] for (key,) in db.execute("SELECT blob FROM refs")]
    manifest = json.loads(text)
    manifest["modules"]["planted"] = "planted_module"
    manifest["paths"] = {"sys_path_front": [str(lib)], "sys_path_end": []}
    planted = root / "blobs" / "tmp" / "result.999999999.1.json"  # a writer whose kernel is gone
    planted.write_text(json.dumps({"ok": [manifest, blobs, []]}))
    nested = root / "blobs" / "tmp" / "result.999999999.2.json"  # one that stopped %load_ext with a RecursionError
    nested.write_text("[" * 200_000)

    fresh = kernels("victim.ipynb")
    loaded = fresh.run("%load_ext jupyter_ckpt")
    store = Store(root, load_secret(jupyter_dirs / "data" / "ckpt" / "secret"))
    made = store.checkpoints(manifest["session"])
    assert not any("planted" in store.manifest(r.id)["modules"] for r in made)
    assert not planted.exists() and not nested.exists()
    fresh.ok("%checkpoint restore latest")
    assert not marker.exists()
    assert loaded.error is None and "fails its signature check" in loaded.stderr, loaded
    assert fresh.value("x") == 1
    assert cli("verify").returncode == 0


def test_a_store_directory_replaced_by_a_link_outside_it_is_refused_and_gc_deletes_nothing_there(
    kernels: Any, jupyter_dirs: Path
) -> None:
    """``gc`` deletes the files of dead writers in ``blobs/tmp``. That directory replaced by a link to another
    (the user's project) made it delete every file there; a kernel's writes went there too. The store makes
    its own directories: a link in their place is refused in one line, and nothing is deleted."""
    k = kernels("linked.ipynb")
    k.ok("%load_ext jupyter_ckpt\nx = 1\n%checkpoint save\n%checkpoint wait")
    k.close()
    project = jupyter_dirs / "project"
    project.mkdir()
    (project / "notes.txt").write_text("six hours of work")
    tmp = Path(os.environ["JUPYTER_CKPT_DIR"]) / "blobs" / "tmp"
    shutil.rmtree(tmp)
    tmp.symlink_to(project)
    r = cli("gc")
    assert (project / "notes.txt").read_text() == "six hours of work"
    assert r.returncode == 3 and r.stderr.count("\n") == 1 and f"{tmp} is a symbolic link" in r.stderr, r
    refused_in_one_line(kernels, "linked.ipynb", f"{tmp} is a symbolic link").close()
    assert (project / "notes.txt").exists() and list(project.iterdir()) == [project / "notes.txt"]


def test_links_planted_where_the_writers_put_their_files_overwrite_nothing(kernels: Any, jupyter_dirs: Path) -> None:
    """A writer's result and a blob go to a temp file in ``blobs/tmp`` first, under a name that can be guessed (the
    kernel's pid and a count). A link planted under that name made the writer write the result through it, over
    the file it points to; the link is now replaced, never followed. So is the marker of a restore at start-up,
    which was read through a link and printed in the notebook ("died while it restored checkpoint <the file>")."""
    victim = jupyter_dirs / "thesis.tex"
    victim.write_text("chapter 1")
    k = kernels("planted.ipynb")
    tmp = Path(os.environ["JUPYTER_CKPT_DIR"]) / "blobs" / "tmp"
    tmp.mkdir(parents=True)
    planted = [tmp / f"result.{running_as(k.pid)}.{n}.json" for n in range(1, 10)]  # the kernel's results' names
    for link in planted:
        link.symlink_to(victim)
    k.ok("%load_ext jupyter_ckpt\nx = 'kept'")
    k.ok("y = 2\n%checkpoint wait")
    assert victim.read_text() == "chapter 1"
    assert not planted[0].is_symlink()  # the name was the one a writer used
    k.ok("del x\n%checkpoint undo")
    assert k.value("x") == "kept"
    k.close()
    # A kernel restoring as it starts marks it in start-restore.<its pid and start>.<the session's digest>.
    (jupyter_dirs / "ipython" / "profile_default" / "ipython_kernel_config.py").write_text(
        "c.Checkpoints.restore_on_start = True\n"
    )
    fresh = kernels("planted.ipynb")
    marker = tmp / f"start-restore.{running_as(fresh.pid)}.{hashlib.sha256(b'planted.ipynb').hexdigest()[:16]}"
    marker.symlink_to(victim)
    assert "restored kernel checkpoint" in fresh.run("%load_ext jupyter_ckpt").stderr
    assert victim.read_text() == "chapter 1"
    assert not marker.is_symlink()  # the name was the one the restore marked
    assert fresh.value("x") == "kept"


def running_as(pid: int) -> str:
    """How the store's temp files name the running process ``pid`` (``processes.owner`` as it sees itself)."""
    return f"{pid}-{processes.started(pid)}-{processes.here()}"


@pytest.mark.parametrize("planted", ["5", "[" * 200_000, '{"ok": ["[{}, [], []]", "0000"]}', '{"ok": 1}'])
def test_a_result_put_in_the_place_of_a_running_writers_is_not_committed(store: Store, planted: str) -> None:
    """Between a writer's end and its kernel's look, its result file can be replaced. One not signed is a failed
    checkpoint, said as such; one that was no JSON object, or nested past Python's limit, raised out of the
    kernel's poll (a TypeError, a RecursionError) and the save was never settled."""
    outcomes: list[tuple[Any, BaseException | None]] = []
    opened = "a checkpoint writer's result"
    writer = ForkWriter(store.blobs.tmp, store.seal, lambda sealed: store.unseal(sealed, opened))
    writer.submit(lambda progress: ["the writer's own"], lambda value, error: outcomes.append((value, error)))
    deadline = time.time() + 30
    while not (results := list(store.blobs.tmp.glob("result.*.json"))) and time.time() < deadline:
        time.sleep(0.01)
    results[0].write_text(planted)
    writer.poll(block=True)
    ((value, error),) = outcomes
    assert value is None and error is not None
    if planted.startswith('{"ok"'):
        assert isinstance(error, IntegrityError) and "writer's result fails its signature check" in str(error)


def test_a_catalog_that_is_a_link_to_another_database_is_refused_and_that_database_left_alone(
    kernels: Any, jupyter_dirs: Path
) -> None:
    """SQLite opens a database through a link. A catalog replaced by a link to another SQLite file of the user's (an
    application's, a project's) had a kernel create the store's tables in it and turn on its write-ahead log."""
    k = kernels("linkdb.ipynb")
    k.ok("%load_ext jupyter_ckpt\nx = 1\n%checkpoint save\n%checkpoint wait")
    k.close()
    theirs = jupyter_dirs / "project.sqlite"
    with sqlite3.connect(theirs) as db:
        db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT)")
        db.execute("INSERT INTO orders (item) VALUES ('tea')")
    before = theirs.read_bytes()
    catalog = Path(os.environ["JUPYTER_CKPT_DIR"]) / "catalog.sqlite"
    catalog.rename(catalog.with_name("catalog.aside"))
    catalog.symlink_to(theirs)
    refused_in_one_line(kernels, "linkdb.ipynb", f"{catalog} is a symbolic link").close()
    assert theirs.read_bytes() == before


def test_a_state_a_cell_left_broken_marked_ok_in_the_catalog_is_not_what_a_new_kernel_resumes(
    kernels: Any, jupyter_dirs: Path
) -> None:
    """A checkpoint's status (``ok``, or ``error`` when its cell raised) chooses what ``restore_on_start``, crash
    recovery and ``last-good`` bring back. It was read from the catalog's unsigned column: marked ``ok`` there by
    someone without the secret, the state a failing cell had left was what the next kernel resumed."""
    root = Path(os.environ["JUPYTER_CKPT_DIR"])
    k = kernels("resume.ipynb")
    k.ok("%load_ext jupyter_ckpt\nx = 'good'")
    assert "ZeroDivisionError" in k.run("x = 'broken'\n1/0").error
    store = Store(root, load_secret(jupyter_dirs / "data" / "ckpt" / "secret"))
    session = store.sessions()[0]["key"]
    deadline = time.time() + 60
    while [r.status for r in store.checkpoints(session)][-1:] != ["error"] and time.time() < deadline:
        time.sleep(0.1)
    k.close()
    assert [r.status for r in store.checkpoints(session)] == ["ok", "error"]
    with _catalog(root) as db:
        db.execute("UPDATE checkpoints SET status='ok' WHERE status='error'")
    config = Path(os.environ["IPYTHONDIR"]) / "profile_default" / "ipython_kernel_config.py"
    config.write_text(config.read_text() + "c.Checkpoints.restore_on_start = True\n")
    fresh = kernels("resume.ipynb")
    fresh.ok("%load_ext jupyter_ckpt")
    assert fresh.value("x") == "good"
    assert "changed by hand" in cli("verify").stdout
    fresh.close()


def test_a_writer_result_copied_and_put_back_is_adopted_once(store: Store) -> None:
    """A writer's result is signed, so a copy of it, taken while it waited in ``blobs/tmp`` and put back after its
    checkpoint was committed (or deleted), verified: it was committed again, as a new checkpoint of the notebook
    (a state the user had deleted came back). A result is committed once: its checkpoint's uid, given at capture,
    is in the catalog already, or among the deleted."""
    nb = notebook(store)
    nb.save()
    (record,) = store.checkpoints("nb.ipynb")
    with _catalog(store.root) as db:
        blobs = [[key, 0, 0, False] for (key,) in db.execute("SELECT blob FROM refs")]
    manifest = {**store.manifest(record.id), "uid": new_uid()}  # a state a writer wrote as its kernel died
    text = json.dumps(store.seal({"kernel": [999999999, None], "ok": [manifest, blobs, []]}))
    result = store.blobs.tmp / "result.999999999.1.json"
    result.write_text(text)
    (adopted,) = adopt(store)
    result.write_text(text)  # a copy put back
    assert adopt(store) == [] and not result.exists()
    store.delete([adopted])
    result.write_text(text)  # put back once that checkpoint is deleted
    assert adopt(store) == [] and not result.exists()
    assert [r.id for r in store.checkpoints("nb.ipynb")] == [record.id]


def test_a_pipe_a_link_or_an_endless_file_planted_as_a_writer_result_is_removed_unread(store: Store) -> None:
    """Every kernel's start and every gc look at the writers' results in ``blobs/tmp`` to commit those of killed
    kernels. A result was read whole, following links, before its signature was checked: a named pipe planted there
    made ``%load_ext`` (and ``jupyter ckpt gc``) wait forever, a link was read through (to ``/dev/zero``: forever),
    and a sparse file of a terabyte ended them in a MemoryError. Each is now removed unread."""
    tmp = store.blobs.tmp
    os.mkfifo(tmp / "result.999999999.1.json")
    (tmp / "result.999999999.2.json").symlink_to(tmp.parent.parent / "catalog.sqlite")
    with open(tmp / "result.999999999.3.json", "wb") as f:
        f.truncate(1 << 40)
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(adopt(store)), daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "adopting a planted result never ended"
    assert outcome == [[]] and not list(tmp.glob("result.*")), (outcome, list(tmp.iterdir()))


async def test_a_crash_restore_takes_the_signed_status_not_one_edited_in_the_catalog(
    notebook: Any, ckpt_app: Any
) -> None:
    """Crash recovery restores the newest state a cell left without error. It read each checkpoint's status from
    the catalog's unsigned column: the failing cell's state marked ``ok`` there, and the good one ``error``, by
    someone without the secret, was what a killed kernel came back with."""
    nb = await notebook("analysis.ipynb")
    await nb.ok("x = 1")
    failed = await nb.run("x = 'broken'\nraise ValueError('bad data')")
    assert failed.error == "ValueError: bad data"
    good, bad = await nb.wait_for_checkpoints(2)
    with _catalog(ckpt_app.store.root) as db:
        db.execute("UPDATE checkpoints SET status='ok' WHERE id=?", (bad["id"],))
        db.execute("UPDATE checkpoints SET status='error' WHERE id=?", (good["id"],))
    nb.kill()
    _, event = await nb.next_crash_event(0)
    assert (event["type"], event["checkpoint"]) == ("crash-restore", good["id"])
    assert await nb.value("x") == 1
