"""A forked writer never causes an out-of-memory kill: the headroom, the watcher, the first victim, the fallback."""

from __future__ import annotations

import ast
import contextlib
import ctypes
import mmap
import os
import pickle
import re
import signal
import sqlite3
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from bystanders import hold_kernel_caches, leaving

from jupyter_ckpt import memory
from jupyter_ckpt.capture import Meta, collect, link, prepare
from jupyter_ckpt.checkpointer import Checkpointer
from jupyter_ckpt.errors import OutOfMemory
from jupyter_ckpt.restore import restore_namespace
from jupyter_ckpt.serialize import preview
from jupyter_ckpt.store import Store
from jupyter_ckpt.writer import (
    ForkWriter,
    WriterStopped,
    _listed_shared_writable,
    _queried_shared_writable,
    shared_writable_mapping,
)

GIB, MIB = 1 << 30, 1 << 20
UNLIMITED_V1 = "9223372036854771712"  # what a v1 group without a limit reads


def lay_out(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def machine(
    root: Path, cgroup: str, available: int = 12 * GIB, total: int = 16 * GIB, kernel_caches: int = 0
) -> tuple[Path, Path]:
    """A /proc with ``meminfo`` and ``self/cgroup``, and an empty cgroup root, under ``root``."""
    meminfo = (
        f"MemTotal:       {total >> 10} kB\nMemFree:         1024 kB\nMemAvailable:   {available >> 10} kB\n"
        f"Slab:           {kernel_caches >> 9} kB\nKReclaimable:   {kernel_caches >> 10} kB\n"
    )
    lay_out(root / "proc", {"meminfo": meminfo, "self/cgroup": cgroup})
    (root / "cgroup").mkdir()
    return root / "proc", root / "cgroup"


def v2_group(cgroups: Path, path: str, limit: str, current: int, inactive_file: int = 0) -> None:
    stat = f"anon 123\nfile 456\ninactive_anon 0\nactive_anon 1\ninactive_file {inactive_file}\nactive_file 7\n"
    lay_out(cgroups / path, {"memory.max": f"{limit}\n", "memory.current": f"{current}\n", "memory.stat": stat})


def v1_group(cgroups: Path, path: str, limit: str, usage: int, inactive_file: int = 0) -> None:
    stat = f"cache 1\nrss 2\ninactive_file 0\ntotal_cache 3\ntotal_inactive_file {inactive_file}\n"
    files = {"memory.limit_in_bytes": f"{limit}\n", "memory.usage_in_bytes": f"{usage}\n", "memory.stat": stat}
    lay_out(cgroups / "memory" / path, files)


def test_a_restore_on_a_host_with_swap_left_is_not_refused(tmp_path: Path) -> None:
    """The out-of-memory killer runs once the swap is gone too: a restore that fits with the host's free swap runs
    (slowly, maybe), where one that does not fit even so is refused."""
    proc, cgroups = machine(tmp_path, "0::/\n", available=1 * GIB)
    with (proc / "meminfo").open("a") as meminfo:
        meminfo.write(f"SwapTotal:      {16 * GIB >> 10} kB\nSwapFree:       {8 * GIB >> 10} kB\n")
    memory.ensure_room(3 * GIB, "reading a", proc, cgroups)
    with pytest.raises(OutOfMemory, match=r"not restored: reading a takes about 9.0 GiB of memory, and only 9216 MiB"):
        memory.ensure_room(9 * GIB, "reading a", proc, cgroups)
    v2_group(cgroups, "", str(3 * GIB), 2 * GIB)  # a container's own limit, with 1 GiB left: swap does not lift it
    with pytest.raises(OutOfMemory, match=r"reading a takes about 3.0 GiB of memory, and only 1024 MiB .*cgroup /"):
        memory.ensure_room(3 * GIB, "reading a", proc, cgroups)


def test_a_small_restore_on_a_busy_host_is_not_refused_for_the_writers_reserve(tmp_path: Path) -> None:
    """The reserve (256 MiB at least) is what writers always leave. A restore of a few small variables with 200 MiB
    left was refused for it; one that takes more than half of what is left still is."""
    proc, cgroups = machine(tmp_path, "0::/\n", available=200 * MIB)
    memory.ensure_room(2 * MIB, "reading the variables", proc, cgroups)
    memory.ensure_room(100 * MIB, "reading a", proc, cgroups)
    with pytest.raises(OutOfMemory, match=r"takes about 101.0 MiB of memory, and only 200 MiB .*less than 101.0 MiB"):
        memory.ensure_room(101 * MIB, "reading a", proc, cgroups)


def test_a_v2_cgroup_near_its_limit_sets_the_headroom(tmp_path: Path) -> None:
    proc, cgroups = machine(tmp_path, "0::/user.slice/lab.scope\n")
    v2_group(cgroups, "user.slice/lab.scope", str(4 * GIB), 4 * GIB - 300 * MIB, inactive_file=100 * MIB)
    room = memory.headroom(proc, cgroups)
    assert room == memory.Headroom(400 * MIB, 4 * GIB, "cgroup /user.slice/lab.scope")  # its cache is reclaimable
    assert str(room) == "400 MiB of memory left (cgroup /user.slice/lab.scope limit)"
    assert memory.reserve(room) == 256 * MIB  # 2% of 4 GiB is less


def test_the_host_s_headroom_does_not_count_the_kernel_s_reclaimable_caches(tmp_path: Path) -> None:
    """``MemAvailable`` counts dentries and inodes as room, but one that a tmpfs file or an open file holds
    cannot be freed: the out-of-memory killer ran here with 610 MiB of them still counted (the real case is
    ``test_a_rewrite_beside_a_writer_with_little_memory_left_kills_nothing[caches held]``)."""
    proc, cgroups = machine(tmp_path, "0::/\n", available=3 * GIB, kernel_caches=GIB)
    assert memory.headroom(proc, cgroups) == memory.Headroom(2 * GIB, 16 * GIB, "host")
    proc, cgroups = machine(tmp_path / "low", "0::/\n", available=200 * MIB, kernel_caches=GIB)
    assert memory.headroom(proc, cgroups) == memory.Headroom(0, 16 * GIB, "host")


def test_a_v2_limit_of_max_leaves_the_host_s_headroom(tmp_path: Path) -> None:
    proc, cgroups = machine(tmp_path, "0::/user.slice/lab.scope\n", available=12 * GIB, total=16 * GIB)
    v2_group(cgroups, "user.slice/lab.scope", "max", 15 * GIB)
    v2_group(cgroups, "user.slice", "max", 15 * GIB)
    room = memory.headroom(proc, cgroups)
    assert room == memory.Headroom(12 * GIB, 16 * GIB, "host")
    assert memory.reserve(room) == 16 * GIB // 50


def test_a_limit_on_a_parent_group_applies_to_the_kernel_in_it(tmp_path: Path) -> None:
    proc, cgroups = machine(tmp_path, "0::/jupyter.slice/kernel-1.scope\n")
    v2_group(cgroups, "jupyter.slice/kernel-1.scope", "max", 1 * GIB)
    v2_group(cgroups, "jupyter.slice", str(8 * GIB), 7 * GIB)
    assert memory.headroom(proc, cgroups) == memory.Headroom(1 * GIB, 8 * GIB, "cgroup /jupyter.slice")


def test_the_host_wins_when_it_has_less_left_than_the_cgroup(tmp_path: Path) -> None:
    proc, cgroups = machine(tmp_path, "0::/lab\n", available=2 * GIB, total=16 * GIB)
    v2_group(cgroups, "lab", str(8 * GIB), 1 * GIB)  # 7 GiB under the group's limit, 2 GiB on the host
    assert memory.headroom(proc, cgroups) == memory.Headroom(2 * GIB, 16 * GIB, "host")


def test_a_v1_memory_cgroup_near_its_limit_sets_the_headroom(tmp_path: Path) -> None:
    cgroup = "12:pids:/docker/abc\n5:memory:/docker/abc\n1:name=systemd:/docker/abc\n0::/\n"
    proc, cgroups = machine(tmp_path, cgroup)
    v1_group(cgroups, "docker/abc", str(6 * GIB), 6 * GIB - 100 * MIB, inactive_file=50 * MIB)
    v1_group(cgroups, "", UNLIMITED_V1, 9 * GIB)  # the root: no limit
    assert memory.headroom(proc, cgroups) == memory.Headroom(150 * MIB, 6 * GIB, "cgroup /docker/abc")


def test_a_v1_group_without_a_limit_leaves_the_host_s_headroom(tmp_path: Path) -> None:
    proc, cgroups = machine(tmp_path, "4:memory:/process_api/abc\n0::/\n", available=12 * GIB)
    v1_group(cgroups, "process_api/abc", UNLIMITED_V1, 15 * GIB)
    v1_group(cgroups, "", UNLIMITED_V1, 15 * GIB)
    assert memory.headroom(proc, cgroups) == memory.Headroom(12 * GIB, 16 * GIB, "host")


def test_in_a_container_the_group_s_own_limit_is_at_the_root_of_its_view(tmp_path: Path) -> None:
    proc, cgroups = machine(tmp_path, "5:memory:/docker/abc\n")  # the path is the host's; the view has no such dir
    v1_group(cgroups, "", str(2 * GIB), 2 * GIB - 500 * MIB)
    assert memory.headroom(proc, cgroups) == memory.Headroom(500 * MIB, 2 * GIB, "cgroup /")


def test_without_proc_there_is_no_headroom_to_read(tmp_path: Path) -> None:
    assert memory.headroom(tmp_path / "proc", tmp_path / "cgroup") is None


def test_the_copy_estimate_is_the_kernel_s_private_resident_memory(tmp_path: Path) -> None:
    lay_out(tmp_path, {"self/status": "Name:\tpython\nVmRSS:\t 3000 kB\nRssAnon:\t 2048 kB\nRssFile:\t  952 kB\n"})
    assert memory.copy_estimate(tmp_path) == 2 * MIB
    before = memory.copy_estimate()
    # A mapping of its own: an array could reuse heap memory an earlier test freed, resident already.
    with mmap.mmap(-1, 64 * MIB, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS) as held:
        np.frombuffer(held, dtype=np.uint8)[:] = 1  # touched, so resident
        after = memory.copy_estimate()
    assert before is not None and after is not None and after - before >= 60 * MIB


def test_a_writer_is_the_first_victim_of_the_out_of_memory_killer(tmp_path: Path) -> None:
    writer = ForkWriter(tmp_path, encode=lambda x: x, decode=lambda x: x)
    outcomes: list[Any] = []
    writer.submit(lambda _: Path("/proc/self/oom_score_adj").read_text().strip(), lambda o, e: outcomes.append(e or o))
    writer.poll(block=True)
    assert outcomes == ["1000"]
    assert Path("/proc/self/oom_score_adj").read_text().strip() != "1000"  # the kernel's own is left as it was


def sleeps(pid_file: Path) -> Any:
    def job(progress: Any) -> str:
        pid_file.write_text(str(os.getpid()))
        time.sleep(30)
        return "written"

    return job


def test_the_watcher_stops_the_writers_when_the_headroom_falls_below_the_reserve(tmp_path: Path) -> None:
    room = memory.headroom()
    if room is None:
        pytest.skip("no /proc/meminfo: the headroom cannot be read here")
    writer = ForkWriter(tmp_path, encode=lambda x: x, decode=lambda x: x, reserve=room.free + GIB, linger=0.1)
    outcomes: list[Any] = []
    for i in range(2):
        writer.submit(sleeps(tmp_path / f"pid{i}"), lambda o, e: outcomes.append(e or o))
    writer.poll(block=True)
    assert [type(o) for o in outcomes] == [WriterStopped, WriterStopped]  # neither slept its 30 s out
    for outcome in outcomes:  # the watcher may see the first child alone, and stop the second a round later
        assert re.fullmatch(
            r"stopped a checkpoint writer: only \d+ MiB of memory left \((host|cgroup /.*) limit\), "
            r"and each page the kernel writes while a writer shares it is a copy",
            str(outcome),
        )
    assert writer.stopped == str(outcomes[1])  # what %checkpoint status says: the latest reason
    assert not writer.copies_fit()  # the kernel's memory, copied, would not leave the reserve: no fork for now
    deadline = time.monotonic() + 2
    while writer._watcher is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert writer._watcher is None  # no child left to watch, nor forked within its linger


def test_the_watcher_waits_for_the_next_child_instead_of_starting_again(tmp_path: Path) -> None:
    """Starting a thread just after a fork took 1-2.6 ms of a cell's pause: back-to-back checkpoints reuse it."""
    if memory.headroom() is None:
        pytest.skip("no /proc/meminfo: the headroom cannot be read here")
    writer = ForkWriter(tmp_path, encode=lambda x: x, decode=lambda x: x, linger=0.5)
    watchers = []
    for _ in range(2):
        writer.submit(lambda progress: "written", lambda o, e: None)
        watchers.append(writer._watcher)
        writer.poll(block=True)
        time.sleep(0.1)  # the watcher sees no child alive, and waits
    assert watchers[0] is not None and watchers[1] is watchers[0] and watchers[0].is_alive()
    watchers[0].join(timeout=2)  # and ends once its linger passes with no child
    assert not watchers[0].is_alive() and writer._watcher is None


def test_a_writer_killed_by_someone_else_is_reported_as_stopped(tmp_path: Path) -> None:
    writer = ForkWriter(tmp_path, encode=lambda x: x, decode=lambda x: x)
    outcomes: list[Any] = []
    writer.submit(sleeps(tmp_path / "pid"), lambda o, e: outcomes.append(e or o))
    deadline = time.monotonic() + 10
    while not (tmp_path / "pid").exists() or not (tmp_path / "pid").read_text():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.kill(int((tmp_path / "pid").read_text()), signal.SIGKILL)  # as the out-of-memory killer does
    writer.poll(block=True)
    assert [type(o) for o in outcomes] == [WriterStopped]
    assert str(outcomes[0]) == "a checkpoint writer was killed (signal 9), most likely by the out-of-memory killer"
    assert writer.copies_fit()  # this process, copied, fits the memory left: forks go on


def test_after_a_writer_is_stopped_the_state_is_written_inline_until_the_copies_fit(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    if memory.headroom() is None:
        pytest.skip("no /proc/meminfo: the headroom cannot be read here")
    module = types.ModuleType("__main__")
    module.__dict__["big"] = np.random.default_rng(0).random(20_000_000)  # 160 MB: its child writes a while
    notes: list[str] = []
    ckpt = Checkpointer(store, "stopped.ipynb", module, notify=notes.append, background=True)
    assert ckpt._fork is not None
    room = memory.headroom()
    assert room is not None
    monkeypatch.setattr(ckpt._fork, "_reserve", room.free + GIB)  # to the watcher, as if memory ran short at once
    ckpt.record_cell(1, "big = ...", True, 1.0)
    assert ckpt.save(trigger="cell", cell=1) is None, notes  # forked; the watcher stops the child within 20 ms
    ckpt.wait()  # the stopped child's state, written inline
    assert [r.cell for r in ckpt.checkpoints()] == [1]
    assert len(notes) == 1 and notes[0].startswith("jupyter-ckpt: stopped a checkpoint writer: only ")
    assert notes[0].endswith("; the state will be written from the kernel when it is idle")

    module.__dict__["step"] = 2
    ckpt.record_cell(2, "step = 2", True, 0.1)
    assert ckpt.save(trigger="cell", cell=2) is not None  # still short: written inline, so committed at once
    monkeypatch.undo()  # memory is back
    module.__dict__["step"] = 3
    ckpt.record_cell(3, "step = 3", True, 0.1)
    assert ckpt.save(trigger="cell", cell=3) is None  # forked again
    ckpt.wait()
    assert [r.cell for r in ckpt.checkpoints()] == [1, 2, 3]
    assert len(notes) == 1


def test_a_save_the_user_waits_for_is_written_from_the_kernel_when_its_writer_is_stopped_for_memory(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``%checkpoint save`` failed with "checkpoint failed: stopped a checkpoint writer: only N MiB of memory
    left", and its state was not owed to anything: the save the user waits for is now written at once by the
    path that needs no room for copies."""
    if memory.headroom() is None:
        pytest.skip("no /proc/meminfo: the headroom cannot be read here")
    module = types.ModuleType("__main__")
    module.__dict__["big"] = np.random.default_rng(0).random(20_000_000)  # 160 MB: its child writes a while
    ckpt = Checkpointer(store, "stopped-save.ipynb", module, background=True)
    assert ckpt._fork is not None
    room = memory.headroom()
    assert room is not None
    monkeypatch.setattr(ckpt._fork, "_reserve", room.free + GIB)  # to the watcher, as if memory ran short at once
    forks = ckpt._forks
    cid = ckpt.save(tag="kept")
    assert ckpt._forks == forks + 1  # it was forked, and its child stopped
    assert cid is not None and [(r.id, r.tag) for r in ckpt.checkpoints()] == [(cid, "kept")]
    assert "stopped a checkpoint writer: only " in (ckpt.status()["writer_stopped"] or "")
    monkeypatch.undo()
    restored = types.ModuleType("__main__")
    Checkpointer(store, "stopped-save.ipynb", restored).restore(cid)
    assert np.array_equal(restored.__dict__["big"], module.__dict__["big"])


# -- the real thing: a kernel rewrites its array while a writer shares it, with little memory left --------------


@contextlib.contextmanager
def busy_cores() -> Iterator[None]:
    """A program spinning on each core this process may run on, for the ``with`` block."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in os.sched_getaffinity(0)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def oom_kills() -> int | None:
    """How many out-of-memory kills the kernel log holds, or None if it cannot be read."""
    log = subprocess.run(["dmesg"], capture_output=True, text=True)
    if log.returncode != 0:
        return None
    return sum("Out of memory: Killed process" in line or "oom-kill" in line for line in log.stdout.splitlines())


def peek(kernel: Any, expr: str) -> Any:
    """An expression's value, from a silent request: no cell, so no checkpoint and no notice."""
    msg_id = kernel.kc.execute("", silent=True, user_expressions={"v": expr})
    while (reply := kernel.kc.get_shell_msg(timeout=30))["parent_header"].get("msg_id") != msg_id:
        pass
    value = reply["content"]["user_expressions"]["v"]
    assert value["status"] == "ok", value
    return ast.literal_eval(value["data"]["text/plain"])


@pytest.fixture(params=["caches free", "caches held"])
def host(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[None]:
    """The host as it is, or with 3 million files on a tmpfs holding 500+ MiB of the kernel's caches, as a
    long-used host's files do: ``MemAvailable`` counts them as room, and the kernel cannot free them."""
    if request.param == "caches free":
        yield
        return
    mount = tmp_path / "files"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,nr_inodes=0", "tmpfs", str(mount)]).returncode:
        pytest.skip("mounting a tmpfs needs root")
    try:
        assert hold_kernel_caches(mount) > 400 * MIB
        yield
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_rewrite_beside_a_writer_with_little_memory_left_kills_nothing(
    kernels: Any, store: Store, host: None
) -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("the headroom and the out-of-memory killer are Linux's")
    room = memory.headroom()
    if room is None or room.free < 8 * GIB:
        pytest.skip("needs 8 GiB of memory available")
    size = 2 * GIB  # the kernel's array
    kills = oom_kills()
    k = kernels("memory.ipynb")
    k.ok("%load_ext jupyter_ckpt\nimport numpy as np")
    # Leave the array and three quarters of it: more than the fork check asks (half the kernel's memory),
    # less than a rewrite beside the writer copies. Without the watcher, the copies would run memory out.
    with leaving(size + 3 * size // 4) as bystanders:
        outputs = [k.run(f"a = np.arange({size // 8}, dtype=float)")]  # distinct chunks that compress: a long write
        deadline = time.monotonic() + 10
        writing = "__import__('jupyter_ckpt').extension.active().status()['writing']"
        while not peek(k, writing):  # the checkpoint is written by a child the kernel forks when idle
            assert time.monotonic() < deadline, "no writer was started"
            time.sleep(0.05)
        # Every core is busy with other programs, so the writer (an idle-class task) stores nothing meanwhile and
        # gives nothing back: every page the child shares is copied, if nothing stops it.
        with busy_cores():
            outputs.append(k.run("a += 1"))
        outputs.append(k.run("%checkpoint wait"))  # after the inline write that began when the kernel went idle
        outputs.append(k.run("checksum = float(a[::4096].sum())"))
        assert all(r.error is None for r in outputs), [r.error for r in outputs]
        checksum = k.value("checksum")
        assert checksum == float((np.arange(0, size // 8, 4096, dtype=float) + 1).sum())
        assert bystanders.alive()
        told = [r.stderr.count("stopped a checkpoint writer") for r in outputs]
        assert sorted(told) == [0, 0, 0, 1], [r.stderr for r in outputs]  # said once, in one cell
        notice = next(r.stderr for r in outputs if "stopped a checkpoint writer" in r.stderr)
        assert "the state will be written from the kernel when it is idle" in notice
        assert "writer stopped for memory: stopped a checkpoint writer: only" in k.ok("%checkpoint status")
        k.ok("%checkpoint wait")
    k.close()  # its memory back before a new kernel restores the array
    fresh = kernels("memory.ipynb")
    fresh.ok("%load_ext jupyter_ckpt\n%checkpoint restore latest")
    assert fresh.value("float(a[::4096].sum())") == checksum
    if kills is not None:
        assert oom_kills() == kills


@contextlib.contextmanager
def memory_group(pid: int) -> Iterator[Path]:
    """A memory cgroup (v1, as this host has) holding the process ``pid`` and what it forks, for the block."""
    root = Path("/sys/fs/cgroup/memory")
    if not (root / "cgroup.procs").exists() or not os.access(root, os.W_OK):
        pytest.skip("needs the cgroup v1 memory controller, writable")
    group = root / f"jupyter-ckpt-test-{os.getpid()}"
    group.mkdir()
    try:
        (group / "cgroup.procs").write_text(str(pid))
        yield group
    finally:
        for member in (group / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):  # gone meanwhile
                (root / "cgroup.procs").write_text(member)
        group.rmdir()


def test_a_write_from_the_kernel_itself_waits_for_the_room_it_needs(kernels: Any) -> None:
    """A write in the kernel pickles each group whole in its memory. With too little memory left for a forked
    writer, the kernel wrote a dict of 3 million strings itself and was killed for memory, its cells' work
    lost; it now says it waits for room, and writes the state once there is."""
    kills = oom_kills()
    k = kernels("objects.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto off")
    with memory_group(k.pid) as group:
        (group / "memory.limit_in_bytes").write_text(str(4 * GIB))
        k.ok("d = {i: 'x' * 60 + str(i) for i in range(3_000_000)}")  # about 500 MiB of objects, no array
        used = int((group / "memory.usage_in_bytes").read_text())
        (group / "memory.limit_in_bytes").write_text(str(used + 400 * MIB))  # the reserve, and 144 MiB more
        said = k.run("%checkpoint auto on\nx = 1").stderr
        waited = k.run("%checkpoint wait")  # for the writer, which is stopped; then the kernel would write it
        assert "too little memory left to write it" in waited.stderr, waited
        said += waited.stderr + k.run("y = 2").stderr
        assert said.count("not checkpointed for now: writing from the kernel itself could take up to") == 1, said
        assert k.value("len(d)") == 3_000_000  # alive, its work in place
        (group / "memory.limit_in_bytes").write_text(str(4 * GIB))  # memory is back
        k.ok("%checkpoint wait")
    assert k.value("[r.cell for r in __import__('jupyter_ckpt').list()]")  # the state, durable
    k.close()
    fresh = kernels("objects.ipynb")
    fresh.ok("%load_ext jupyter_ckpt\n%checkpoint restore latest")
    assert fresh.value("(len(d), x, y)") == (3_000_000, 1, 2)
    if kills is not None:
        assert oom_kills() == kills


def test_a_restore_that_would_run_memory_out_is_refused_and_the_kernel_keeps_its_work(kernels: Any) -> None:
    """A restore reads the whole checkpoint before it lets go of the variables it replaces. Going back to a 1 GiB
    array with 700 MiB left in the kernel's memory cgroup took the kernel past its limit: the out-of-memory killer
    killed it (anon-rss 2.8 GiB), and its cells' work with it. The restore is refused, saying why, and nothing
    changes: one that reads the array again, and an undo of a cell that rewrote it in place, which reads every
    chunk that changed before it copies them in. With memory back, the same restore runs."""
    kills = oom_kills()
    k = kernels("restore.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto off\nimport numpy as np")

    def refused(command: str, reading: str) -> None:
        said = k.run(command).stderr.splitlines()
        refusal = [line for line in said if line.startswith("UsageError: ")]  # one line, no traceback
        assert len(refusal) == 1 and refusal[0].startswith(f"UsageError: not restored: reading {reading} "), said
        assert "GiB of memory, and only" in refusal[0] and "nothing was changed" in refusal[0], refusal

    with memory_group(k.pid) as group:

        def leave(room: int) -> None:
            used = int((group / "memory.usage_in_bytes").read_text())
            (group / "memory.limit_in_bytes").write_text(str(used + room))

        (group / "memory.limit_in_bytes").write_text(str(8 * GIB))
        k.ok("a = np.arange(128 << 20, dtype=float)\n%checkpoint save -t first")  # 1 GiB that compresses: read
        k.ok("a *= 2")  # in place: an undo patches every chunk
        leave(700 * MIB)
        refused("%checkpoint undo", "the parts of a that changed")
        assert k.value("float(a[1])") == 2.0  # alive, its work in place
        (group / "memory.limit_in_bytes").write_text(str(8 * GIB))
        k.ok("a = a + 1")  # another array: a restore reads the checkpoint's
        leave(700 * MIB)
        refused("%checkpoint restore first", "a")
        assert k.value("float(a[1])") == 3.0
        (group / "memory.limit_in_bytes").write_text(str(8 * GIB))
        k.ok("%checkpoint restore first")
        assert k.value("float(a[1])") == 1.0
    if kills is not None:
        assert oom_kills() == kills


def test_the_kernels_answer_names_the_shared_mappings_the_maps_file_lists(tmp_path: Path) -> None:
    """Before each fork the kernel is asked which mappings are shared and writable (Linux 6.11); it must name
    what /proc/self/maps lists, the way before: a file mapped for writing (as ``numpy.memmap`` in ``r+``
    mode maps it) and anonymous shared memory."""
    path = tmp_path / "frames.bin"
    path.write_bytes(bytes(1 << 20))
    with path.open("r+b") as file, mmap.mmap(file.fileno(), 0) as frames, mmap.mmap(-1, 1 << 20) as anonymous:
        frames[0], anonymous[0] = 1, 1
        queried = _queried_shared_writable()
        if queried is None:
            pytest.skip("this kernel cannot be asked (before Linux 6.11)")
        assert queried == _listed_shared_writable()
        assert str(path) in queried
        assert "/dev/zero (deleted)" in queried
        assert shared_writable_mapping() is not None


def test_a_catalog_deleted_while_open_does_not_stop_the_forks(tmp_path: Path) -> None:
    """SQLite's WAL index stays mapped after its file is deleted ("catalog.sqlite-shm (deleted)"): it holds no
    variable, so writers still fork."""
    db = sqlite3.connect(tmp_path / "catalog.sqlite")
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE t (x)")
        db.commit()
        for path in tmp_path.iterdir():
            path.unlink()
        assert f"{tmp_path}/catalog.sqlite-shm (deleted)" in Path("/proc/self/maps").read_text()
        assert "catalog.sqlite" not in (shared_writable_mapping() or "")
    finally:
        db.close()


# -- a writer gives back each chunk it has stored, so that a rewrite beside it copies nothing ------------------


def written_beside(store: Store, module: types.ModuleType, give_back: bool, rewrite: str = "") -> tuple[int, int]:
    """Fork a writer that stores ``module`` (giving back each chunk once stored, or not) and then waits; run
    ``rewrite`` in ``module`` meanwhile. Returns the checkpoint, committed, and the writer's private memory then."""
    result = store.root / "written.pickle"
    ready, go = os.pipe(), os.pipe()
    pid = os.fork()
    if pid == 0:  # the writer
        try:
            meta = Meta(session="nb.ipynb", cell=1, last_cell=None, trigger="cell", status="ok")
            spent = memory.give_back if give_back else None
            written = prepare(store.blobs, module, collect(module.__dict__, (), ()), meta, spent=spent)
            result.write_bytes(pickle.dumps(written))
            os.write(ready[1], b"1")
            os.read(go[0], 1)
        finally:
            os._exit(0)
    try:
        assert os.read(ready[0], 1) == b"1", "the writer failed"
        exec(rewrite, module.__dict__)
        private = sum(
            int(line.split()[1]) << 10
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
            if line.startswith(("Private_Clean:", "Private_Dirty:"))
        )
    finally:
        os.write(go[1], b"1")
        os.waitpid(pid, 0)
        for fd in (*ready, *go):
            os.close(fd)
    manifest, blobs = pickle.loads(result.read_bytes())
    return store.commit("nb.ipynb", link(manifest, None, None), blobs), private


def test_a_rewrite_beside_a_writer_that_gave_back_what_it_stored_copies_nothing(store: Store) -> None:
    module = types.ModuleType("__main__")
    module.__dict__["positions"] = np.random.default_rng(0).random(8 << 20)  # 64 MiB
    before = module.__dict__["positions"].copy()
    # Without giving back, the writer keeps the originals of the 64 MiB the rewrite copies.
    _, kept = written_beside(store, module, give_back=False, rewrite="positions += 1")
    module.__dict__["positions"][:] = before
    cid, private = written_beside(store, module, give_back=True, rewrite="positions += 1")
    assert kept - private > 60 * MIB, (kept, private)  # beside the writer's own heap, nothing of the 64 MiB
    fresh = types.ModuleType("__main__")
    restore_namespace(store.blobs, fresh, cid, store.manifest(cid))
    assert np.array_equal(fresh.__dict__["positions"], before)  # as it was at the fork, not as rewritten
    assert store.manifest(cid)["variables"]["positions"]["repr"] == preview(before)["repr"]  # the timeline's


class Alias:
    """Another array's memory under an object the walk cannot see through (as a tensor made ``torch.from_numpy``
    shares an array's): its pickler copies the bytes."""

    def __init__(self, of: np.ndarray) -> None:
        self.address, self.nbytes = of.ctypes.data, of.nbytes

    def __reduce__(self) -> tuple[Any, ...]:
        return bytes, (ctypes.string_at(self.address, self.nbytes),)


def test_memory_that_something_else_reads_after_its_buffer_is_stored_is_still_written_whole(store: Store) -> None:
    n = 4 << 20
    raw = bytearray(np.random.default_rng(1).bytes(8 * n))
    values = np.random.default_rng(2).random(n)
    variables = {  # the groups are pickled last name first
        "values": values,
        "alias": Alias(values),  # pickled after ``values``' group
        # Two arrays over one bytearray, each pickled with a buffer over the same bytes: the first stored must
        # not be given back before the second is.
        "a_pair": {"whole": np.frombuffer(raw, np.uint8), "tail": np.frombuffer(raw, np.uint8)[4096:]},
    }
    module = types.ModuleType("__main__")
    module.__dict__.update(variables)
    cid, _ = written_beside(store, module, give_back=True)
    fresh = types.ModuleType("__main__")
    restore_namespace(store.blobs, fresh, cid, store.manifest(cid))
    got = fresh.__dict__
    assert np.array_equal(got["values"], values)
    assert got["alias"] == values.tobytes()
    assert got["a_pair"]["whole"].tobytes() == bytes(raw) and got["a_pair"]["tail"].tobytes() == bytes(raw)[4096:]


def test_a_write_in_the_kernel_itself_keeps_every_page(store: Store) -> None:
    module = types.ModuleType("__main__")
    module.__dict__["positions"] = np.random.default_rng(0).random(2 << 20)
    before = module.__dict__["positions"].copy()
    ckpt = Checkpointer(store, "inline.ipynb", module, background=False)
    ckpt.record_cell(1, "positions = ...", True, 0.1)
    assert ckpt.save(trigger="cell", cell=1) is not None  # written inline, in this process
    assert np.array_equal(module.__dict__["positions"], before)
