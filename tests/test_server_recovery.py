"""Crash recovery in a real jupyter_server: kill -9 a notebook's kernel, get its last good state back."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Kernel

from jupyter_ckpt.kernelclient import KernelConnection
from jupyter_ckpt.session import TYPED

pytest_plugins = ("pytest_jupyter.jupyter_server", "conftest_server")


@pytest.fixture(autouse=True)
def profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The kernels' IPython profile: a checkpoint after every cell. These tests send cells back to back,
    which the default policy may checkpoint together, and each test needs the state of each cell."""
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_kernel_config.py").write_text("c.Checkpoints.every = 1\n")
    monkeypatch.setenv("IPYTHONDIR", str(profile.parent))
    return profile


async def test_a_killed_kernel_comes_back_with_its_last_good_state(notebook: Any, api: Any) -> None:
    nb = await notebook("work/analysis.ipynb")
    await nb.ok("import numpy as np\nx = np.arange(10)")
    await nb.ok("total = int(x.sum())")
    records = await nb.wait_for_checkpoints(2)
    assert [r["trigger"] for r in records] == ["cell", "cell"]

    killed = nb.kill()
    received, event = await nb.next_crash_event(0)
    print(f"\nkill -> state restored: {received - killed:.2f} s")

    assert event["type"] == "crash-restore"
    assert event["checkpoint"] == records[-1]["id"]
    assert await nb.value("(total, x.tolist(), np.__name__)") == (45, list(range(10)), "numpy")
    timeline = await nb.checkpoints()
    assert timeline[2]["trigger"] == "crash-restore"
    assert timeline[2]["parent"] == records[-1]["id"]
    polled = await api("GET", "api", "ckpt", "events", params={"session": nb.path})
    assert polled["events"] == [event]


async def test_a_crash_after_a_failed_cell_goes_back_to_the_last_good_checkpoint(notebook: Any) -> None:
    nb = await notebook("analysis.ipynb")
    await nb.ok("x = 1")
    failed = await nb.run("y = 2\nraise ValueError('bad data')")
    assert failed.error == "ValueError: bad data"
    good, bad = await nb.wait_for_checkpoints(2)
    assert (good["status"], bad["status"]) == ("ok", "error")

    nb.kill()
    _, event = await nb.next_crash_event(0)
    assert (event["type"], event["checkpoint"], event["tried"]) == ("crash-restore", good["id"], [good["id"]])
    assert await nb.value("(x, 'y' in globals())") == (1, False)


async def test_a_restart_the_user_asked_for_restores_nothing(notebook: Any, api: Any) -> None:
    nb = await notebook("analysis.ipynb")
    await nb.ok("x = 1")
    await nb.wait_for_checkpoints(1)

    await api("POST", "api", "kernels", nb.kernel_id, "restart")
    assert await nb.value("'x' in globals()") is False
    # The new kernel has the extension loaded all the same: that cell was checkpointed.
    timeline = await nb.wait_for_checkpoints(2)
    assert [r["trigger"] for r in timeline] == ["cell", "cell"]
    assert nb.crashes == []
    assert (await api("GET", "api", "ckpt", "events"))["events"] == []


async def test_a_state_that_keeps_crashing_the_kernel_is_not_restored_again(
    notebook: Any, api: Any, profile: Path
) -> None:
    # Kernels also resume where the notebook was (restore_on_start): after a crash, the server alone chooses.
    with (profile / "ipython_kernel_config.py").open("a") as config:
        config.write("c.Checkpoints.restore_on_start = True\n")
    nb = await notebook("analysis.ipynb")
    await nb.ok("x = 1")
    await nb.ok("x = 2")
    older, newer = await nb.wait_for_checkpoints(2)

    # The kernel dies again before any cell completes: the previous good state, once, then nothing.
    nb.kill()
    _, first = await nb.next_crash_event(0)
    assert (first["type"], first["checkpoint"]) == ("crash-restore", newer["id"])
    nb.kill()
    _, second = await nb.next_crash_event(1)
    assert (second["type"], second["checkpoint"], second["tried"]) == (
        "crash-restore",
        older["id"],
        [newer["id"], older["id"]],
    )
    nb.kill()
    _, third = await nb.next_crash_event(2)
    assert (third["type"], third["checkpoint"], third["tried"]) == (
        "crash-restore-stopped",
        None,
        [newer["id"], older["id"]],
    )
    assert f"checkpoint(s) {newer['id']}, {older['id']}" in third["message"]
    nb.kill()  # and again, still before a cell completes: told again, nothing restored
    _, again = await nb.next_crash_event(3)
    assert (again["type"], again["checkpoint"]) == ("crash-restore-stopped", None) and "died again" in again["message"]
    assert await nb.value("'x' in globals()") is False
    polled = await api("GET", "api", "ckpt", "events", params={"session": nb.path, "since": first["time"]})
    assert [e["type"] for e in polled["events"]] == ["crash-restore", "crash-restore-stopped", "crash-restore-stopped"]

    # Once a cell has completed, a crash is a new one: the newest good state comes back.
    await nb.ok("x = 3")
    timeline = await nb.wait_for_checkpoints(6)
    assert [r["trigger"] for r in timeline] == ["cell", "cell", "crash-restore", "crash-restore", "cell", "cell"]
    latest = timeline[-1]
    nb.kill()
    _, fifth = await nb.next_crash_event(4)
    assert (fifth["type"], fifth["checkpoint"], fifth["tried"]) == ("crash-restore", latest["id"], [latest["id"]])
    assert await nb.value("x") == 3


async def test_a_kernel_that_dies_before_its_first_checkpoint_is_told_there_was_nothing_to_restore(
    notebook: Any,
) -> None:
    nb = await notebook("fresh.ipynb")
    nb.kill()
    _, event = await nb.next_crash_event(0)
    assert (event["type"], event["checkpoint"], event["tried"]) == ("crash-restore-failed", None, [])
    assert "before its first checkpoint" in event["message"]


# Before the server notices the death, and while it restarts the kernel. The restarted kernel takes 3 s to start:
# a fast machine restarts and restores one in under half a second, and the request would then reach it, rightly.
@pytest.mark.parametrize("delay", [0.05, 0.5])
async def test_a_restore_asked_for_as_the_kernel_dies_is_refused_at_once_and_recovery_still_runs(
    notebook: Any, api: Any, delay: float, profile: Path
) -> None:
    restarted = profile / "restarted"
    with (profile / "ipython_kernel_config.py").open("a") as config:
        slow_start = f"import os, time; os.path.exists({str(restarted)!r}) and time.sleep(3)"
        config.write(f"c.InteractiveShellApp.exec_lines = [{slow_start!r}]\n")
    nb = await notebook("analysis.ipynb")
    await nb.ok("x = 1")
    await nb.ok("x = 2")
    older, newer = await nb.wait_for_checkpoints(2)

    restarted.touch()
    killed = nb.kill()
    await asyncio.sleep(delay)
    status, message = await api.error(
        "POST", "api", "ckpt", "checkpoints", str(older["id"]), "restore", body={"kernel_id": nb.kernel_id}
    )
    answered = time.perf_counter() - killed - delay
    assert status == 409 and "died" in message and answered < 5
    # The request did not reach the new kernel: the crash recovery restored the newest good state, and only it,
    # after the request was answered.
    restored, event = await nb.next_crash_event(0)
    assert restored - killed > 3
    assert (event["type"], event["checkpoint"]) == ("crash-restore", newer["id"])
    assert await nb.value("x") == 2
    assert [r["trigger"] for r in await nb.checkpoints()] == ["cell", "cell", "crash-restore"]


async def test_a_restore_waiting_for_a_busy_kernel_that_dies_is_refused_not_run_in_the_new_one(
    notebook: Any, api: Any
) -> None:
    """The request waits for the running cell to end; the kernel dies instead, and the restarted one goes idle
    within that wait. The request must not run there, over the crash recovery's state."""
    nb = await notebook("analysis.ipynb")
    await nb.ok("x = 1")
    await nb.ok("x = 20")
    older, newer = await nb.wait_for_checkpoints(2)
    running = asyncio.create_task(nb.run("import time\ntime.sleep(30)"))
    await asyncio.sleep(0.5)
    asked = asyncio.create_task(
        api.error("POST", "api", "ckpt", "checkpoints", str(older["id"]), "restore", body={"kernel_id": nb.kernel_id})
    )
    await asyncio.sleep(0.3)
    nb.kill()
    status, message = await asked
    assert status == 409, message
    _, event = await nb.next_crash_event(0)
    assert (event["type"], event["checkpoint"]) == ("crash-restore", newer["id"])
    assert await nb.value("x") == 20
    assert [r["trigger"] for r in await nb.checkpoints()] == ["cell", "cell", "crash-restore"]
    running.cancel()


async def test_a_server_request_beside_a_running_cell_gets_its_own_reply(notebook: Any, ckpt_app: Any) -> None:
    # The frontend's socket, the server's autoload and this request all talk to one kernel: each reply must
    # reach the one that asked, which a socket identity shared between them would not ensure. When the
    # failing cell makes the kernel abort the request, it is sent again.
    nb = await notebook("analysis.ipynb")
    failing = asyncio.create_task(nb.run("import time\ntime.sleep(1)\nraise ValueError('bad data')"))
    await asyncio.sleep(0.3)  # the cell runs; the request waits behind it
    service = ckpt_app.service
    async with KernelConnection(service.kernels, nb.kernel_id, service.kernel_timeout, idle=False) as kernel:
        assert await kernel.call("session") == service.session_keys(nb.path)[1]
    assert (await failing).error == "ValueError: bad data"


async def test_the_crash_notification_can_tell_how_far_the_restore_is(notebook: Any, api: Any, profile: Path) -> None:
    # Progress from the first byte; a value that takes 2 s to unpickle keeps the restore running after its bytes
    # are read, so that the polls below see it whatever the machine's speed.
    (profile / "ipython_kernel_config.py").write_text("c.Checkpoints.every = 1\nc.Checkpoints.progress_after = 0\n")
    nb = await notebook("work/slow.ipynb")
    await nb.ok(
        "import numpy as np\n"
        "big = np.random.default_rng(0).random(2_000_000)\n"
        "def rebuild():\n    __import__('time').sleep(2)\n    return 'rebuilt'\n"
        "class Slow:\n    def __reduce__(self):\n        return (rebuild, ())\n"
        "slow = Slow()"
    )
    await nb.wait_for_checkpoints(1)

    nb.kill()
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        polled = await api("GET", "api", "ckpt", "events", params={"session": nb.path})
        if polled["events"]:
            break
        seen += polled["restoring"]
        await asyncio.sleep(0.05)
    assert [e["type"] for e in polled["events"]] == ["crash-restore"] and polled["restoring"] == []
    # While it ran, the restore was listed with its notebook, then with what the kernel's progress display said.
    assert seen and {(r["kernel_id"], r["path"]) for r in seen} == {(nb.kernel_id, nb.path)}
    assert seen[0]["what"] == "restoring its last good state"
    told = seen[-1]
    assert told["what"] == "restoring kernel checkpoint #1 into the new kernel after a crash"
    assert told["done"] == told["total"] > 16_000_000  # the array was read: its 16 MB and the pickles
    assert await nb.value("(big.shape, slow)") == ((2_000_000,), "rebuilt")


async def _killed_by_its_newest_state(notebook: Any) -> tuple[Any, Any, Any, Any, Any]:
    """A notebook whose newest good state kills the kernel as it is loaded (as a C extension that segfaults as it
    loads does), killed: the notebook, its two checkpoints, and the crash recovery's first two events."""
    nb = await notebook("loop.ipynb")
    await nb.ok("x = 1")
    await nb.ok(
        "class Bomb:\n    def __reduce__(self):\n        import os\n        return (os._exit, (1,))\nbomb = Bomb()"
    )
    good, bombed = await nb.wait_for_checkpoints(2)
    nb.kill()
    _, failed = await nb.next_crash_event(0, timeout=60)
    _, restored = await nb.next_crash_event(1, timeout=60)
    return nb, good, bombed, failed, restored


async def test_a_state_that_kills_the_kernel_as_it_is_restored_is_said_and_not_restored_again(notebook: Any) -> None:
    """A crash loop inside the restore itself: loading the newest good state kills the new kernel (as a C
    extension that segfaults as it loads does). The user is told that state killed it, not "nothing was done. Try
    again"; the one before it comes back."""
    nb, good, bombed, failed, restored = await _killed_by_its_newest_state(notebook)
    assert (failed["type"], failed["checkpoint"], failed["tried"]) == (
        "crash-restore-failed",
        bombed["id"],
        [bombed["id"]],
    )
    assert failed["message"] == (
        f"the kernel died while checkpoint {bombed['id']} was being restored; it is not restored again: the previous "
        "good checkpoint is tried next"
    )
    assert (restored["type"], restored["checkpoint"], restored["tried"]) == (
        "crash-restore",
        good["id"],
        [bombed["id"], good["id"]],
    )
    assert await nb.value("(x, 'bomb' in dir())") == (1, False)
    assert len(nb.crashes) == 2


async def test_a_notebook_renamed_while_its_kernel_runs_gets_its_state_back_after_a_crash(
    notebook: Any, api: Any
) -> None:
    """JupyterLab renames a notebook and moves its session to the new path; the running kernel goes on under the
    old one, and the kernel the restarter starts after a crash is on the new path. It was restored nothing
    ("the kernel died before its first checkpoint"): the state is back, and the timeline is the new path's."""
    nb = await notebook("draft.ipynb")
    await nb.ok("x = 1")
    await nb.ok("y = 2")
    records = await nb.wait_for_checkpoints(2)
    await api("PATCH", "api", "contents", "draft.ipynb", body={"path": "final.ipynb"})
    (session,) = await api("GET", "api", "sessions")
    await api("PATCH", "api", "sessions", session["id"], body={"path": "final.ipynb", "name": "final.ipynb"})

    nb.kill()
    _, event = await nb.next_crash_event(0)
    expected = ("crash-restore", records[-1]["id"], "final.ipynb")
    assert (event["type"], event["checkpoint"], event["path"]) == expected, event
    assert await nb.value("(x, y)") == (1, 2)
    nb.path = "final.ipynb"
    timeline = await nb.wait_for_checkpoints(4)
    assert [r["trigger"] for r in timeline] == ["cell", "cell", "crash-restore", "cell"]
    assert [s["path"] for s in (await api("GET", "api", "ckpt", "sessions"))["sessions"]] == ["final.ipynb"]


async def test_a_notebook_renamed_while_its_kernel_runs_takes_its_checkpoints_along(notebook: Any, api: Any) -> None:
    """Untitled.ipynb, renamed once the work is worth keeping: its timeline is the new name's at once, the next
    cells go on there, and nothing is left under the old name for the next Untitled.ipynb to offer."""
    nb = await notebook("Untitled.ipynb")
    await nb.ok("x = 1")
    (first,) = await nb.wait_for_checkpoints(1)
    await api("PATCH", "api", "contents", "Untitled.ipynb", body={"path": "model.ipynb"})
    (session,) = await api("GET", "api", "sessions")
    await api("PATCH", "api", "sessions", session["id"], body={"path": "model.ipynb", "name": "model.ipynb"})
    nb.path = "model.ipynb"
    assert [r["id"] for r in await nb.wait_for_checkpoints(1)] == [first["id"]]
    await nb.ok("y = 2")
    timeline = await nb.wait_for_checkpoints(2)
    assert [r["parent"] for r in timeline] == [None, first["id"]]
    assert [s["path"] for s in (await api("GET", "api", "ckpt", "sessions"))["sessions"]] == ["model.ipynb"]
    assert (await nb.ok("%checkpoint session")).endswith("/model.ipynb (JPY_SESSION_NAME, from jupyter_server)\n")


async def test_a_folder_renamed_takes_the_checkpoints_of_its_notebooks_along(notebook: Any, api: Any) -> None:
    """The notebooks of a folder renamed, one with a running kernel and one closed: both timelines are found under
    the new folder, and the running kernel goes on there."""
    closed = await notebook("project/old.ipynb")
    await closed.ok("a = 1")
    await closed.wait_for_checkpoints(1)
    await api("DELETE", "api", "sessions", (await api("GET", "api", "sessions"))[0]["id"])
    nb = await notebook("project/live.ipynb")
    await nb.ok("b = 2")
    await nb.wait_for_checkpoints(1)
    await api("PATCH", "api", "contents", "project", body={"path": "renamed"})
    (session,) = await api("GET", "api", "sessions")
    await api("PATCH", "api", "sessions", session["id"], body={"path": "renamed/live.ipynb", "name": "live.ipynb"})
    nb.path = "renamed/live.ipynb"
    await nb.ok("c = 3")
    assert len(await nb.wait_for_checkpoints(2)) == 2
    paths = [s["path"] for s in (await api("GET", "api", "ckpt", "sessions"))["sessions"]]
    assert sorted(paths) == ["renamed/live.ipynb", "renamed/old.ipynb"]


async def test_a_notebook_renamed_while_a_store_file_is_unreadable_keeps_its_kernel_in_the_new_session(
    notebook: Any, api: Any, tmp_path: Path
) -> None:
    """The kernel meets a store file it cannot read as the server moves it to the renamed notebook (a killed kernel's
    writer left its result as a directory): the checkpoints moved to the new path, and the kernel went back to the
    old one at its next cell, so the renamed notebook's timeline stopped there and its later cells went under a path
    no notebook has. And the server, told the rename failed, counted the kernel in the old path: renamed again, the
    timeline moved without the kernel."""
    nb = await notebook("draft.ipynb")
    await nb.ok("x = 1")
    (first,) = await nb.wait_for_checkpoints(1)
    unreadable = tmp_path / "store" / "blobs" / "tmp" / "result.999999999.0.json"
    unreadable.mkdir()
    await rename(api, "draft.ipynb", "final.ipynb")
    deadline = time.monotonic() + 30
    while [s["path"] for s in (await api("GET", "api", "ckpt", "sessions"))["sessions"]] != ["final.ipynb"]:
        assert time.monotonic() < deadline, "the checkpoints did not move"
        await asyncio.sleep(0.05)
    unreadable.rmdir()
    nb.path = "final.ipynb"

    await nb.ok("y = 2")
    timeline = await nb.wait_for_checkpoints(2)
    assert [r["parent"] for r in timeline] == [None, first["id"]]
    assert [s["path"] for s in (await api("GET", "api", "ckpt", "sessions"))["sessions"]] == ["final.ipynb"]
    assert (await nb.ok("%checkpoint session")).endswith("/final.ipynb (JPY_SESSION_NAME, from jupyter_server)\n")

    await rename(api, "final.ipynb", "published.ipynb")
    nb.path = "published.ipynb"
    await nb.ok("z = 3")
    assert [r["parent"] for r in await nb.wait_for_checkpoints(3)] == [None, first["id"], timeline[-1]["id"]]
    assert [s["path"] for s in (await api("GET", "api", "ckpt", "sessions"))["sessions"]] == ["published.ipynb"]
    assert (await nb.ok("%checkpoint session")).endswith("/published.ipynb (JPY_SESSION_NAME, from jupyter_server)\n")


async def rename(api: Any, old: str, new: str) -> None:
    """Rename a notebook as JupyterLab does: the file, then its session."""
    await api("PATCH", "api", "contents", old, body={"path": new})
    (session,) = await api("GET", "api", "sessions")
    await api("PATCH", "api", "sessions", session["id"], body={"path": new, "name": new})


async def test_with_two_notebooks_open_the_killed_one_gets_its_own_state_back_and_the_other_runs_on(
    notebook: Any, api: Any
) -> None:
    a = await notebook("a/same.ipynb")
    b = await notebook("b/same.ipynb")  # the same name in another folder: another notebook
    await a.ok("who = 'a'\nrows = [1, 2]")
    await b.ok("who = 'b'\nrows = [3]")
    (mine,) = await a.wait_for_checkpoints(1)
    await b.wait_for_checkpoints(1)
    await b.ok("rows.append(4)")  # b's newest checkpoint is the store's newest
    await b.wait_for_checkpoints(2)

    a.kill()
    _, event = await a.next_crash_event(0)
    assert (event["type"], event["checkpoint"], event["path"]) == ("crash-restore", mine["id"], "a/same.ipynb")
    assert await a.value("(who, rows)") == ("a", [1, 2])
    assert await b.value("(who, rows)") == ("b", [3, 4])
    assert b.crashes == []
    assert [r["trigger"] for r in await b.checkpoints()] == ["cell", "cell"]
    assert [r["trigger"] for r in await a.checkpoints()] == ["cell", "crash-restore"]


async def test_a_notebook_opened_again_in_a_new_kernel_is_offered_its_state_and_gets_it_back_after_a_crash(
    notebook: Any, api: Any
) -> None:
    """As after the server restarted (or the kernel was shut down): the next kernel on the notebook knows nothing
    of the last one but what the store holds. It is offered the last good state, and a crash before it ran a cell
    brings that state back, the notebook's last known-good one (a cell it ran would have its own state)."""
    nb = await notebook("report.ipynb")
    await nb.ok("total = 42")
    (left,) = await nb.wait_for_checkpoints(1)
    (session,) = await api("GET", "api", "sessions")
    await api("DELETE", "api", "sessions", session["id"])  # the kernel shuts down

    again = await notebook("report.ipynb")
    assert again.kernel_id != nb.kernel_id
    offer = (await api("GET", "api", "ckpt", "offer", params={"kernel_id": again.kernel_id}))["offer"]
    assert (offer["checkpoint"], offer["number"]) == (left["id"], 1)

    again.kill()
    _, event = await again.next_crash_event(0)
    assert (event["type"], event["checkpoint"]) == ("crash-restore", left["id"])
    assert await again.value("total") == 42


async def test_a_notebook_renamed_while_a_long_cell_runs_keeps_its_timeline_through_the_next_rename(
    notebook: Any, api: Any, ckpt_app: Any
) -> None:
    """The kernel runs a cell longer than the server waits for an answer when the notebook is renamed. The kernel
    moved to the new path once the cell ended, but the server still counted it in the old one: renamed again, the
    notebook's timeline moved without the kernel, whose next cells went under the path it had before."""
    ckpt_app.service.kernel_timeout = 1.0
    nb = await notebook("draft.ipynb")
    await nb.ok("import time\nx = 1")
    await nb.wait_for_checkpoints(1)
    running = asyncio.create_task(nb.run("time.sleep(4)\ny = 2"))
    await asyncio.sleep(0.5)
    for old, new in [("draft.ipynb", "final.ipynb"), ("final.ipynb", "published.ipynb")]:
        await api("PATCH", "api", "contents", old, body={"path": new})
        (session,) = await api("GET", "api", "sessions")
        await api("PATCH", "api", "sessions", session["id"], body={"path": new, "name": new})
        assert (await running).error is None
        nb.path = new
        running = asyncio.create_task(nb.run(f"made_in_{new.split('.')[0]} = True"))
    assert (await running).error is None
    timeline = await nb.wait_for_checkpoints(4)
    made = ["x", "y", "made_in_final", "made_in_published"]
    assert [name in r["changed"] for name, r in zip(made, timeline, strict=True)] == [True] * 4, timeline
    assert [s["path"] for s in (await api("GET", "api", "ckpt", "sessions"))["sessions"]] == ["published.ipynb"]
    assert (await nb.ok("%checkpoint session")).endswith("/published.ipynb (JPY_SESSION_NAME, from jupyter_server)\n")


async def test_a_notebook_renamed_and_then_undone_to_before_the_rename_stays_under_its_new_name(
    notebook: Any, api: Any
) -> None:
    """An undo (or any restore) to a state from before the rename made the environment what it was then, the old
    path in JPY_SESSION_NAME: the kernel went back to the old path at its next cell, and the renamed notebook's
    timeline stopped at the undo. And the rename itself showed in the timeline as a change of the environment."""
    nb = await notebook("draft.ipynb")
    await nb.ok("x = 1")
    await nb.wait_for_checkpoints(1)
    await api("PATCH", "api", "contents", "draft.ipynb", body={"path": "final.ipynb"})
    (session,) = await api("GET", "api", "sessions")
    await api("PATCH", "api", "sessions", session["id"], body={"path": "final.ipynb", "name": "final.ipynb"})
    nb.path = "final.ipynb"
    await nb.ok("x = 2")
    await nb.wait_for_checkpoints(2)
    await nb.ok("%checkpoint undo")
    assert await nb.value("x") == 1
    await nb.ok("y = 3")
    timeline = await nb.wait_for_checkpoints(5)
    assert [r["trigger"] for r in timeline] == ["cell", "cell", "restore", "cell", "cell"]
    # (Each websocket the test opens asks the kernel for its info, whose banner tip moves the random stream.)
    changed = [[c for c in r["changed"] if c != "random streams"] for r in timeline]
    assert changed == [["x"], ["x"], [], [], ["y"]]
    assert [s["path"] for s in (await api("GET", "api", "ckpt", "sessions"))["sessions"]] == ["final.ipynb"]
    assert (await nb.ok("%checkpoint session")).endswith("/final.ipynb (JPY_SESSION_NAME, from jupyter_server)\n")
    assert await nb.value("__import__('os').environ['JPY_SESSION_NAME'].endswith('/final.ipynb')") is True


async def test_a_new_notebook_where_a_deleted_one_was_is_not_given_its_state(
    notebook: Any, api: Any, profile: Path
) -> None:
    """Untitled.ipynb, worked in, closed and deleted; the next new notebook is Untitled.ipynb again. It was offered
    the deleted notebook's state (with restore_on_start, given it), as if it were that notebook. The deleted one's
    checkpoints stay in the store, under its path marked deleted."""
    with (profile / "ipython_kernel_config.py").open("a") as config:
        config.write("c.Checkpoints.restore_on_start = True\n")
    nb = await notebook("Untitled.ipynb")
    await nb.ok("scratch = 'deleted work'")
    (left,) = await nb.wait_for_checkpoints(1)
    (session,) = await api("GET", "api", "sessions")
    await api("DELETE", "api", "sessions", session["id"])
    await api("DELETE", "api", "contents", "Untitled.ipynb")

    fresh = await notebook("Untitled.ipynb")
    assert (await api("GET", "api", "ckpt", "offer", params={"kernel_id": fresh.kernel_id}))["offer"] is None
    said = await fresh.run("'scratch' in dir()")
    assert said.stdout == "" and "jupyter-ckpt" not in said.stderr
    assert await fresh.value("'scratch' in dir()") is False
    (kept,) = [s for s in (await api("GET", "api", "ckpt", "sessions"))["sessions"] if s["path"] != "Untitled.ipynb"]
    assert re.fullmatch(r"Untitled\.ipynb \(deleted \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\)", kept["path"]), kept
    assert kept["checkpoints"] == 1
    assert [
        r["id"]
        for r in (await api("GET", "api", "ckpt", "checkpoints", params={"session": kept["key"]}))["checkpoints"]
    ] == [left["id"]]


async def test_a_kernel_that_loads_the_extension_itself_is_restored_by_the_crash_recovery_alone(
    notebook: Any, api: Any, profile: Path
) -> None:
    """``jupyter ckpt enable`` and ``restore_on_start``: the kernel the restarter starts after a crash loads the
    extension from its profile and restored the newest good state itself, before the server's crash recovery and
    out of its reach: a state that kills the kernel as it loads killed every restarted kernel until the restarter
    gave up, and a state that loads was restored twice."""
    (profile / "ipython_config.json").write_text('{"InteractiveShellApp": {"extensions": ["jupyter_ckpt"]}}\n')
    with (profile / "ipython_kernel_config.py").open("a") as config:
        config.write("c.Checkpoints.restore_on_start = True\n")
    nb, good, bombed, failed, restored = await _killed_by_its_newest_state(notebook)
    assert (failed["type"], failed["checkpoint"]) == ("crash-restore-failed", bombed["id"])
    assert (restored["type"], restored["checkpoint"]) == ("crash-restore", good["id"])
    assert await nb.value("(x, 'bomb' in dir())") == (1, False)
    assert [r["trigger"] for r in await nb.checkpoints()] == ["cell", "cell", "crash-restore"]

    # A restart the user asks for is no crash: the kernel resumes as it starts, as restore_on_start says.
    await nb.ok("del x\ny = 2")
    await api("POST", "api", "kernels", nb.kernel_id, "restart")
    await nb.until_loaded()
    assert await nb.value("(y, 'x' in dir())") == (2, False)
    assert "restore" in [r["trigger"] for r in await nb.checkpoints()]  # not a crash-restore: the kernel's own


async def test_a_session_named_in_the_kernel_is_the_one_its_crash_restores(notebook: Any, api: Any) -> None:
    """``%checkpoint session experiment`` in a notebook's kernel, then a crash: the kernel the server restarted was
    on the notebook's path again (JPY_SESSION_NAME), and got the state from before the session was named, with
    what the cells did since in another session than the kernel's."""
    nb = await notebook("lab.ipynb")
    await nb.ok("x = 1")
    await nb.wait_for_checkpoints(1)
    await nb.ok("%checkpoint session experiment")
    await nb.ok("x = 2\ny = 3")
    experiment = type(nb)(api, nb.ws_fetch, nb.serverapp, "experiment")  # its timeline, as the sidebar reads it
    (newest,) = await experiment.wait_for_checkpoints(1)

    nb.kill()
    _, event = await nb.next_crash_event(0)
    assert (event["type"], event["session"], event["checkpoint"]) == ("crash-restore", "experiment", newest["id"])
    assert await nb.value("(x, y)") == (2, 3)
    assert (await nb.ok("%checkpoint session")) == "session: experiment (named with %checkpoint session)\n"
    await nb.ok("z = 4")
    assert [r["trigger"] for r in await experiment.wait_for_checkpoints(3)] == ["cell", "crash-restore", "cell"]
    assert [r["trigger"] for r in await nb.checkpoints()] == ["cell"]  # the notebook's own, as it was


@contextlib.contextmanager
def vs_code_kernel(notebook: Path, cell: str) -> Iterator[Kernel]:
    """A VS Code kernel on ``notebook`` with no server (a kernel of its own), which ran ``cell`` and made it durable."""
    code = Kernel(None)
    try:
        code.kc.execute(f"__vsc_ipynb_file__ = {str(notebook)!r}", silent=True)
        code.ok("%load_ext jupyter_ckpt")
        code.ok(cell)
        code.ok("%checkpoint wait")
        yield code
    finally:
        code.close()


async def test_a_crash_restores_the_kernel_s_own_state_not_another_kernel_s_on_the_same_notebook(
    notebook: Any, jp_root_dir: Path
) -> None:
    """The same notebook open in JupyterLab and in VS Code (a kernel of its own, no server): one session, two
    kernels. The Lab kernel crashed and was given the VS Code kernel's newer state, another kernel's work."""
    lab = await notebook("shared.ipynb")
    await lab.ok("who = 'lab'\nrows = [1, 2]")
    (mine,) = await lab.wait_for_checkpoints(1)
    with vs_code_kernel(jp_root_dir / "shared.ipynb", "who = 'vs code'") as code:
        assert [r["id"] for r in await lab.checkpoints()][::2] == [mine["id"]]  # the VS Code one is newer

        lab.kill()
        _, event = await lab.next_crash_event(0)
        assert (event["type"], event["checkpoint"]) == ("crash-restore", mine["id"])
        assert await lab.value("(who, rows)") == ("lab", [1, 2])
        assert code.value("who") == "vs code"


async def test_under_a_small_budget_another_kernel_s_thinning_keeps_a_kernel_s_own_state_for_its_crash(
    notebook: Any, jp_root_dir: Path, profile: Path
) -> None:
    """The same notebook in JupyterLab and in VS Code, under a store budget the VS Code kernel's data fills: its
    thinning kept the notebook's newest good states (its own) and took the Lab kernel's last state, so the Lab
    kernel crashed and was given the VS Code kernel's work. Each running kernel's newest good state stays."""
    with (profile / "ipython_kernel_config.py").open("a") as config:
        config.write('c.Checkpoints.max_store_size = "12M"\n')
    lab = await notebook("budget.ipynb")
    await lab.ok("who = 'lab'\nrows = [1, 2]")
    (mine,) = await lab.wait_for_checkpoints(1)
    with vs_code_kernel(jp_root_dir / "budget.ipynb", "who = 'vs code'\nimport numpy as np") as code:
        for i in range(5):  # 3.8 MiB a cell: the budget holds three
            code.ok(f"data = np.random.default_rng({i}).random(500_000)\n%checkpoint wait")
        records = await lab.checkpoints()
        assert len(records) < 7, records  # thinned
        assert mine["id"] in [r["id"] for r in records]

        lab.kill()
        _, event = await lab.next_crash_event(0)
        assert (event["type"], event["checkpoint"]) == ("crash-restore", mine["id"])
        assert await lab.value("(who, rows)") == ("lab", [1, 2])
        assert code.value("(who, int(data.size))") == ("vs code", 500_000)


async def test_a_vs_code_kernel_on_a_server_gets_its_notebook_s_state_back_after_a_crash(
    notebook: Any, jp_root_dir: Path
) -> None:
    """VS Code connected to a Jupyter server: the server's session names a backing file of VS Code's
    (``<notebook>-jvsc-<uuids>.ipynb``), and VS Code names the notebook by code it runs after start-up. The kernel
    the server restarted after a crash was named by nothing yet: it was told "the kernel died before its first
    checkpoint", and its next cells went into a session of its own, away from the notebook's."""
    nb = await notebook(f"model-jvsc-{uuid.uuid4()}{uuid.uuid4()}.ipynb")
    model = str(jp_root_dir / "model.ipynb")
    await nb.run(f"__vsc_ipynb_file__ = {model!r}", silent=True)
    await nb.ok("weights = [1, 2, 3]")
    vs_code = type(nb)(nb.api, nb.ws_fetch, nb.serverapp, "model.ipynb")  # the notebook's timeline
    (left,) = await vs_code.wait_for_checkpoints(1)

    nb.kill()
    _, event = await nb.next_crash_event(0)
    assert (event["type"], event["session"], event["checkpoint"]) == ("crash-restore", model, left["id"])
    await nb.ok("weights.append(4)")
    assert [r["trigger"] for r in await vs_code.wait_for_checkpoints(3)] == ["cell", "crash-restore", "cell"]
    await nb.run(f"__vsc_ipynb_file__ = {model!r}", silent=True)  # VS Code names it again: still the one session
    await nb.ok("weights.append(5)")
    assert len(await vs_code.wait_for_checkpoints(4)) == 4
    assert await nb.value("weights") == [1, 2, 3, 4, 5]


async def test_a_notebook_with_spaces_and_accents_in_its_path_is_restored_and_listed(notebook: Any, api: Any) -> None:
    nb = await notebook("Mes données/analyse été 2026.ipynb")
    await nb.ok("total = 42")
    (left,) = await nb.wait_for_checkpoints(1)
    (listed,) = (await api("GET", "api", "ckpt", "sessions"))["sessions"]
    assert listed["path"] == "Mes données/analyse été 2026.ipynb"

    nb.kill()
    _, event = await nb.next_crash_event(0)
    assert (event["type"], event["checkpoint"], event["path"]) == (
        "crash-restore",
        left["id"],
        "Mes données/analyse été 2026.ipynb",
    )
    assert await nb.value("total") == 42


async def test_a_kernel_whose_kernelspec_drops_the_environment_still_resumes_its_notebook(
    notebook: Any, api: Any, jp_data_dir: Path
) -> None:
    """A kernelspec that starts the kernel through a wrapper that cleans its environment (``env -u``, a container,
    a login shell): the kernel never saw JPY_SESSION_NAME, so it checkpointed into a session of its own, and the
    next kernel on the notebook was offered nothing."""
    spec = jp_data_dir / "kernels" / "wrapped"
    spec.mkdir(parents=True)
    argv = ["env", "-u", "JPY_SESSION_NAME", sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "Wrapped", "language": "python"}))
    nb = await notebook("wrapped.ipynb", "wrapped")
    await nb.ok("total = 42")
    (left,) = await nb.wait_for_checkpoints(1)
    (session,) = await api("GET", "api", "sessions")
    await api("DELETE", "api", "sessions", session["id"])

    again = await notebook("wrapped.ipynb", "wrapped")
    offer = (await api("GET", "api", "ckpt", "offer", params={"kernel_id": again.kernel_id}))["offer"]
    assert offer["checkpoint"] == left["id"]
    again.kill()
    _, event = await again.next_crash_event(0)
    assert (event["type"], event["checkpoint"]) == ("crash-restore", left["id"])
    assert await again.value("total") == 42


async def test_a_restart_the_user_asked_for_offers_what_the_kernel_left(notebook: Any, api: Any) -> None:
    nb = await notebook("restarted.ipynb")
    await nb.ok("x = 1")
    (left,) = await nb.wait_for_checkpoints(1)
    await api("POST", "api", "kernels", nb.kernel_id, "restart")
    await nb.until_loaded()
    offer = (await api("GET", "api", "ckpt", "offer", params={"kernel_id": nb.kernel_id}))["offer"]
    assert (offer["checkpoint"], offer["number"]) == (left["id"], 1)
    said = await nb.run("y = 2")
    assert "the last good one is #1 after cell [1]" in said.stderr, said
    assert (await nb.ok("%checkpoint restore previous")).startswith("restored kernel checkpoint #1")
    assert await nb.value("(x, 'y' in dir())") == (1, False)


async def test_a_notebook_moved_while_no_kernel_runs_on_it_is_offered_its_state_at_its_new_path(
    notebook: Any, api: Any
) -> None:
    nb = await notebook("drafts/study.ipynb")
    await nb.ok("result = 7")
    (left,) = await nb.wait_for_checkpoints(1)
    (session,) = await api("GET", "api", "sessions")
    await api("DELETE", "api", "sessions", session["id"])  # the kernel is shut down
    await api("PUT", "api", "contents", "final", body={"type": "directory"})  # a new folder
    await api("PATCH", "api", "contents", "drafts/study.ipynb", body={"path": "final/study.ipynb"})

    deadline = time.monotonic() + 30
    while [s["path"] for s in (await api("GET", "api", "ckpt", "sessions"))["sessions"]] != ["final/study.ipynb"]:
        assert time.monotonic() < deadline, "the checkpoints did not follow the notebook"
        await asyncio.sleep(0.05)
    again = await notebook("final/study.ipynb")
    offer = (await api("GET", "api", "ckpt", "offer", params={"kernel_id": again.kernel_id}))["offer"]
    assert offer["checkpoint"] == left["id"]
    assert (await again.ok("%checkpoint restore previous")).startswith("restored kernel checkpoint #1")
    assert await again.value("result") == 7


async def test_a_notebook_renamed_after_its_kernel_was_given_a_session_by_hand_takes_its_timeline_along(
    notebook: Any, api: Any
) -> None:
    """The notebook's kernel goes on in a session the user named; the checkpoints it took before stay the notebook's.
    Renamed, the notebook left them under its old path: no kernel there moved, so the store did not either."""
    nb = await notebook("draft.ipynb")
    await nb.ok("x = 1")
    (before,) = await nb.wait_for_checkpoints(1)
    await nb.ok("%checkpoint session experiment")
    await api("PATCH", "api", "contents", "draft.ipynb", body={"path": "final.ipynb"})
    (session,) = await api("GET", "api", "sessions")
    await api("PATCH", "api", "sessions", session["id"], body={"path": "final.ipynb", "name": "final.ipynb"})

    deadline = time.monotonic() + 30
    while "draft.ipynb" in [s["path"] for s in (await api("GET", "api", "ckpt", "sessions"))["sessions"]]:
        assert time.monotonic() < deadline, "the notebook's checkpoints stayed under its old path"
        await asyncio.sleep(0.05)
    nb.path = "final.ipynb"
    assert [r["id"] for r in await nb.checkpoints()] == [before["id"]]
    assert (await nb.ok("%checkpoint session")) == "session: experiment (named with %checkpoint session)\n"


async def test_another_kernel_s_cells_do_not_restart_a_crashed_kernel_s_crash_loop(
    notebook: Any, jp_root_dir: Path
) -> None:
    """A notebook whose newest state kills the kernel as it loads, open in JupyterLab and in VS Code. Lab's kernel
    died again after its crash recovery, before a cell of its own completed, but a cell had completed in VS Code
    meanwhile: taken for a new crash, the killing state was restored again, and again."""
    nb, good, bombed, failed, restored = await _killed_by_its_newest_state(notebook)
    assert (failed["checkpoint"], restored["checkpoint"]) == (bombed["id"], good["id"])
    with vs_code_kernel(jp_root_dir / "loop.ipynb", "elsewhere = 1"):
        nb.kill()
        _, again = await nb.next_crash_event(2)
        assert (again["type"], again["checkpoint"]) == ("crash-restore-stopped", None), again
        assert again["tried"] == [bombed["id"], good["id"]]


async def test_a_kernel_record_the_store_s_secret_did_not_sign_is_not_followed(notebook: Any, tmp_path: Path) -> None:
    """Anyone who can put a file in the store could write the record a crashed kernel's replacement follows, and
    send it to another session."""
    nb = await notebook("own.ipynb")
    await nb.ok("x = 1")
    (left,) = await nb.wait_for_checkpoints(1)
    name = hashlib.sha256(f"kernel-{nb.kernel_id}".encode()).hexdigest()[:32]
    planted = {"kernel": f"kernel-{nb.kernel_id}", "session": "elsewhere", "source": TYPED}
    (tmp_path / "store" / "kernels" / name).write_text(json.dumps({**planted, "head": None}))

    nb.kill()
    _, event = await nb.next_crash_event(0)
    assert (event["type"], event["checkpoint"], event["path"]) == ("crash-restore", left["id"], "own.ipynb")
    assert await nb.value("x") == 1
