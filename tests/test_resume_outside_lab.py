"""Resuming outside JupyterLab, as users bring it: a VS Code kernel with ``restore_on_start``, which learns its
notebook only after it started (``__vsc_ipynb_file__``), a batch run (``jupyter execute``) and terminal IPython
named by ``$JUPYTER_CKPT_SESSION``, each resuming where the last one was killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from conftest import cli
from test_sessions import vs_code

from jupyter_ckpt.store import Store


def test_a_vs_code_kernel_with_restore_on_start_resumes_its_notebook(
    kernels: Any, jupyter_dirs: Path, store: Store
) -> None:
    assert cli("enable").returncode == 0
    profile = jupyter_dirs / "ipython" / "profile_default" / "ipython_config.py"
    profile.write_text("c.Checkpoints.restore_on_start = True\n")
    notebook = jupyter_dirs / "model.ipynb"
    first = vs_code(kernels, notebook)
    first.ok("model = {'weights': [1, 2, 3]}")
    first.ok("%checkpoint wait")
    first.kill()

    second = vs_code(kernels, notebook)
    r = second.run("print(model)")
    assert r.error is None, (r.error, r.stderr)
    assert r.stdout == "{'weights': [1, 2, 3]}\n"
    assert r.stderr.startswith("jupyter-ckpt: restored kernel checkpoint #1 (id ")
    assert second.ok("%who").split() == ["model"]
    assert [s["key"] for s in store.sessions()] == [os.path.realpath(notebook)]


def notebook_file(path: Path, *cells: str) -> Path:
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]), path)
    return path


def wait_for(check: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what} within {timeout} s"
        time.sleep(0.1)


@pytest.mark.parametrize("named", ["environment", "cell"])
def test_a_batch_run_killed_in_its_long_loop_resumes_from_its_last_milestone(
    jupyter_dirs: Path, store: Store, named: str
) -> None:
    """``JUPYTER_CKPT_SESSION=train.ipynb jupyter execute train.ipynb`` (or a first cell ``%checkpoint session
    NAME``), a training loop that calls ``here()``; the kernel is killed (out of memory) hours in. The next run of
    the job, with ``restore_on_start``, begins where the last milestone left it, not at epoch 0."""
    assert cli("enable").returncode == 0  # the batch run's kernel loads it from the profile
    profile = jupyter_dirs / "ipython" / "profile_default" / "ipython_config.py"
    profile.write_text("c.Checkpoints.restore_on_start = True\n")
    pid_file = jupyter_dirs / "kernel.pid"
    loop = (
        "import os, time, jupyter_ckpt\n"
        "done = globals().get('done', [])\n"
        "print('from epoch', len(done))\n"
        "for epoch in range(len(done), 100):\n"
        "    done.append(epoch)\n"
        "    jupyter_ckpt.here()\n"
        "    if epoch == 3:\n"
        "        jupyter_ckpt.wait()\n"
        f"        open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "        time.sleep(600)\n"
    )
    cells = ["weights = [0.5]", loop, "print(done[-1], weights)"]
    env = {**os.environ, "PWD": str(jupyter_dirs)}
    if named == "environment":
        env["JUPYTER_CKPT_SESSION"] = "train.ipynb"
    else:
        cells.insert(0, "%checkpoint session nightly-train")
    train = notebook_file(jupyter_dirs / "train.ipynb", *cells)
    execute = [str(Path(sys.executable).with_name("jupyter-execute")), str(train)]
    job = subprocess.Popen(execute, env=env, cwd=jupyter_dirs, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(pid_file.exists, "the loop's fourth epoch")
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
        job.wait(timeout=60)
    finally:
        job.kill()
    assert job.returncode != 0  # the run failed: its kernel died

    pid_file.unlink()
    train.write_text(train.read_text().replace("if epoch == 3", "if epoch == -1"))  # this time it runs through
    ran = subprocess.run([*execute, "--inplace"], env=env, cwd=jupyter_dirs, capture_output=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    printed = ["".join(o.get("text", "") for o in cell.outputs) for cell in nbformat.read(train, 4).cells]
    assert printed[-1] == "99 [0.5]\n"
    assert "restored kernel checkpoint" in printed[0]
    assert printed[cells.index(loop)] == "from epoch 1\n", printed
    key = os.path.realpath(train) if named == "environment" else "nightly-train"
    assert [s["key"] for s in store.sessions()] == [key]
    first_state = store.manifest(store.checkpoints(key)[0].id)
    assert "done" in first_state["variables"]


def test_a_terminal_killed_mid_session_resumes_in_the_next_terminal_by_its_name(
    jupyter_dirs: Path, store: Store
) -> None:
    """Terminal IPython, named with $JUPYTER_CKPT_SESSION, killed -9 while it waits at the prompt: what its cells
    left comes back in the next terminal with that name (``restore_on_start``), at once."""
    assert cli("enable").returncode == 0
    profile = jupyter_dirs / "ipython" / "profile_default" / "ipython_config.py"
    profile.write_text("c.Checkpoints.restore_on_start = True\n")
    command = [sys.executable, "-m", "IPython", "--simple-prompt", "--no-banner", "--HistoryManager.enabled=False"]
    env = {**os.environ, "JUPYTER_CKPT_SESSION": "exploration"}
    with subprocess.Popen(command, env=env, cwd=jupyter_dirs, stdin=subprocess.PIPE, text=True) as first:
        try:
            assert first.stdin is not None
            first.stdin.write("prices = {'a': 1.5}\n")
            first.stdin.flush()
            # A cell followed by idle gets its checkpoint at once, with no wait() to ask for it.
            wait_for(lambda: any(s["checkpoints"] for s in store.sessions()), "the idle cell's checkpoint")
        finally:
            first.kill()

    again = subprocess.run(
        command, input="print(prices)\nexit\n", env=env, cwd=jupyter_dirs, capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0, again.stderr
    assert "{'a': 1.5}" in again.stdout
    assert "jupyter-ckpt: restored kernel checkpoint #1" in again.stdout + again.stderr


def zombie(pid: int) -> bool:
    """Whether process ``pid`` has exited and waits for its parent to reap it."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"


@pytest.mark.parametrize("death", ["reaped", "zombie", "then a gc"])
def test_a_state_that_kills_the_kernel_as_it_is_restored_at_start_is_not_restored_again(
    kernels: Any, jupyter_dirs: Path, death: str
) -> None:
    """VS Code with ``restore_on_start``: the notebook's last good state kills the kernel as it loads (a C extension
    that crashes as it is unpickled). Every kernel VS Code started on the notebook died at its first cell, and the
    notebook could not be used until ``restore_on_start`` was turned off. The next kernel restores nothing, and says
    why. Also while the dead kernel's parent has not reaped it yet (a zombie, which ``kill(pid, 0)`` finds): taken
    for a kernel restoring now, its marker was passed over, and the next kernel died restoring the same state. And
    after a gc (another kernel's thinning, ``jupyter ckpt gc``) ran meanwhile: it deleted the marker as a dead
    process's temp file."""
    assert cli("enable").returncode == 0
    profile = jupyter_dirs / "ipython" / "profile_default" / "ipython_config.py"
    profile.write_text("c.Checkpoints.restore_on_start = True\n")
    notebook = jupyter_dirs / "bomb.ipynb"
    first = vs_code(kernels, notebook)
    first.ok("x = 1")
    first.ok("%checkpoint wait")
    first.ok("class Bomb:\n    def __reduce__(self):\n        import os\n        return (os._exit, (1,))\n")
    first.ok("bomb = Bomb()")
    first.ok("%checkpoint wait")
    first.close()

    second = vs_code(kernels, notebook)
    second.kc.execute("print('never printed')")
    if death == "zombie":  # its parent (this process) has not looked yet
        wait_for(lambda: zombie(second.pid), "the kernel restoring the state to die")
    else:
        wait_for(lambda: not second.km.is_alive(), "the kernel restoring the state to die")
    if death == "then a gc":
        assert cli("gc").returncode == 0

    third = vs_code(kernels, notebook)
    up = third.run("print('up')", timeout=30)
    assert up.stdout == "up\n"
    said = "the last kernel on this notebook died while it restored checkpoint #2 (id 2) as it started; nothing was"
    assert up.stderr.startswith(f"jupyter-ckpt: {said} restored"), up.stderr
    assert up.stderr.count("\n") == 1  # that alone: not "Get it back with: %checkpoint restore previous" too
    assert third.value("('x' in dir(), 'bomb' in dir())") == (False, False)
    third.ok("%checkpoint restore 1")  # what the user chooses to bring back comes back
    assert third.value("x") == 1


def test_a_kernel_restores_from_a_store_on_a_read_only_disk(kernels: Any, jupyter_dirs: Path) -> None:
    """The store on a disk mounted read-only (an archive, a snapshot, a colleague's share): the extension did not
    load ("the catalog is unreadable"), so nothing could be brought back from it. It loads, restores, and says once
    that it cannot checkpoint there."""
    first = kernels("archived.ipynb")
    first.ok("%load_ext jupyter_ckpt")
    first.ok("model = {'weights': [1, 2]}")
    first.ok("%checkpoint wait")
    first.close()
    root = jupyter_dirs / "store"
    subprocess.run(["mount", "--bind", str(root), str(root)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(root)], check=True)
        k = kernels("archived.ipynb")
        loaded = k.run("%load_ext jupyter_ckpt")
        assert loaded.error is None and "not loaded" not in loaded.stderr, "\n".join(loaded.traceback)
        restored = k.run("%checkpoint restore previous")
        assert restored.error is None, restored.error
        assert restored.stdout.startswith("restored kernel checkpoint #1"), restored.stdout
        assert k.value("model") == {"weights": [1, 2]}
        assert "nothing is checkpointed: the checkpoint store cannot be written" in loaded.stderr
        said = restored.stderr + k.run("more = 1").stderr + k.run("more = 2").stderr
        assert "cannot" not in said, said  # said once
        k.close()
    finally:
        subprocess.run(["umount", "-l", str(root)], check=True)
