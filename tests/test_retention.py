"""Retention: the store stays under its budget and above the disk's floor of free space, thinning as documented,
and maintenance typed in one notebook stays in that notebook."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import cli
from test_store import manifest

from jupyter_ckpt.blobs import WriteLimit
from jupyter_ckpt.capture import blob_keys
from jupyter_ckpt.checkpointer import Checkpointer
from jupyter_ckpt.errors import StoreFullError
from jupyter_ckpt.retention import Limits, Retention, usage
from jupyter_ckpt.store import Store, load_secret
from jupyter_ckpt.timeline import Timeline, never_thinned


def commit_with_blob(store: Store, session: str, size: int, *, status: str = "ok") -> int:
    info = store.blobs.put(os.urandom(size), compress=False)
    return store.commit(session, manifest(session, status=status), {info.key: info})


def test_manual_thinning_keeps_recent_dense_old_sparse_and_tags(store: Store) -> None:
    ids = [store.commit("nb.ipynb", manifest(), {}) for _ in range(40)]
    store.tag(ids[1], "savepoint")
    thinned = Timeline(store).thin(["nb.ipynb"], keep_last=10, sparse=True)
    survivors = [r.id for r in store.checkpoints("nb.ipynb")]
    assert set(ids[-10:]) <= set(survivors)
    assert ids[1] in survivors
    # One per power-of-two window of age among the 30 older ones, plus the tag.
    assert len(survivors) - 10 == len({age.bit_length() for age in range(1, 31)}) + 1
    assert thinned.checkpoints == 40 - len(survivors) and thinned.sessions == {"nb.ipynb": thinned.checkpoints}


def test_thinning_to_a_size_keeps_tags_and_the_newest_good_states(store: Store) -> None:
    ids = [commit_with_blob(store, "nb.ipynb", 100_000) for _ in range(12)]
    failed = commit_with_blob(store, "nb.ipynb", 100_000, status="error")
    store.tag(ids[0], "baseline")
    Timeline(store).thin(["nb.ipynb"], target=350_000)
    left = [r.id for r in store.checkpoints("nb.ipynb")]
    # The tag, the two newest good states (what crash recovery tries) and the newest of all stay.
    assert set(left) == {ids[0], ids[-2], ids[-1], failed}
    assert never_thinned(store.checkpoints("nb.ipynb")) == set(left)
    assert store.referenced_size() <= 4 * (100_000 + 4096)
    assert store.verify() == []


def test_thinning_beside_another_gc_leaves_it_what_it_took_first(store: Store, jupyter_dirs: Path) -> None:
    """Two passes at once (a kernel's thinning and ``jupyter ckpt gc``, two terminals): the one second to a
    checkpoint both had listed failed whole, "no checkpoint 7078", exit 1 (and a kernel's pass said "thinning
    failed"). It goes on, and counts only what it deleted itself."""
    ids = [commit_with_blob(store, "nb.ipynb", 10_000) for _ in range(12)]
    other = Store(store.root, load_secret(jupyter_dirs / "data" / "ckpt" / "secret"))  # another process's
    by_the_other: list[int] = []
    delete = store.delete

    def after_the_other(checkpoint_ids: list[int], **options: Any) -> list[int]:
        other.delete(checkpoint_ids[:1])  # the other pass was first to one of them
        by_the_other.extend(checkpoint_ids[:1])
        return delete(checkpoint_ids, **options)

    store.delete = after_the_other  # type: ignore[method-assign]
    thinned = Timeline(store).gc(["nb.ipynb"], 0, 0)
    left = {r.id for r in store.checkpoints("nb.ipynb")}
    assert left == never_thinned(store.checkpoints("nb.ipynb")) == {ids[-2], ids[-1]}
    assert by_the_other and thinned.checkpoints == len(ids) - len(left) - len(by_the_other)
    assert store.verify() == []


def test_what_a_writer_killed_mid_write_left_is_collected(store: Store) -> None:
    """A writer killed as it wrote (by the out-of-memory killer, or ``kill -9``) left its temp files in the store:
    700 MiB of them after 0.6 s of an 800 MB array, kept for the kernel's life and counted nowhere (the store's
    size said 0 bytes, so no budget saw them). What it left goes as soon as it is known to be dead."""
    module = types.ModuleType("__main__")
    module.big = np.random.default_rng(0).random(50_000_000)  # type: ignore[attr-defined]  # 400 MB, a while
    ckpt = Checkpointer(store, "killed.ipynb", module, background=True)
    assert ckpt._fork is not None
    ckpt.record_cell(1, "big = ...", True, 1.0)
    ckpt.save(trigger="cell", cell=1)
    child = ckpt._fork._children[0].pid
    deadline = time.monotonic() + 30
    while sum(f.stat().st_size for f in store.blobs.tmp.glob(f"*.{child}-*")) < 50 << 20:  # well under way
        assert time.monotonic() < deadline, "the writer wrote nothing"
        time.sleep(0.01)
    os.kill(child, 9)
    module.big = None  # type: ignore[attr-defined]  # the cells go on
    ckpt.record_cell(2, "big = None", True, 0.1)
    ckpt.wait()
    ckpt.retention.settle()
    assert len(ckpt.checkpoints()) == 1  # the state, written from the kernel
    on_disk = sum(f.stat().st_size for f in store.root.rglob("*") if f.is_file())
    assert on_disk <= store.size() + (1 << 20), (on_disk, store.size())  # 1 MiB: directories, the secret
    assert list(store.blobs.tmp.glob(f"*.{child}-*")) == []


def test_a_write_past_the_budget_or_the_floor_is_refused_and_writes_nothing(store: Store) -> None:
    store.blobs.limit = WriteLimit(room=10_000, full="the checkpoint store is at its size budget (10 KiB)")
    with pytest.raises(StoreFullError, match="size budget \\(10 KiB\\); the checkpoint was not written"):
        store.blobs.put(os.urandom(20_000))
    store.blobs.put(os.urandom(5_000))  # within the room
    free = os.statvfs(store.root).f_bavail * os.statvfs(store.root).f_frsize
    store.blobs.limit = WriteLimit(keep_free=free)  # any write would go below the floor
    with pytest.raises(StoreFullError, match=r"always leaves .* free there"):
        store.blobs.put(os.urandom(1_000))
    assert len(store.blobs.listing()) == 1
    assert list(store.blobs.tmp.iterdir()) == []


def test_a_budget_of_two_checkpoints_and_a_half_keeps_taking_the_newest(store: Store) -> None:
    """Each cell binds 11.5 MiB of fresh data under a 30 MiB budget. Thinning kept the two newest good states (what
    crash recovery tries) also when it made room for a third, which would be the newest once written: after two
    checkpoints, every save failed, and a kernel lost then lost every cell since. The older of the two goes."""
    said: list[str] = []
    module = types.ModuleType("__main__")
    ckpt = Checkpointer(store, "nb.ipynb", module, notify=said.append, limits=Limits(max_store_size=30 << 20))
    for i in range(6):
        module.a = np.random.default_rng(i).random(1_500_000)  # type: ignore[attr-defined]
        module.i = i  # type: ignore[attr-defined]
        assert ckpt.save() is not None
        ckpt.retention.settle()
        assert store.size() <= 30 << 20
    assert said == []
    # Room is kept for the next: of two good states that do not fit beside it, the newest alone stays.
    assert [store.manifest(r.id)["variables"]["i"]["repr"] for r in ckpt.checkpoints()] == ["5"]


def test_a_notebook_at_the_store_s_budget_thins_old_checkpoints_of_others_but_never_what_they_need(
    store: Store,
) -> None:
    """The budget is the store's (SPEC 2.3): a notebook that takes the store past it thins the oldest untagged
    checkpoints, another notebook's too, but never that notebook's tags, newest, or two newest good states."""
    other = types.ModuleType("__main__")
    b = Checkpointer(store, "b.ipynb", other, limits=Limits(max_store_size=40 << 20))
    for i in range(4):
        other.y = np.random.default_rng(100 + i).random(500_000)  # type: ignore[attr-defined]  # 3.8 MiB each
        b.save(tag="baseline" if i == 0 else None)
    module = types.ModuleType("__main__")
    a = Checkpointer(store, "a.ipynb", module, limits=Limits(max_store_size=40 << 20))
    for i in range(8):
        module.x = np.random.default_rng(i).random(500_000)  # type: ignore[attr-defined]
        assert a.save() is not None
        a.retention.settle()
    assert store.size() <= 40 << 20
    kept = [r.id for r in store.checkpoints("b.ipynb")]
    assert kept == sorted(never_thinned(store.checkpoints("b.ipynb")))  # b's old untagged one went
    assert [r.tag for r in store.checkpoints("b.ipynb")] == ["baseline", None, None]
    assert [r.id for r in store.checkpoints("a.ipynb")][-1] == a.head


def test_a_pass_that_must_make_room_counts_the_catalog_and_says_nothing_when_no_save_failed(store: Store) -> None:
    """The store's size holds its catalog (and its write-ahead log) beside the blobs: thinning until the blobs
    alone fit left it over, and the failed save was never tried again. A pass after a commit that fitted, in
    case the next does not, tells nothing: no save failed."""
    for _ in range(12):
        commit_with_blob(store, "nb.ipynb", 100_000)
    said: list[str] = []
    catalog = sum(p.stat().st_size for p in store.root.glob("catalog.sqlite*"))
    assert catalog > 100_000  # more than one checkpoint's blob: the blobs alone fitting is not enough
    retention = Retention(store, Limits(max_store_size=catalog + 500_000), set, said.append)
    retention.committed(100_000)  # the next one of its size would not fit: thinned ahead
    retention.settle()
    assert said == []
    retried: list[int] = []
    retention.failed(100_000, lambda: retried.append(1))
    retention.settle()
    u = usage(store, retention.limits)
    assert retried == [1] and u.size <= u.budget - 100_000 and said == []


def test_a_save_refused_by_the_floor_of_free_space_names_the_floor_not_the_budget(store: Store) -> None:
    free = os.statvfs(store.root).f_bavail * os.statvfs(store.root).f_frsize
    limits = Limits(max_store_size=None, max_store_share=1.0, min_free_share=1.0, min_free=free - 10_000)
    store.blobs.limit = Retention(store, limits, set, print).limit()
    with pytest.raises(StoreFullError, match=r"is nearly full: jupyter-ckpt always leaves .* free there"):
        store.blobs.put(os.urandom(50_000), compress=False)


def test_gc_keeps_what_a_save_in_progress_wrote_or_reused(store: Store) -> None:
    old = store.blobs.put(b"old unreferenced" * 100)
    os.utime(store.blobs.path(old.key), (time.time() - 60, time.time() - 60))
    store.blobs.hold(time.time() - 1)  # a save begins
    again = store.blobs.put(b"old unreferenced" * 100)  # it reuses the old blob: fresh again
    written = store.blobs.put(b"written by the save" * 100)
    assert not again.new
    store.gc()  # e.g. another kernel's retention, before the save commits
    assert store.blobs.has(old.key) and store.blobs.has(written.key)
    store.commit("nb.ipynb", manifest(), {written.key: written})
    store.blobs.release()
    os.utime(store.blobs.path(old.key), (time.time() - 60, time.time() - 60))  # a minute later
    store.gc()
    assert store.blobs.has(written.key) and not store.blobs.has(old.key)


def _holding(store: Store, since: float, then: str, *within: str) -> subprocess.Popen[str]:
    """Another process that opens ``store``, begins a save at ``since`` (its lease), says so, then runs ``then``;
    started ``within`` a command (``unshare``) if given."""
    code = (
        "import sys, time\nfrom pathlib import Path\nfrom jupyter_ckpt.store import Store\n"
        f"store = Store({str(store.root)!r}, Path(sys.argv[1]).read_bytes().strip())\n"
        f"store.blobs.hold({since})\nprint('held', flush=True)\n{then}"
    )
    secret = Path(os.environ["JUPYTER_DATA_DIR"]) / "ckpt" / "secret"
    process = subprocess.Popen([*within, sys.executable, "-c", code, str(secret)], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline() == "held\n"
    process.stdout.close()
    return process


def _kept_by_a_save_in_progress(store: Store, since: float, written_at: float, *within: str) -> str:
    """A blob written at ``written_at`` by a save another process (started ``within`` a command if given) began at
    ``since``: a gc keeps it while that process lives. Its key; the process is killed after."""
    written = store.blobs.put(b"written by a save in progress" * 100)
    os.utime(store.blobs.path(written.key), (written_at, written_at))
    writer = _holding(store, since, "time.sleep(300)", *within)
    try:
        store.gc()
        assert store.blobs.has(written.key)
    finally:
        writer.kill()
        writer.wait()
    return written.key


def test_a_lease_that_no_living_writer_holds_keeps_nothing_from_gc(store: Store) -> None:
    """A lease (``blobs/tmp/lease.<pid>``) keeps every gc from collecting what was written since it began, while its
    process lives. One left by a kernel whose pid an unrelated long-lived process has now, or one put there with an
    old time, was taken for a live writer's: no gc collected anything newer, and the store grew past its budget. A
    lease now proves whose it is (the pid's start time, signed); a live writer's still holds."""
    old = time.time() - 3600
    garbage = store.blobs.put(b"nothing references this" * 100)
    os.utime(store.blobs.path(garbage.key), (old + 60, old + 60))
    _holding(store, old, "").wait()  # a kernel's save began an hour ago, and the kernel died
    left = next(store.blobs.tmp.glob("lease.*"))
    sleeper = subprocess.Popen(["sleep", "300"])  # an unrelated program, with the pid the kernel had, say
    try:
        _, _, *rest = left.name.split(".")  # its pid, start time and signature
        left.rename(store.blobs.tmp / ".".join(["lease", str(sleeper.pid), *rest]))
        planted = store.blobs.tmp / f"lease.{os.getppid()}"  # put there: a live process, an old time
        planted.write_text(f"{os.getppid()}")
        os.utime(planted, (old, old))
        store.gc()
        assert not store.blobs.has(garbage.key)
    finally:
        sleeper.kill()
        sleeper.wait()
    written = _kept_by_a_save_in_progress(store, old, old + 60)  # a live writer's lease, from its own process
    store.gc()
    assert not store.blobs.has(written)


def test_a_save_in_progress_in_another_container_keeps_what_it_wrote_from_a_gc_here(store: Store) -> None:
    """A store shared by processes in other PID namespaces (kernels in containers, JupyterHub named servers on one
    home): a save in progress in one of them was taken for a dead process's (its pid means another process here, or
    none), and a gc here collected the blobs it had written, which its checkpoint was about to reference. A lease
    from elsewhere holds, until it is older than a save takes (an hour)."""
    if subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True).returncode:
        pytest.skip("a new PID namespace needs root")
    elsewhere = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc"]
    written = _kept_by_a_save_in_progress(store, time.time() - 60, time.time() - 59, *elsewhere)
    (lease,) = store.blobs.tmp.glob("lease.*")  # its process, killed with its namespace, could not release it
    os.utime(lease, (time.time() - 7200, time.time() - 7200))  # a save does not take two hours
    store.gc()
    assert not store.blobs.has(written)


def test_a_blob_reused_after_a_gc_listed_it_as_old_stays(store: Store) -> None:
    """The race a gc beside a starting save ran: it listed an unreferenced blob as old, the save reused it
    (touching it, so as not to write it again), and the gc deleted it: the save's commit was refused for a
    missing blob. The gc reads the file's time again once it has moved it aside."""
    old = store.blobs.put(b"old unreferenced" * 100)
    os.utime(store.blobs.path(old.key), (time.time() - 60, time.time() - 60))
    cutoff = time.time() - 0.1
    assert store.blobs.listing()[old.key].modified < cutoff  # what the gc listed
    again = store.blobs.put(b"old unreferenced" * 100)  # a save starts and reuses it
    assert not again.new
    assert store.blobs.collect(old.key, cutoff) is None and store.blobs.has(old.key)
    os.utime(store.blobs.path(old.key), (time.time() - 60, time.time() - 60))
    assert store.blobs.collect(old.key, cutoff) == again.stored and not store.blobs.has(old.key)
    assert list(store.blobs.tmp.iterdir()) == []


def test_the_budget_is_the_smaller_of_the_share_and_the_cap(store: Store) -> None:
    st = os.statvfs(store.root)
    disk = st.f_blocks * st.f_frsize
    u = usage(store, Limits(max_store_share=0.5, max_store_size=1 << 20, min_free_share=0.1, min_free=1 << 30))
    assert u.budget == 1 << 20 and u.why == "max_store_size"
    assert u.floor == min(int(0.1 * disk), 1 << 30)
    u = usage(store, Limits(max_store_share=1e-9, max_store_size=None))
    assert u.budget == int(1e-9 * disk) and "max_store_share" in u.why
    assert u.allowed == min(u.budget, u.size + u.free - u.floor)


@contextlib.contextmanager
def tmpfs(mount: Path, options: str) -> Iterator[Path]:
    """A tmpfs mounted at ``mount`` with ``options`` (``size=512m``), for the block."""
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture
def small_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A 512 MiB tmpfs holding the store (and nothing else), like a small home directory on a hub."""
    with tmpfs(tmp_path / "small", "size=512m") as mount:
        monkeypatch.setenv("JUPYTER_CKPT_DIR", str(mount / "store"))
        yield mount


def test_a_disk_another_process_filled_is_said_once_and_wait_says_the_state_is_not_durable(
    kernels: Any, small_disk: Path
) -> None:
    """The catalog's rollback after SQLite had ended the transaction itself hid the full disk: each cell said
    "cannot rollback - no transaction is active", ``wait`` returned, and the state was lost. The cells' history
    went below the floor of free space, and a save said its writer "died before finishing"."""
    k = kernels("full.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto on\nimport jupyter_ckpt")
    k.ok("a = 1\n%checkpoint wait")
    filler = small_disk / "someone-else.bin"
    with open(filler, "wb") as f, contextlib.suppress(OSError):  # another process takes every byte left
        while True:
            f.write(b"\0" * (1 << 20))
            f.flush()
    said = "".join(k.run(cell).stderr for cell in ("b = 2", "c = 3", "d = 4"))
    assert "rollback" not in said and said.count("cells are not recorded") == 1, said
    for command in ("%checkpoint save", "jupyter_ckpt.wait()"):
        r = k.run(command)
        assert "full" in (r.error or r.stderr) and "died before finishing" not in (r.error or r.stderr), (command, r)
        said += r.stderr
    # Said once the thinning that could not make room is over, in the background: at the next cell's boundary.
    deadline = time.monotonic() + 10
    while "Free disk space" not in said and time.monotonic() < deadline:
        time.sleep(0.5)
        said += k.run("pass").stderr
    assert "Free disk space, lower c.Checkpoints.min_free" in said and "Raise c.Checkpoints" not in said, said
    filler.unlink()
    k.ok("e = 5\n%checkpoint wait")  # room again: the state is durable
    again = kernels("full.ipynb")
    again.ok("%load_ext jupyter_ckpt\n%checkpoint restore previous")
    assert again.value("(a, b, c, d, e)") == (1, 2, 3, 4, 5)


def _three_checkpoints_by_another_process(session: str) -> list[str]:
    """The ids of three checkpoints of ``session`` a process wrote in the store and ended, n = 0, 1, 2."""
    write = f"""if True:
        import types
        from jupyter_ckpt.checkpointer import Checkpointer
        from jupyter_ckpt.config import open_store
        module = types.ModuleType("nb")
        ckpt = Checkpointer(open_store(), {session!r}, module)
        for n in range(3):
            module.n = n
            print(ckpt.save())
    """
    return subprocess.run([sys.executable, "-c", write], capture_output=True, text=True, check=True).stdout.split()


def test_on_a_full_disk_the_command_line_reads_the_store_and_gc_says_why_it_cannot(
    jupyter_dirs: Path, small_disk: Path
) -> None:
    """Every command, ``list`` and ``verify`` too, said "the catalog ... is unreadable (disk I/O error)", exit 3 (a
    damaged store), once another process had filled the disk: SQLite could not make its log's index there. They
    read the catalog as the file it is; ``gc``, which must write it, says the disk is full, and changes nothing."""
    ids = _three_checkpoints_by_another_process("full.ipynb")
    root = small_disk / "store"
    filler = small_disk / "someone-else.bin"
    with open(filler, "wb") as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * (1 << 20))
            f.flush()
    listed = cli("list", "full.ipynb")
    assert listed.returncode == 0 and listed.stdout.count(" manual ") == 3, listed
    assert cli("verify").stdout.endswith("3 checkpoint(s) in 1 session(s), 0 problem(s)\n")
    assert "n: int" in cli("show", ids[1]).stdout
    assert cli("export", ids[1], str(jupyter_dirs / "state.pkl")).returncode == 0  # onto another disk
    thinned = cli("gc", "--keep-last", "0")
    assert thinned.returncode == 5, thinned
    full = f"the disk under the store {root} is full; nothing was changed. Make room on it."
    assert thinned.stderr == f"jupyter ckpt: error: {full}\n"
    filler.unlink()
    assert cli("verify").stdout.endswith("3 checkpoint(s) in 1 session(s), 0 problem(s)\n")


def test_gc_on_a_read_only_disk_says_it_is_the_store_that_cannot_be_written(
    jupyter_dirs: Path, small_disk: Path
) -> None:
    """``gc`` on a store whose disk is mounted read-only (an archive, a snapshot) exited 1, as for an unknown
    checkpoint: it is the store's condition (``StoreReadOnly``), exit 3 as for a store file the system will not
    read (and HTTP 500 over REST, where it was 400, which blames the request)."""
    _three_checkpoints_by_another_process("archived.ipynb")
    _gc_refused_on_a_read_only_disk(small_disk, "--keep-last", "0")


def _gc_refused_on_a_read_only_disk(disk: Path, *options: str) -> None:
    """``jupyter ckpt gc`` with the store's disk mounted read-only: one line, exit 3, no byte of the store changed."""
    before = {p: p.read_bytes() for p in (disk / "store").rglob("*") if p.is_file()}
    subprocess.run(["mount", "--bind", str(disk), str(disk)], check=True)
    subprocess.run(["mount", "-o", "remount,ro,bind", str(disk)], check=True)
    try:
        thinned = cli("gc", *options)
    finally:
        subprocess.run(["umount", str(disk)], check=True)
    assert thinned.returncode == 3, thinned
    assert thinned.stderr.startswith("jupyter ckpt: error: the checkpoint store cannot be written (a read-only disk")
    assert thinned.stderr.count("\n") == 1
    assert {p: p.read_bytes() for p in (disk / "store").rglob("*") if p.is_file()} == before


def test_gc_on_a_read_only_disk_where_a_killed_kernel_s_writer_finished_says_the_store_cannot_be_written(
    jupyter_dirs: Path, small_disk: Path
) -> None:
    """A gc adopts what the writers of killed kernels finished. On a store whose disk is read-only, that is the store
    that cannot be written, said in one line, as for any gc there, and the state stays for when it can be."""
    kernel = """if True:
        import os, time, types
        from jupyter_ckpt.checkpointer import Checkpointer
        from jupyter_ckpt.config import open_store
        module = types.ModuleType("nb")
        module.n = 1
        ckpt = Checkpointer(open_store(), "archived.ipynb", module, background=True)
        ckpt.record_cell(1, "n = 1", True, 0.1)
        ckpt.save(trigger="cell", cell=1)
        while not list(ckpt.store.blobs.tmp.glob("result.*.json")):
            time.sleep(0.01)
        os._exit(0)  # killed before it committed what its writer finished
    """
    subprocess.run([sys.executable, "-c", kernel], check=True)
    _gc_refused_on_a_read_only_disk(small_disk)
    assert cli("gc").returncode == 0  # writable again: adopted
    secret = load_secret(jupyter_dirs / "data" / "ckpt" / "secret")
    assert [r.cell for r in Store(small_disk / "store", secret).checkpoints("archived.ipynb")] == [1]


def _resumed(kernels: Any, store: Store, session: str) -> Any:
    """After a kernel on ``session`` was killed: ``jupyter ckpt verify`` finds the store whole, and a new kernel
    goes back to the newest good checkpoint in it (what killed writers finished included), whose ``x`` is the
    one its ``n`` made. The new kernel."""
    verified = cli("verify")
    assert verified.returncode == 0 and verified.stdout.endswith(", 0 problem(s)\n"), verified
    k = kernels(session)
    k.ok("%load_ext jupyter_ckpt\nimport numpy as np, jupyter_ckpt")  # it adopts what the killed writers left
    newest = [r for r in store.checkpoints(session) if r.status == "ok"][-1]
    k.ok("%checkpoint restore previous")
    assert k.value("n") == int(store.manifest(newest.id)["variables"]["n"]["repr"])
    assert k.value("bool((x == np.random.default_rng(n).random(len(x))).all())") is True
    return k


def test_a_kernel_killed_during_gc_leaves_a_store_that_verifies_and_its_newest_state(
    kernels: Any, store: Store, jupyter_dirs: Path
) -> None:
    k = kernels("gc.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto off\nimport numpy as np, jupyter_ckpt")
    mid_gc = 0
    for delay in (0.02, 0.06, 0.12):
        k.ok(  # 120 checkpoints of fresh data: gc drops about 110 of them and 450 files, in about 0.1 s
            "for n in range(120):\n    x = np.random.default_rng(n).random(5_000)\n"
            "    ys = [np.random.default_rng(n * 100 + i).random(2_000) for i in range(3)]\n    jupyter_ckpt.save()"
        )
        done = jupyter_dirs / f"gc-{delay}"
        k.kc.execute(f"%checkpoint gc --keep-last 0\nopen({str(done)!r}, 'w').close()")
        time.sleep(delay)
        k.kill()
        mid_gc += not done.exists()
        k = _resumed(kernels, store, "gc.ipynb")
        k.ok("%checkpoint auto off")
    assert mid_gc, "no kill landed before gc finished: the test proved nothing"


def test_a_kernel_killed_while_it_thins_the_store_leaves_a_store_that_verifies_and_its_newest_state(
    kernels: Any, store: Store, jupyter_dirs: Path
) -> None:
    profile = jupyter_dirs / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_config.py").write_text('c.Checkpoints.max_store_size = "3M"\n')  # 3 cells' data
    k = kernels("thin.ipynb")
    k.ok("%load_ext jupyter_ckpt\nimport numpy as np")
    k.ok("n = 0\nx = np.random.default_rng(n).random(100_000)")
    k.ok("%checkpoint wait")  # a state to go back to, wherever the first kill lands
    n = 1
    for delay in (0.1, 0.3, 0.6, 1.0):
        k.ok("%checkpoint auto on")
        for _ in range(8):  # sent at once: the kernel runs them, its writers commit and it thins, as it is killed
            k.kc.execute(f"n = {n}\nx = np.random.default_rng(n).random(100_000)")
            n += 1
        time.sleep(delay)
        k.kill()
        k = _resumed(kernels, store, "thin.ipynb")
    k.ok("%checkpoint auto on")
    for m in range(n, n + 5):  # more than the budget holds, whatever the kills left: the last kernel thins too
        k.ok(f"n = {m}\nx = np.random.default_rng(n).random(100_000)")
        k.ok("%checkpoint wait")
    ids = [r.id for r in store.checkpoints("thin.ipynb")]
    assert len(ids) < max(ids) and store.size() <= 3 << 20  # it thinned: checkpoints are gone
    assert k.value("n") == n + 4


def test_writers_running_at_once_share_the_budget(kernels: Any, jupyter_dirs: Path, small_disk: Path) -> None:
    """Each writer forked back to back was given the whole room under the budget: four 7.6 MiB arrays left a
    store of 30.7 MiB under a 16 MiB budget, for good (what is never thinned was itself past it)."""
    profile = jupyter_dirs / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_config.py").write_text('c.Checkpoints.max_store_size = "16M"\n')
    k = kernels("budget.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto on\nimport numpy as np\nrng = np.random.default_rng(0)")
    for n in range(1, 5):
        k.ok(f"a{n} = rng.random(1_000_000)")
    k.run("%checkpoint wait")  # the newest state may not fit: said, not the point here
    on_disk = sum(p.stat().st_size for p in (small_disk / "store").rglob("*") if p.is_file())
    assert on_disk <= 16 << 20, on_disk
    assert k.value("len(__import__('jupyter_ckpt').list())") >= 1  # what fits is kept (thinning picks which)


def test_a_long_session_of_fresh_data_never_fills_a_small_disk(kernels: Any, small_disk: Path) -> None:
    """40 cells, each binding 20 MB of fresh random doubles, on a 512 MiB disk: the budget is a quarter of it.
    Every cell is checkpointed (``auto on``), back to back: thinning runs beside the writers."""
    k = kernels("fresh.ipynb")
    k.ok("%load_ext jupyter_ckpt")
    k.ok("import numpy as np\nrng = np.random.default_rng(0)\n%checkpoint auto on")
    k.ok("%checkpoint save -t start")
    lowest_free = 1 << 62
    outputs = ""
    for i in range(40):
        r = k.run(f"a = rng.random(2_500_000); last = float(a.sum()); i = {i}")
        assert r.error is None, r.error
        outputs += r.stdout + r.stderr
        st = os.statvfs(small_disk)
        lowest_free = min(lowest_free, st.f_bavail * st.f_frsize)
    expected = k.value("last")
    k.ok("%checkpoint wait")
    used = sum(f.stat().st_size for f in small_disk.rglob("*") if f.is_file())
    status = k.ok("%checkpoint status")
    listed = k.ok("%checkpoint list --all")
    k.close()

    st = os.statvfs(small_disk)
    floor = int(0.1 * st.f_blocks * st.f_frsize)
    assert lowest_free > floor  # the disk never went below its floor of free space
    assert used <= (512 << 20) // 4  # within the budget
    assert "store size:" in status and "budget" in status
    assert "start" in listed  # the tagged checkpoint is never thinned
    assert listed.count("\n") < 20  # thinned: far fewer than the 42 checkpoints taken
    assert outputs == ""  # nothing to say: no failure, and so no "written again"

    k = kernels("fresh.ipynb")
    k.ok("%load_ext jupyter_ckpt")
    k.ok("%checkpoint restore previous")
    assert k.value("float(a.sum())") == expected and k.value("i") == 39


def test_maintenance_typed_in_one_notebook_stays_in_it(kernels: Any, store: Store) -> None:
    a, b = kernels("a.ipynb"), kernels("b.ipynb")
    for k in (a, b):
        k.ok("%load_ext jupyter_ckpt\n%checkpoint auto on")
        for i in range(8):
            k.ok(f"x = {i}")
            k.ok("%checkpoint wait")  # each cell's own checkpoint: none gives way to a newer one
    counts = {s["key"]: s["checkpoints"] for s in store.sessions()}
    assert counts["a.ipynb"] >= 8 and counts["b.ipynb"] >= 8
    out = a.ok("%checkpoint gc --keep-last 2")
    assert "of a.ipynb" in out and "b.ipynb" not in out
    after = {s["key"]: s["checkpoints"] for s in store.sessions()}
    assert after["a.ipynb"] < counts["a.ipynb"]
    assert after["b.ipynb"] == counts["b.ipynb"]  # the other notebook keeps every checkpoint
    assert b.value("x") == 7 and b.ok("%checkpoint undo") and b.value("x") == 6  # B's timeline is whole
    out = a.ok("%checkpoint gc --max-size 1K")  # the newest 20 stay: the target cannot be met, and it says why
    assert "over --max-size 1.0 KiB: the newest 20 of each notebook (--keep-last)" in out
    out = a.ok("%checkpoint gc --keep-last 2 --all")
    assert "b.ipynb" in out
    assert {s["key"]: s["checkpoints"] for s in store.sessions()}["b.ipynb"] < counts["b.ipynb"]


def _own_bytes(store: Store, session: str) -> int:
    """The bytes of the blob files a session's checkpoints reference."""
    keys = {k for r in store.checkpoints(session) for k in blob_keys(store.manifest(r.id))}
    return sum(store.blobs.path(k).stat().st_size for k in keys)


def test_a_size_given_to_gc_in_one_notebook_bounds_that_notebook_s_own_checkpoints(kernels: Any, store: Store) -> None:
    """``%checkpoint gc --max-size`` typed in a notebook thins that notebook only (SPEC 2.3), so the size it bounds is
    that notebook's: measured against the whole store, which another notebook filled, it took all of this
    notebook's history that could go, and the store was still over the size all the same."""
    a, b = kernels("small.ipynb"), kernels("large.ipynb")
    b.ok("%load_ext jupyter_ckpt\n%checkpoint auto on\nimport numpy as np")
    for i in range(3):
        b.ok(f"big = np.random.default_rng({i}).random(500_000)")  # 4 MB a cell
        b.ok("%checkpoint wait")
    a.ok("%load_ext jupyter_ckpt\n%checkpoint auto on\nimport numpy as np")
    for i in range(30):
        a.ok(f"x = np.random.default_rng({i}).random(5_000)\n%checkpoint wait")  # 44 kB a cell
    a.ok("%checkpoint gc")  # the newest 20, and one per power-of-two window of age before them
    kept, large = len(store.checkpoints("small.ipynb")), len(store.checkpoints("large.ipynb"))
    limit = _own_bytes(store, "small.ipynb") - 20_000  # one checkpoint's data fewer
    out = a.ok(f"%checkpoint gc --max-size {limit}")
    assert _own_bytes(store, "small.ipynb") <= limit
    assert len(store.checkpoints("small.ipynb")) == kept - 1 > 20  # one went, not every one that may
    assert len(store.checkpoints("large.ipynb")) == large
    assert "small.ipynb (1)" in out and "large.ipynb" not in out and "this notebook's checkpoints hold" in out, out
    out = a.ok("%checkpoint gc --max-size 1K")  # what never goes is more than that: it says whose
    assert "this notebook's checkpoints still hold" in out and "over --max-size 1.0 KiB" in out, out


def test_looking_at_the_timeline_answers_when_the_save_before_it_fails(kernels: Any, jupyter_dirs: Path) -> None:
    profile = jupyter_dirs / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_config.py").write_text('c.Checkpoints.max_store_size = "1K"\n')
    k = kernels("tiny.ipynb")
    k.ok("%load_ext jupyter_ckpt")
    said = k.run("x = 1")
    time.sleep(3)  # idle: its checkpoint fails, and the store cannot make room
    said.stderr += k.run("x = 2").stderr
    assert said.stderr.count("store can take only") == 1  # said once, plainly, with the option to change
    assert "c.Checkpoints.max_store_size" in said.stderr
    for command in ("list", "status", "history"):
        r = k.run(f"y = {command!r}\n%checkpoint {command}")
        assert r.error is None, f"%checkpoint {command}: {r.error}"
    assert "1.0 KiB budget (max_store_size)" in k.ok("%checkpoint status")
    assert "no kernel checkpoints yet" in k.ok("%checkpoint list")


def test_wait_says_the_newest_state_found_no_room_instead_of_returning(kernels: Any, jupyter_dirs: Path) -> None:
    """Guarantee 7: ``wait`` makes the state the cells left durable, or says it could not. Its save failed in the
    background for want of room (said once); ``wait`` tries it again and raises, until a state fits again."""
    profile = jupyter_dirs / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_config.py").write_text('c.Checkpoints.max_store_size = "3M"\n')
    k = kernels("room.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto on\nimport numpy as np\nimport jupyter_ckpt")
    k.ok("x = np.random.default_rng(0).random(250_000)\n%checkpoint save -t base")
    said = k.run("y = np.random.default_rng(1).random(250_000)").stderr
    time.sleep(2)  # idle: the checkpoint of y fails, and thinning cannot make room (the tag stays)
    said += k.run("z = 1").stderr
    assert said.count("store can take only") == 1
    status = k.run("%checkpoint status").stdout
    assert "not stored for want of room: the state after cell " in status and "size budget" in status
    assert re.search(r"checkpoint overhead: \d+\.\d\d s over \d+\.\d\d s of execution \(\d+\.\d%\)", status)
    for command in ("%checkpoint wait", "jupyter_ckpt.wait()"):
        r = k.run(command)
        assert "size budget (3.0 MiB, max_store_size)" in (r.error or r.stderr), command
    before = k.value("len(jupyter_ckpt.list())")
    k.ok("y = None\n%checkpoint wait")  # a state that fits: durable again
    assert k.value("len(jupyter_ckpt.list())") > before
    assert k.value("jupyter_ckpt.list()[-1].cell") == k.value("len(In) - 3")  # that cell's state
    assert "want of room" not in k.run("%checkpoint status").stdout


def test_a_look_at_the_timeline_reports_the_failed_save_beside_its_answer(store: Store) -> None:
    said: list[str] = []
    module = types.ModuleType("__main__")
    ckpt = Checkpointer(store, "nb.ipynb", module, notify=said.append, limits=Limits(max_store_size=1024))
    module.x = list(range(10_000))
    ckpt.after_cell(1, "x = list(range(10_000))", True, 0.5)  # owed: taken when idle, or before a look
    assert ckpt.checkpoints() == []
    assert ckpt.history()[-1]["source"].startswith("x =")
    assert any("the newest state is not on the timeline" in line and "size budget" in line for line in said)
    ckpt.retention.settle()
    assert sum("store can take only" in line for line in said) == 1


def test_a_malformed_retention_option_is_named_in_one_line(kernels: Any, jupyter_dirs: Path) -> None:
    profile = jupyter_dirs / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_config.py").write_text('c.Checkpoints.min_free = "plenty"\n')
    k = kernels("typo.ipynb")
    r = k.run("%load_ext jupyter_ckpt")
    assert "c.Checkpoints.min_free: 'plenty' is not a size" in (r.error or "")
    assert k.value("1 + 1") == 2


def test_an_undo_runs_when_the_state_it_replaces_cannot_be_checkpointed_first(store: Store) -> None:
    said: list[str] = []
    module = types.ModuleType("__main__")
    ckpt = Checkpointer(store, "nb.ipynb", module, notify=said.append, limits=Limits(max_store_size=1 << 20))
    module.x = [1]  # type: ignore[attr-defined]
    ckpt.save()
    module.x = [2]  # type: ignore[attr-defined]
    before = ckpt.save()
    module.x = os.urandom(4 << 20)  # type: ignore[attr-defined]  # more than the store can take
    ckpt.after_cell(3, "x = os.urandom(4 << 20)", True, 0.5)  # not checkpointed yet
    report = ckpt.undo()  # going back matters more than keeping what the store cannot hold
    assert module.x == [2] and report.checkpoint == before  # type: ignore[attr-defined]  # the state before the cell
    # The state it replaced is checkpointed without x, which no thinning makes room for: said once.
    assert sum("not checkpointed: x (bytes: 4.0 MiB, larger than the checkpoint" in line for line in said) == 1


def test_a_store_of_many_small_variables_leaves_the_disk_files_for_the_notebook(
    kernels: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk runs out of files (inodes) as well as bytes: each blob is a file, and 20 small variables changed
    by every cell made 34 files a checkpoint. On a disk of 600 files, the store took every file but one while
    it used 2% of the bytes: the user could no longer save the notebook beside it, and every checkpoint after
    failed, for thinning counted only bytes. The floor of free space keeps files free too, and thinning makes
    room when files run short."""
    with tmpfs(tmp_path / "home", "size=64m,nr_inodes=600") as home:
        monkeypatch.setenv("JUPYTER_CKPT_DIR", str(home / "store"))
        k = kernels("many.ipynb")
        k.ok("%load_ext jupyter_ckpt\n%checkpoint auto on")
        fewest_free = 1 << 62
        said = ""
        for _ in range(40):
            r = k.run("n = len(In) - 1\nfor i in range(20):\n    globals()[f'v{i}'] = {'n': n, 'data': [i] * 50}")
            assert r.error is None, r.error
            waited = k.run("%checkpoint wait")  # each cell's own checkpoint
            said += r.stdout + r.stderr + waited.stdout + waited.stderr + (waited.error or "")
            fewest_free = min(fewest_free, os.statvfs(home).f_favail)
        newest = k.value("__import__('jupyter_ckpt').list()[-1].cell")
        last = k.value("n")  # the last cell that changed the variables
        k.close()
        floor = Limits().files_floor(os.statvfs(home).f_files)
        # The notebook and its outputs, saved beside the store as Jupyter saves a file: a temp file, then a rename.
        for name in ("analysis.ipynb", "results.csv", "figure.png"):
            (home / f".~{name}").write_text("{}")
            (home / f".~{name}").rename(home / name)
    assert floor == 60 and fewest_free >= floor, fewest_free
    assert said == ""  # no checkpoint failed for want of files
    assert newest >= last  # the newest cell's state is on the timeline: thinning made room for it


def test_a_variable_larger_than_the_whole_budget_is_left_out_and_the_rest_is_checkpointed(
    kernels: Any, jupyter_dirs: Path
) -> None:
    """No thinning makes room for a variable larger than the store's whole budget. While one was bound, every
    checkpoint failed (said once) and the cells after it were checkpointed no more: a kernel lost then lost them
    all. It is left out, as one that cannot be serialized (said once, with its size and the budget), and the rest
    of the state is checkpointed; a restore names it and the cell that makes it."""
    profile = jupyter_dirs / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_config.py").write_text('c.Checkpoints.max_store_size = "4M"\n')
    k = kernels("huge.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto on\nimport numpy as np\nimport jupyter_ckpt")
    said = k.run("x = np.random.default_rng(0).random(1_000_000)").stderr  # 7.6 MiB of a 4 MiB budget
    time.sleep(2)  # idle: its checkpoint fails, and is taken again without x
    for y in range(1, 4):
        said += k.run(f"y = {y}\nn = len(In) - 1").stderr
        said += k.run("%checkpoint wait").stderr
    assert said.count("x (ndarray: 7.6 MiB, larger than the checkpoint store's whole budget (4.0 MiB") == 1, said
    assert "store can take only" not in said, said
    assert k.value("[r.cell for r in jupyter_ckpt.list()][-1]") == k.value("n")  # the cell y = 3
    k.close()
    fresh = kernels("huge.ipynb")
    restored = fresh.ok("%load_ext jupyter_ckpt\n%checkpoint restore previous")
    assert "not restored: x (" in restored and "%checkpoint replay would rebuild x" in restored, restored
    assert fresh.value("y") == 3


def fill_up(path: Path, leave: int = 0) -> None:
    """Another process takes every byte left on the disk but about ``leave``, into the file ``path``."""
    st = os.statvfs(path.parent)
    with open(path, "wb", buffering=0) as f, contextlib.suppress(OSError):
        f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))
        while not leave:
            f.write(b"\0" * (64 << 10))


def test_a_first_use_on_a_full_disk_says_the_disk_is_full_and_works_once_there_is_room(
    kernels: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a disk with no room, the first ``%load_ext`` showed a traceback ending in ``OSError: [Errno 28] No space
    left on device`` (the secret), and with the secret elsewhere "the catalog ... is unreadable (database or disk
    is full)", the error of a damaged store. Both say the disk is full, and leave nothing that stops the store
    once there is room."""
    with tmpfs(tmp_path / "home", "size=4m") as home:
        monkeypatch.setenv("JUPYTER_DATA_DIR", str(home / "data"))
        monkeypatch.setenv("JUPYTER_CKPT_DIR", str(home / "store"))
        filler = home / "someone-else.bin"
        fill_up(filler)
        k = kernels("first.ipynb")
        r = k.run("%load_ext jupyter_ckpt")
        said = (r.error or "") + r.stderr
        assert "is full" in said and "Traceback" not in said and "unreadable" not in said, said
        filler.unlink()
        (home / "data" / "ckpt").mkdir(parents=True, exist_ok=True)
        Path(home / "data" / "ckpt" / "secret").write_text("x" * 64)  # the secret written; now the catalog's turn
        os.chmod(home / "data" / "ckpt" / "secret", 0o600)
        fill_up(filler)
        r = k.run("%reload_ext jupyter_ckpt")
        said = (r.error or "") + r.stderr
        assert "is full" in said and "Traceback" not in said and "unreadable" not in said, said
        filler.unlink()
        k.ok("%reload_ext jupyter_ckpt\nx = 1\n%checkpoint save")
        assert k.value("len(__import__('jupyter_ckpt').list())") == 1
        k.close()


def test_a_blob_a_killed_gc_left_aside_goes_back_and_a_checkpoint_that_uses_it_restores(
    store: Store, jupyter_dirs: Path
) -> None:
    """A gc moves each old unreferenced blob aside (``blobs/tmp/gc.<its process>.<key>``), reads its time again there
    and moves it back if a save used it meanwhile. A gc killed between the two (a kernel killed while its retention
    thinned, ``jupyter ckpt gc`` interrupted) left the blob there, and a save that had found the blob before it moved
    committed a checkpoint that uses it: the next gc deleted the blob as a dead process's temp file, and that
    checkpoint could no longer be restored. A dead gc's blob goes back where it was."""
    info = store.blobs.put(os.urandom(50_000), compress=False)
    old, key = store.commit("nb.ipynb", manifest(), {info.key: info}), info.key
    aside = store.blobs.tmp / f"gc.4194305-1.{key}"  # the gc that was killed: no process has that pid
    store.blobs.path(key).rename(aside)
    assert cli("gc").returncode == 0
    assert cli("verify").stdout.endswith("1 checkpoint(s) in 1 session(s), 0 problem(s)\n")
    assert store.blobs.has(key) and not aside.exists()
    store.delete([old])
    os.utime(store.blobs.path(key), (time.time() - 60, time.time() - 60))
    store.blobs.path(key).rename(aside)  # one no checkpoint uses any more: collected all the same
    assert cli("gc").returncode == 0
    assert not store.blobs.has(key) and list(store.blobs.tmp.iterdir()) == []
