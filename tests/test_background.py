"""Automatic checkpoints are written by a forked child while the user goes on."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from test_retention import fill_up, tmpfs

from jupyter_ckpt.store import Store
from jupyter_ckpt.writer import ForkWriter

BIG = "import numpy as np\nbig = np.random.default_rng(0).random(50_000_000)  # 400 MB\nmarker = 'after big'"


def test_the_next_cell_runs_while_a_big_checkpoint_is_written(kernels: Any, store: Store) -> None:
    k = kernels("big.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto on")  # a checkpoint at every cell boundary
    k.ok(BIG)
    assert "writing: yes" in k.ok("%checkpoint status")  # the write is still going on ...
    writers = "open(f'/proc/self/task/{os.getpid()}/children').read().split()"
    idle = f"{{os.sched_getscheduler(int(pid)) == os.SCHED_IDLE for pid in {writers}}}"
    assert k.value(f"(lambda os: {idle})(__import__('os'))") == {True}  # ... in a child that yields every core ...
    assert k.value("marker") == "after big"  # ... and cells run meanwhile
    k.ok("%checkpoint wait")
    assert "writing: no" in k.ok("%checkpoint status")
    latest = store.checkpoints("big.ipynb")[-1]
    assert "big" in store.manifest(latest.id)["variables"]
    assert k.ok("import os; print(len(os.listdir('/proc/self/task')) < 50)") == "True\n"


def test_a_cell_during_a_big_write_gets_its_own_checkpoint(kernels: Any, store: Store) -> None:
    k = kernels("overlap.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto on")  # back to back, each cell checkpointed
    k.ok(BIG)  # cell 2, written by one child ...
    k.ok("step = 0")  # cell 3, snapshotted by a second child while the first still writes
    k.ok("%checkpoint wait")
    assert [r.cell for r in store.checkpoints("overlap.ipynb")] == [2, 3]
    k.ok("%checkpoint undo")
    assert k.value("('step' in dir(), marker)") == (False, "after big")


def test_cells_during_a_big_write_keep_the_newest_states(kernels: Any, store: Store) -> None:
    k = kernels("queue.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto on")
    k.ok(BIG)  # cell 2
    for i in range(6):  # cells 3 to 8, quicker than the big write: some states wait, the oldest waiting give way
        k.ok(f"step = {i}")
    k.ok("%checkpoint wait")
    cells = [r.cell for r in store.checkpoints("queue.ipynb")]
    assert cells[0] == 2 and cells[-2:] == [7, 8], cells  # in order, and the last two cells are there
    k.ok("%checkpoint undo")
    assert k.value("(step, marker)") == (4, "after big")  # undo goes back exactly one cell


def test_a_write_that_outlives_its_killed_kernel_is_adopted(kernels: Any, store: Store) -> None:
    k = kernels("orphan.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto on")
    k.ok(BIG)
    k.ok("step = 1")
    k.ok("step = 2")  # its child waits for a turn to write when the kernel dies
    os.kill(k.pid, signal.SIGKILL)  # the kernel dies; its writers go on and finish
    deadline = time.time() + 60
    while len(list(store.blobs.tmp.glob("result.*.json"))) < 3 and time.time() < deadline:
        time.sleep(0.1)
    k.kill()
    revived = kernels("orphan.ipynb")
    revived.ok("%load_ext jupyter_ckpt\n%checkpoint auto on")
    assert [r.cell for r in store.checkpoints("orphan.ipynb")] == [2, 3, 4]  # adopted in the order taken
    assert revived.ok("%checkpoint restore latest").startswith("restored kernel checkpoint #")
    assert revived.value("(marker, step)") == ("after big", 2)
    assert revived.value("big.shape") == (50_000_000,)


def test_a_finished_write_is_committed_while_the_next_cell_still_runs(kernels: Any, store: Store) -> None:
    k = kernels("long.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto on")  # back to back, each cell checkpointed
    k.ok("x = 41")  # cell 2: its child finishes within a second
    long_cell = k.kc.execute("import time\ntime.sleep(8)\ny = 1")  # cell 3, still running below
    deadline = time.time() + 6
    while not store.checkpoints("long.ipynb") and time.time() < deadline:
        time.sleep(0.1)
    assert [r.cell for r in store.checkpoints("long.ipynb")] == [2]  # on the timeline before cell 3 ends
    while k.kc.get_shell_msg(timeout=30)["parent_header"].get("msg_id") != long_cell:
        pass
    k.ok("%checkpoint wait")
    assert [r.cell for r in store.checkpoints("long.ipynb")] == [2, 3]
    assert k.value("(x, y)") == (41, 1)


def test_a_waiting_write_gets_its_turn_once_the_writes_before_it_finish(tmp_path: Path) -> None:
    writer = ForkWriter(tmp_path, encode=lambda x: x, decode=lambda x: x)
    outcomes: list[Any] = []
    for i in range(3):  # two write at once, the third waits for a turn
        writer.submit(lambda _, i=i: i, lambda outcome, error: outcomes.append(outcome if error is None else error))
    time.sleep(1)  # the first two have finished, and nothing has committed them yet
    waiting = threading.Thread(target=writer.poll, kwargs={"block": True}, daemon=True)  # what wait() does
    waiting.start()
    waiting.join(timeout=30)
    assert not waiting.is_alive(), "the wait never returned: the third write did not get its turn"
    assert outcomes == [0, 1, 2]


def test_a_result_that_json_cannot_hold_is_the_child_s_error_said_as_such(tmp_path: Path) -> None:
    """The child encoded its result after its error handling: a value JSON cannot hold (a sympy Integer in a
    preview) ended it without a result, and every checkpoint failed as "died before finishing"."""
    writer = ForkWriter(tmp_path, encode=lambda x: x, decode=lambda x: x)
    outcomes: list[Any] = []
    writer.submit(lambda _: {"shape": [object()]}, lambda outcome, error: outcomes.append(error or outcome))
    writer.poll(block=True)
    assert len(outcomes) == 1 and "TypeError: Object of type object is not JSON serializable" in str(outcomes[0])


def test_a_result_the_full_disk_cut_short_is_said_as_such_and_leaves_no_file(tmp_path: Path) -> None:
    """A writer whose result file found the disk full left the part it wrote, named after the kernel (alive), so
    no gc collected it for the kernel's life; a large namespace's result is megabytes."""
    with tmpfs(tmp_path / "small", "size=2m") as disk:
        fill_up(disk / "someone-else.bin", leave=512 << 10)  # room for half the result
        writer = ForkWriter(disk, encode=lambda x: x, decode=lambda x: x)
        outcomes: list[Any] = []
        writer.submit(lambda _: "x" * (1 << 20), lambda outcome, error: outcomes.append(error or outcome))
        writer.poll(block=True)
        assert len(outcomes) == 1 and str(outcomes[0]).startswith("StoreFullError: the disk under "), outcomes
        assert sorted(p.name for p in disk.iterdir()) == ["someone-else.bin"]


def test_a_result_a_read_only_disk_refused_is_said_as_such(tmp_path: Path) -> None:
    """On a store whose disk went read-only (remounted after errors, a snapshot), a writer that could not leave its
    result was said to have "died before finishing", and collecting it raised the OSError of deleting its result
    file, said as "periodic checkpoint failed: [Errno 30] Read-only file system"."""
    with tmpfs(tmp_path / "small", "size=2m") as disk:
        writer = ForkWriter(disk, encode=lambda x: x, decode=lambda x: x)
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        outcomes: list[Any] = []
        writer.submit(lambda _: "state", lambda outcome, error: outcomes.append(error or outcome))
        writer.poll(block=True)
    assert len(outcomes) == 1 and str(outcomes[0]).endswith(": Read-only file system"), outcomes


def test_torch_operations_in_a_forked_writer_do_not_wait_for_the_kernel_s_threads(tmp_path: Path) -> None:
    """A quantized tensor's repr (a checkpoint's preview) runs a parallel region: in a child forked after torch
    started its OpenMP threads, that region waited forever, and so did every later save, wait and list."""
    import torch

    torch.randn(512, 512) @ torch.randn(512, 512)  # the kernel's thread team, running
    with warnings.catch_warnings():  # torch 2.13 deprecates them; notebooks from its tutorials still make them
        warnings.simplefilter("ignore", UserWarning)
        q = torch.quantize_per_tensor(torch.rand(100_000), 0.1, 0, torch.quint8)
    writer = ForkWriter(tmp_path, encode=lambda x: x, decode=lambda x: x)
    outcomes: list[Any] = []
    writer.submit(lambda _: len(repr(q)), lambda outcome, error: outcomes.append(error or outcome))
    waiting = threading.Thread(target=writer.poll, kwargs={"block": True}, daemon=True)
    waiting.start()
    waiting.join(timeout=30)
    hung = waiting.is_alive()
    for child in writer._children if hung else []:
        os.kill(child.pid, signal.SIGKILL)
    assert not hung and isinstance(outcomes[0], int), outcomes


def test_a_write_that_is_waited_for_tells_its_progress_from_the_child(tmp_path: Path) -> None:
    writer = ForkWriter(tmp_path, encode=lambda x: x, decode=lambda x: x)

    def job(progress: Any) -> int:
        for done in range(0, 101, 10):
            progress(done, 100)
            time.sleep(0.02)
        return os.getpid()

    outcomes: list[Any] = []
    told: list[tuple[int, int]] = []
    writer.submit(job, lambda outcome, error: outcomes.append(error or outcome), lambda d, t: told.append((d, t)))
    writer.submit(lambda progress: progress, lambda outcome, error: outcomes.append(error or outcome))
    writer.poll(block=True)
    assert outcomes[0] != os.getpid()  # written by a child ...
    assert len(told) > 1 and told == sorted(told) and told[-1] == (100, 100)  # ... that said how far it was
    assert outcomes[1] is None  # nobody waits for the second: it was given nothing to tell


def test_a_write_that_ended_before_the_wait_began_still_tells_how_far_it_got(tmp_path: Path) -> None:
    """A small save from the sidebar can be written before the kernel starts waiting for it."""
    writer = ForkWriter(tmp_path, encode=lambda x: x, decode=lambda x: x)

    def job(progress: Any) -> str:
        progress(0, 100)
        progress(100, 100)
        return "written"

    outcomes: list[Any] = []
    told: list[tuple[int, int]] = []
    writer.submit(job, lambda outcome, error: outcomes.append(error or outcome), lambda d, t: told.append((d, t)))
    time.sleep(1)  # the child has written and exited: nobody read its reports meanwhile
    writer.poll(block=True)
    assert outcomes == ["written"] and told == [(100, 100)]


def test_the_wait_for_a_child_ends_with_it_when_a_process_it_forked_holds_its_pipe(tmp_path: Path) -> None:
    writer = ForkWriter(tmp_path, encode=lambda x: x, decode=lambda x: x)

    def job(progress: Any) -> str:
        progress(1, 2)
        if os.fork() == 0:  # a process a user's pickling code started: it has the progress pipe too
            time.sleep(5)
            os._exit(0)
        return "written"

    outcomes: list[Any] = []
    started = time.monotonic()
    writer.submit(job, lambda outcome, error: outcomes.append(error or outcome), lambda d, t: None)
    writer.poll(block=True)
    assert outcomes == ["written"] and time.monotonic() - started < 4


def test_every_cell_is_checkpointed_under_every_1_when_no_writer_can_be_forked_beside_one(
    kernels: Any, store: Store, tmp_path: Path
) -> None:
    """``--every 1`` checkpoints every cell whatever it costs. A kernel that cannot fork (here: memory mapped
    shared and writable) while a writer still works wrote nothing for the cells meanwhile, and checkpointed the
    next state only once that writer was done: the cell waits for it instead."""
    k = kernels("every.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto on --every 1")
    k.ok(BIG)  # its writer is still at work when the next cells end
    k.ok(f"shared = np.memmap({str(tmp_path / 'shared.bin')!r}, dtype='u1', mode='w+', shape=(4096,))")
    for step in range(4):
        k.ok(f"step = {step}")
    k.ok("%checkpoint wait")
    cells = [r.cell for r in store.checkpoints("every.ipynb")]
    assert cells[-6:] == [2, 3, 4, 5, 6, 7], cells
