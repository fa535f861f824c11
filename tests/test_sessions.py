"""One notebook, one session, in every frontend that names it; and the promises around it: wait(), the secret
file, %config. Real kernels, started as VS Code, the terminal and batch runs start them."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import time
import types
import uuid
from pathlib import Path
from typing import Any

import nbformat
import pytest
from conftest import Kernel, cli
from objectstore import S3, machine

from jupyter_ckpt.checkpointer import Checkpointer
from jupyter_ckpt.errors import BadArgument
from jupyter_ckpt.session import session_name
from jupyter_ckpt.store import Store, load_secret

HINT = "from earlier kernels; the last good one is #1 after cell [1]"


def vs_code(kernels: Any, notebook: Path, server: bool = False, **env: str) -> Kernel:
    """A kernel started as VS Code starts one: no JPY_SESSION_NAME (connected to a Jupyter ``server``, one naming
    a backing file of VS Code's own, new every time: vscode-jupyter's ``generateBackingIPyNbFileName``), and the
    notebook's path assigned in the namespace by a silent execute right after start-up."""
    backing = notebook.parent / f"{notebook.stem}-jvsc-{uuid.uuid4()}{uuid.uuid4()}.ipynb"
    k: Kernel = kernels(str(backing) if server else None, **env)
    k.kc.execute(f"__vsc_ipynb_file__ = {str(notebook)!r}", silent=True)
    return k


def test_a_relative_notebook_path_in_the_environment_is_the_shell_s(kernels: Any, jupyter_dirs: Path) -> None:
    """``JUPYTER_CKPT_SESSION=nb/run.ipynb jupyter nbconvert --execute nb/run.ipynb``: nbconvert starts the kernel in
    the notebook's folder, where the path was taken as ``nb/nb/run.ipynb``, not the notebook VS Code or the
    terminal names."""
    (jupyter_dirs / "nb").mkdir()
    k = kernels(None, cwd=str(jupyter_dirs / "nb"), JUPYTER_CKPT_SESSION="nb/run.ipynb", PWD=str(jupyter_dirs))
    said = k.ok("%load_ext jupyter_ckpt\n%checkpoint session")
    assert said.startswith(f"session: {os.path.realpath(jupyter_dirs / 'nb' / 'run.ipynb')} (")


def test_untitled_vs_code_notebooks_get_sessions_of_their_own(kernels: Any, jupyter_dirs: Path, store: Store) -> None:
    """An untitled notebook is named by a bare name: every folder and every day has an "Untitled-1.ipynb", and
    one resumed by another would bring back an unrelated notebook's state."""
    assert cli("enable").returncode == 0
    for n in range(2):
        k = vs_code(kernels, Path("Untitled-1.ipynb"))
        said = k.run(f"made_{n} = {n}").stderr
        assert "from earlier kernels" not in said
        assert "(this kernel's own" in k.ok("%checkpoint session")
        k.ok("%checkpoint wait")
        k.close()
    assert len(store.sessions()) == 2


@pytest.mark.parametrize("server", [False, True], ids=["alone", "on a jupyter server"])
def test_a_vs_code_notebook_resumes_in_the_next_kernel(
    kernels: Any, jupyter_dirs: Path, store: Store, server: bool
) -> None:
    """Also where VS Code is connected to a Jupyter server, whose session names a backing file new for every
    kernel: taken as the notebook, it gave every kernel a session of its own, and nothing ever resumed."""
    assert cli("enable").returncode == 0  # VS Code starts the kernel: the profile loads the extension
    notebook = jupyter_dirs / "project" / "model.ipynb"
    first = vs_code(kernels, notebook, server)
    first.ok("model = {'weights': [1, 2, 3]}")
    first.ok("%checkpoint wait")
    assert (
        first.ok("%checkpoint session")
        == f"session: {os.path.realpath(notebook)} (__vsc_ipynb_file__, set by VS Code)\n"
    )
    first.close()

    second = vs_code(kernels, notebook, server)
    hint = second.run("fresh = True").stderr
    assert HINT in hint and hint.endswith("Get it back with: %checkpoint restore previous\n")
    assert second.ok("%checkpoint restore previous").startswith("restored kernel checkpoint #1 (id ")
    assert second.value("(model, 'fresh' in dir())") == ({"weights": [1, 2, 3]}, False)
    assert [s["key"] for s in store.sessions()] == [os.path.realpath(notebook)]  # not one session per kernel


def test_a_console_is_given_no_other_console_s_state(kernels: Any, jupyter_dirs: Path, store: Store) -> None:
    """JupyterLab names a console's session "Console 1" (the first of each page load) in the folder it opened
    in, so every first console had one session, and a new one was offered (or, with restore_on_start, given)
    the state of another."""
    assert cli("enable").returncode == 0
    for n in range(2):
        k = kernels(str(jupyter_dirs / "Console 1"))
        assert "from earlier kernels" not in k.run(f"console_{n} = {n}").stderr
        assert "(this kernel's own" in k.ok("%checkpoint session")
        k.ok("%checkpoint wait")
        k.close()
    assert len(store.sessions()) == 2


def test_a_notebook_run_from_a_notebook_s_cell_does_not_go_into_that_notebook_s_timeline(
    kernels: Any, jupyter_dirs: Path, store: Store
) -> None:
    """papermill, nbclient or ``!jupyter execute`` in a cell start a kernel that inherits the notebook's
    JPY_SESSION_NAME: its cells went into the notebook's timeline, and its state came back in the notebook's
    crash recovery or as ``previous``."""
    parent = kernels(str(jupyter_dirs / "parent.ipynb"))
    parent.ok("%load_ext jupyter_ckpt\nmine = 'A'")
    child = jupyter_dirs / "child.ipynb"
    nbformat.write(
        nbformat.v4.new_notebook(
            cells=[nbformat.v4.new_code_cell("%load_ext jupyter_ckpt\nwho = 'B'\n%checkpoint wait")]
        ),
        child,
    )
    ran = parent.ok(
        "import subprocess, sys\n"
        f"job = subprocess.run([sys.executable, '-m', 'jupyter', 'execute', '--inplace', {str(child)!r}], "
        "capture_output=True, text=True)\n"
        "print(job.returncode)"
    )
    assert ran == "0\n"
    parent.ok("%checkpoint wait")
    assert "who" not in parent.ok("%checkpoint list")
    keys = [s["key"] for s in store.sessions()]
    assert len(keys) == 2 and keys.count(str(jupyter_dirs / "parent.ipynb")) == 1  # the job's is a session of its own


def test_what_a_kernel_did_before_its_notebook_was_named_goes_into_the_notebooks_session(
    kernels: Any, jupyter_dirs: Path, store: Store
) -> None:
    assert cli("enable").returncode == 0
    notebook = jupyter_dirs / "late.ipynb"
    earlier = vs_code(kernels, notebook)
    earlier.ok("model = 'trained'")
    earlier.ok("%checkpoint wait")
    earlier.close()

    k = kernels(None)
    k.ok("scratch = [1]")
    status = k.ok("%checkpoint wait\n%checkpoint status")
    own = re.search(r"session: (kernel-\S+) \(this kernel's own: no later kernel resumes it; name it with "
                    r"%checkpoint session NAME, or before the kernel starts with c\.Checkpoints\.session or "
                    r"\$JUPYTER_CKPT_SESSION\)", status)  # fmt: skip
    assert own is not None, status
    k.kc.execute(f"__vsc_ipynb_file__ = {str(notebook)!r}", silent=True)
    assert HINT in k.run("more = 2").stderr  # at the first cell that knows the notebook
    k.ok("%checkpoint wait")
    key = os.path.realpath(notebook)
    assert [s["key"] for s in store.sessions()] == [key]  # the kernel's own session moved in, whole
    assert [r.changed for r in store.checkpoints(key)] == [["model"], ["scratch"], ["more"]]
    k.ok("%checkpoint undo")  # this kernel's own line goes back through what it did before the name
    assert k.value("(scratch, 'more' in dir(), 'model' in dir())") == ([1], False, False)
    k.ok("%checkpoint restore previous")
    assert k.value("(model, 'scratch' in dir())") == ("trained", False)


def test_a_vs_code_kernel_on_another_machine_resumes_through_the_remote_store(
    kernels: Any, s3: S3, jupyter_dirs: Path
) -> None:
    assert cli("enable").returncode == 0
    notebook = jupyter_dirs / "shared.ipynb"
    a = kernels(None, JUPYTER_CKPT_DIR=str(jupyter_dirs / "machine-a"))
    a.ok("early = 1")
    a.ok("%checkpoint wait")  # uploaded under the kernel's own key
    a.kc.execute(f"__vsc_ipynb_file__ = {str(notebook)!r}", silent=True)
    a.ok("model = 'trained'")
    a.ok("%checkpoint wait")
    a.kill()  # the machine is gone, and its disk with it
    shutil.rmtree(jupyter_dirs / "machine-a")

    b = vs_code(kernels, notebook, JUPYTER_CKPT_DIR=str(jupyter_dirs / "machine-b"))
    said = ""
    for _ in range(50):  # the line comes at the first cell boundary once the notebook's timeline is pulled
        said += b.run("pass").stderr
        if said:
            break
        time.sleep(0.1)
    assert "this notebook has 2 kernel checkpoint(s) from earlier kernels; the last good one is #2" in said
    b.ok("%checkpoint restore previous")
    assert b.value("(early, model)") == (1, "trained")
    # The remote store holds the checkpoints under the notebook's key alone: the records under the kernel's
    # own key were deleted when they were uploaded again.
    other, replica = machine(jupyter_dirs / "machine-c", s3)
    replica.pull()
    assert [s["key"] for s in other.sessions()] == [os.path.realpath(notebook)]


def test_a_named_batch_run_resumes_in_a_new_kernel(kernels: Any, store: Store) -> None:
    assert cli("enable").returncode == 0  # papermill's and nbclient's kernels load it from the profile
    job = kernels(None, JUPYTER_CKPT_SESSION="nightly-train")
    for cell in ("weights = [0.1, 0.2]", "epochs = 3"):
        job.kc.execute(cell)
    job.ok("import jupyter_ckpt\njupyter_ckpt.wait()")
    job.close()

    later = kernels(None, JUPYTER_CKPT_SESSION="nightly-train")
    assert "from earlier kernels; the last good one is" in later.run("pass").stderr
    later.ok("%checkpoint restore previous")
    assert later.value("(weights, epochs)") == ([0.1, 0.2], 3)
    assert (
        later.ok("%checkpoint session") == "session: nightly-train (c.Checkpoints.session or $JUPYTER_CKPT_SESSION)\n"
    )
    assert [s["key"] for s in store.sessions()] == ["nightly-train"]


def test_a_session_named_in_the_kernel_wins_and_a_later_kernel_resumes_it(kernels: Any, store: Store) -> None:
    k = kernels("lab.ipynb")
    k.ok("%load_ext jupyter_ckpt")
    k.ok("x = 1")
    k.ok("%checkpoint wait")
    assert k.ok("%checkpoint session experiment") == "session: experiment (named with %checkpoint session)\n"
    k.kc.execute("__vsc_ipynb_file__ = '/elsewhere/nb.ipynb'", silent=True)  # a frontend's name no longer moves it
    k.ok("y = 2")
    k.ok("%checkpoint wait")
    assert k.ok("%checkpoint session").startswith("session: experiment (")
    # The notebook's session keeps its history; the kernel goes on in the one it was given.
    assert [r.changed for r in store.checkpoints("lab.ipynb")] == [["x"]]
    assert [r.changed for r in store.checkpoints("experiment")] == [["y"]]
    k.close()

    terminal = kernels(None)
    terminal.ok("%load_ext jupyter_ckpt")
    named = terminal.run("%checkpoint session experiment")
    assert named.stdout == "session: experiment (named with %checkpoint session)\n"
    assert "from earlier kernels; the last good one is #1 after cell [" in named.stderr
    terminal.ok("%checkpoint restore previous")
    assert terminal.value("(x, y)") == (1, 2)


def test_session_names_are_checked_and_notebook_paths_normalized(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    real = os.path.realpath(tmp_path / "real" / "nb.ipynb")
    assert session_name(str(tmp_path / "link" / "nb.ipynb")) == real
    assert session_name(f"file://{tmp_path}/link/./nb.ipynb") == real
    assert session_name("nightly-train") == "nightly-train"
    assert session_name("nb.ipynb") == os.path.realpath("nb.ipynb")  # a notebook's path, relative to the kernel
    for bad, why in [
        ("", "at least one character"),
        (" padded", "starts or ends with a space"),
        ("a\nb", "control character"),
        ("\ud800", "lone surrogate"),
        ("x" * 5000, "at most 4096 characters"),
        (str(tmp_path), "is a directory"),
    ]:
        with pytest.raises(BadArgument, match=why):
            session_name(bad)


@pytest.mark.parametrize("wait", ["import jupyter_ckpt\njupyter_ckpt.wait()", "last = 'cell'\n%checkpoint wait"])
def test_wait_makes_the_state_of_back_to_back_cells_durable(kernels: Any, wait: str) -> None:
    k = kernels("batch.ipynb")
    k.ok("%load_ext jupyter_ckpt")  # the default policy: back-to-back cells within the overhead budget
    for i in range(4):  # Run All: every request at once, so no cell is followed by idle
        k.kc.execute(f"step = {i}\nrows = list(range({i}))")
    k.ok(wait)
    k.kill()

    fresh = kernels("batch.ipynb")
    fresh.ok("%load_ext jupyter_ckpt")
    assert fresh.ok("%checkpoint restore previous").startswith("restored kernel checkpoint #")
    assert fresh.value("(step, rows)") == (3, [0, 1, 2])


def test_a_secret_of_raw_bytes_is_a_key_and_a_short_one_is_refused_in_one_line(
    kernels: Any, jupyter_dirs: Path
) -> None:
    raw = jupyter_dirs / "raw-secret"
    raw.write_bytes(b"\xff" + os.urandom(31))  # as `head -c 32 /dev/urandom` makes it (0xff: never UTF-8)
    raw.chmod(0o600)
    assert load_secret(raw) == raw.read_bytes()
    k = kernels("raw.ipynb", JUPYTER_CKPT_SECRET_FILE=str(raw))
    k.ok("%load_ext jupyter_ckpt\nkept = [1, 2]")
    k.ok("%checkpoint save")
    k.close()
    again = kernels("raw.ipynb", JUPYTER_CKPT_SECRET_FILE=str(raw))
    again.ok("%load_ext jupyter_ckpt\n%checkpoint restore latest")
    assert again.value("kept") == [1, 2]

    for content, size in [(b"\xff" * 5, 5), (b"abc\n", 3)]:
        short = jupyter_dirs / "short-secret"
        short.write_bytes(content)
        short.chmod(0o600)
        k = kernels("short.ipynb", JUPYTER_CKPT_SECRET_FILE=str(short))
        r = k.run("%load_ext jupyter_ckpt")
        assert r.error is not None and r.error.startswith(
            f"IntegrityError: the checkpoint secret {short} holds {size} bytes, fewer than 32: write at least 32"
        )
        assert r.traceback == [r.error]  # one line, no traceback
        assert "not found" in k.run("%checkpoint").stderr  # not loaded
        assert k.value("1 + 1") == 2


def test_a_hex_secret_keeps_the_key_it_always_was(kernels: Any, jupyter_dirs: Path) -> None:
    secret = jupyter_dirs / "hex-secret"
    secret.write_text(secrets.token_hex(32) + "\n")  # as this package, or a user, wrote it
    secret.chmod(0o600)
    earlier = Store(jupyter_dirs / "store", secret.read_text().strip().encode())  # the key as earlier versions read it
    notebook = types.ModuleType("__main__")
    notebook.kept = {"fitted": True}
    Checkpointer(earlier, "hex.ipynb", notebook).save()

    k = kernels("hex.ipynb", JUPYTER_CKPT_SECRET_FILE=str(secret))
    k.ok("%load_ext jupyter_ckpt\n%checkpoint restore latest")  # its signature verifies with the key read now
    assert k.value("kept") == {"fitted": True}


def test_config_lists_and_sets_the_options(kernels: Any) -> None:
    k = kernels("config.ipynb")
    k.ok("%load_ext jupyter_ckpt")
    assert "Checkpoints" in k.ok("%config")
    listed = k.ok("%config Checkpoints")
    for option in ("replay", "session", "restore_on_start", "budget", "store_url"):
        assert f"Checkpoints.{option}=" in listed
    k.ok("gen = (i for i in range(3))\ntotal = 1")
    k.ok("%checkpoint save -t made")
    assert "%checkpoint replay would rebuild gen" in k.ok("del gen\n%checkpoint restore made")  # 'ask'
    k.ok("%config Checkpoints.replay = 'never'")
    assert k.run("%config Checkpoints.replay").data == [{"text/plain": "'never'"}]
    out = k.ok("%checkpoint restore made")
    assert "not restored: gen" in out and "replay" not in out
    k.ok("%unload_ext jupyter_ckpt")
    assert "Checkpoints" not in k.ok("%config")
