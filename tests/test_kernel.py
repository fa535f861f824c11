"""%checkpoint in real IPython kernels: what a notebook user sees."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import cli

from jupyter_ckpt.store import Store, load_secret
from jupyter_ckpt.timeline import Timeline


def store_at(dirs: Path) -> Store:
    return Store(dirs / "store", load_secret(dirs / "data" / "ckpt" / "secret"))


SESSION_CELLS = [
    "import random\nimport numpy as np\nimport pandas as pd\nfrom sklearn.linear_model import LinearRegression as LR",
    "random.seed(1)\nnp.random.seed(2)\nrng = np.random.default_rng(3)",
    "X = np.random.rand(200, 3)\ny = X @ [1.0, 2.0, 3.0] + 0.1\ndf = pd.DataFrame(X, columns=['a', 'b', 'c'])",
    "model = LR().fit(X, y)\nsame_model = model\nrows = X[10:20]",
    "def weight(v):\n    return v * factor\nfactor = 2.5\n"
    "class Tracker:\n    def __init__(self):\n        self.seen = []\n    def add(self, v):\n"
    "        self.seen.append(weight(v))\n        return len(self.seen)\ntracker = Tracker()\ntracker.add(4)",
    "draws = [random.random() for _ in range(3)]\nnested = {'t': tracker, 'df': df}",
]
DIGEST = """
print(repr({
    "df": df.round(12).to_dict("list") == pd.DataFrame(X, columns=['a', 'b', 'c']).round(12).to_dict("list"),
    "X": X.round(12).tolist(), "pred": model.predict(X[:3]).round(9).tolist(),
    "same_model": same_model is model, "nested": nested["t"] is tracker and nested["df"] is df,
    "view": bool(np.shares_memory(rows, X)), "weight": weight(2), "tracker": tracker.add(1), "seen": tracker.seen,
    "isinstance": isinstance(tracker, Tracker), "draws": draws,
    "next": [random.random(), float(np.random.rand()), float(rng.random())],
    "modules": [np.__name__, pd.__name__, LR.__name__],
}))
"""


def run_all(kernel: Any, cells: list[str]) -> None:
    for cell in cells:
        kernel.ok(cell)


def test_a_killed_kernel_comes_back_exactly(kernels: Any) -> None:
    reference = kernels("reference.ipynb")
    run_all(reference, SESSION_CELLS)
    expected = reference.ok(DIGEST)

    doomed = kernels("analysis.ipynb")
    doomed.ok("%load_ext jupyter_ckpt")
    run_all(doomed, SESSION_CELLS)
    doomed.ok("%checkpoint wait")
    doomed.kill()

    revived = kernels("analysis.ipynb")
    revived.ok("%load_ext jupyter_ckpt")
    out = revived.ok("%checkpoint restore latest")
    assert out.startswith("restored kernel checkpoint #")
    assert revived.ok(DIGEST) == expected


def test_undo_restore_tags_branches_diff_and_list(kernels: Any, store: Store) -> None:
    k = kernels("tour.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto on")
    k.ok("x = 1")
    k.ok("%checkpoint save -t first")
    k.ok("x = 2\ny = [x]")
    k.ok("x = 3")
    k.ok("%checkpoint undo")
    assert k.value("(x, y)") == (2, [2])
    k.ok("%checkpoint restore -1")
    assert k.value("x") == 1 and k.value("'y' in dir()") is False
    k.ok("%checkpoint restore first")
    k.ok("x = 'branch'")
    k.ok("%checkpoint wait")
    records = {r.id: r for r in store.checkpoints("tour.ipynb")}
    branch = max(records)
    assert records[branch].changed == ["x"]
    assert records[records[branch].parent].trigger == "restore"
    assert records[records[records[branch].parent].parent].tag == "first"

    diff = k.ok("%checkpoint diff first")
    assert "~ x: int (" in diff and "-> str (" in diff
    table = k.ok("%checkpoint list --all").splitlines()
    assert table[0].split() == ["#", "id", "time", "cell", "trigger", "status", "new", "bytes", "changed", "tag"]
    assert table[-3].startswith("*")  # the newest checkpoint is where the namespace is now
    assert table[-2:] == ["* where the namespace is now", "> a new kernel started here"]
    assert any(line.rstrip().endswith("first") for line in table)
    history = k.ok("%checkpoint history")
    # The cells that led here: the branch's own, after those before the savepoint; not the undone ones.
    assert "x = 1" in history and "x = 'branch'" in history
    assert "x = 2" not in history and "x = 3" not in history
    assert k.ok("%checkpoint list -n 2").count("\n") == 4  # the header, two rows, the mark "*" below


def test_a_new_kernel_names_what_the_last_one_left_and_previous_still_reaches_it(kernels: Any) -> None:
    first = kernels("morning.ipynb")
    first.ok("%load_ext jupyter_ckpt\n%checkpoint auto on")
    first.ok("model = {'weights': [1, 2, 3]}")
    first.ok("scores = [0.9]")
    first.ok("%checkpoint wait")
    first.kill()

    second = kernels("morning.ipynb")
    line = second.run("%load_ext jupyter_ckpt").stderr
    # One line: how many, the last good one with its cell, age and variables, and the command to get it back.
    assert re.fullmatch(
        r"jupyter-ckpt: this notebook has 2 kernel checkpoint\(s\) from earlier kernels; the last good one is "
        r"#2 after cell \[3\], \d+ s ago, 2 variable\(s\)\. Get it back with: %checkpoint restore previous\n",
        line,
    )
    second.ok("model = None\nfresh = 1")  # the new kernel's own work: now latest and last-good
    second.ok("%checkpoint wait")
    assert second.ok("%checkpoint restore previous").startswith("restored kernel checkpoint #2 (id ")
    assert second.value("(model, scores, 'fresh' in dir())") == ({"weights": [1, 2, 3]}, [0.9], False)
    # Numbered from 1 in this notebook; ">" where each kernel started, "*" where the namespace is now.
    # (the restore is #4, the cell that printed the values #5)
    table = second.ok("%checkpoint list").splitlines()[1:-2]
    assert [(line[:2].strip(), re.findall(r"#\d+", line)[0]) for line in table] == [
        (">", "#1"),
        ("", "#2"),
        (">", "#3"),
        ("", "#4"),
        ("*", "#5"),
    ]
    second.ok("%checkpoint restore #1")
    assert second.value("'scores' in dir()") is False
    assert (
        second.run("%checkpoint diff #9").stderr
        == "UsageError: no checkpoint #9 in session 'morning.ipynb': it has 7\n"
    )
    refused = second.run("%checkpoint save -t #2").stderr
    assert refused == "UsageError: '#2' cannot be a tag: it would read as a checkpoint reference\n"


def test_a_long_save_or_restore_shows_its_progress_in_the_cell(kernels: Any) -> None:
    k = kernels("progress.ipynb")
    # Shown once a save or restore has run progress_after seconds (1 by default): here from the start.
    k.ok("get_ipython().config.Checkpoints.progress_after = 0\n%load_ext jupyter_ckpt\n%checkpoint auto on")
    k.ok("import numpy as np\nbig = np.random.default_rng(0).random(3_000_000)")  # 24 MB: 6 chunks to read
    # A save tells it from the child that writes: bytes written of a total that it corrects as it learns it.
    saved = k.run("%checkpoint save")
    assert saved.error is None and saved.stdout == "kernel checkpoint #2 (id 2) saved\n"
    shown = [d["text/plain"] for d in saved.data]
    assert len(shown) > 1 and re.fullmatch(r"saving a kernel checkpoint: (22\.9 MiB) of \1", shown[-1]), shown
    k.ok("big = None")
    r = k.run("%checkpoint restore -1")
    assert r.error is None and r.stdout.startswith("restored kernel checkpoint #2 (id ")
    shown = [d["text/plain"] for d in r.data]
    # One display, updated in place as the chunks are read: from nothing to all of it.
    assert shown[0] == "restoring kernel checkpoint #2: 0 B of 22.9 MiB"
    assert shown[-1] == "restoring kernel checkpoint #2: 22.9 MiB of 22.9 MiB"
    last = r.data[-1]["application/vnd.jupyter-ckpt.progress+json"]
    assert last["done"] == last["total"] > 24_000_000  # the array and its pickle
    assert k.value("big.shape") == (3_000_000,)
    # A restore quicker than progress_after shows nothing.
    k.ok("get_ipython().config.Checkpoints.progress_after = 1.0\n%unload_ext jupyter_ckpt\n%load_ext jupyter_ckpt")
    k.ok("big = None")
    quick = k.run("%checkpoint restore #1")
    assert quick.stdout.startswith("restored kernel checkpoint #1 (id ") and quick.data == []


def test_a_store_from_a_newer_version_is_refused(kernels: Any, store: Store, jupyter_dirs: Path) -> None:
    db = sqlite3.connect(store.root / "catalog.sqlite")
    db.execute("UPDATE meta SET value='7' WHERE key='format'")
    db.execute("DROP INDEX refs_blob")  # a newer format may have dropped what this one would create
    db.commit()
    db.close()
    catalog = store.root / "catalog.sqlite"

    def schema() -> list[Any]:
        with contextlib.closing(sqlite3.connect(catalog)) as db:
            return list(db.execute("SELECT name, sql FROM sqlite_master"))

    before = schema()
    k = kernels("newer.ipynb")
    r = k.run("%load_ext jupyter_ckpt")
    assert "newer jupyter-ckpt (format 7" in (r.error or "") + r.stderr
    assert k.value("1 + 1") == 2
    listed = cli("list")
    assert listed.returncode != 0 and "newer jupyter-ckpt (format 7" in listed.stderr
    assert "Traceback" not in listed.stderr
    assert schema() == before  # refused, and left as it was: nothing was created in it


def test_unserializable_values_never_disturb_the_cell(kernels: Any) -> None:
    k = kernels("odd.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto on")
    r = k.run(
        "import sqlite3, threading\ngen = (i for i in range(5))\nconn = sqlite3.connect(':memory:')\n"
        "lock = threading.Lock()\ntotal = 41\nprint('computed', total + 1)"
    )
    assert r.error is None and r.stdout == "computed 42\n"
    # The report comes at the first cell boundary after the background write: here, the wait.
    report = k.run("%checkpoint wait").stderr + r.stderr
    assert report.count("\n") == 1
    assert "conn (Connection" in report and "gen (generator" in report
    again = k.run("total += 1\nprint(next(gen))")
    assert again.stdout == "0\n" and again.stderr == ""  # reported once, not on every cell
    restored = k.ok("total = None\n%checkpoint restore -1")
    assert "not restored: conn" in restored and "not restored: gen" in restored
    assert k.value("total") == 41 and k.value("next(gen)") == 1  # the rest came back; gen kept its live state
    status = k.ok("%checkpoint status")
    assert "skipped: gen: a generator's paused code and its local variables cannot be saved (TypeError" in status


def test_help_is_complete(kernels: Any) -> None:
    k = kernels("help.ipynb")
    k.ok("%load_ext jupyter_ckpt")
    doc = k.ok("print(get_ipython().find_line_magic('checkpoint').__doc__)")
    for option in ("--message", "--tag", "--all", "--only", "--every", "--interval", "--keep-last", "--max-size"):
        assert option in doc
    assert "Kernel checkpoints:" in doc and "not Jupyter's" in doc
    assert "``#N``: its number in this notebook" in doc and "``previous``:" in doc
    assert "session: help.ipynb" in k.ok("%ckpt status")  # the short alias
    assert k.ok("print(get_ipython().find_line_magic('ckpt').__doc__)") == doc  # "Alias for `%checkpoint`." before


def test_quoted_arguments_are_taken_without_their_quotes(kernels: Any, store: Store) -> None:
    k = kernels("quotes.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto off\nimport jupyter_ckpt\nx = 1")
    assert k.ok("%checkpoint save -t \"my tag\" -m 'before the sweep'").endswith("saved as 'my tag'\n")
    k.ok("x = 2")
    k.ok("jupyter_ckpt.restore('my tag')")
    assert k.value("x") == 1
    tagged = next(r for r in store.checkpoints("quotes.ipynb") if r.tag)
    assert (tagged.tag, tagged.message) == ("my tag", "before the sweep")


def test_a_store_removed_while_in_use_is_made_again_and_said_once(
    kernels: Any, jupyter_dirs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default layout, the secret inside the store's directory, and the whole directory removed (a user
    freeing space, a cleaner): checkpoints go on in a new store, which a later kernel can read."""
    root = jupyter_dirs / "data" / "ckpt"
    monkeypatch.delenv("JUPYTER_CKPT_DIR")
    k = kernels("gone.ipynb")
    k.ok("%load_ext jupyter_ckpt\nx = 1")
    k.ok("y = 2\n%checkpoint wait")
    shutil.rmtree(root)
    said = k.run("z = 3")
    assert f"the checkpoint store {root} was removed, and its checkpoints with it" in said.stderr + said.stdout
    again = k.run("w = 4\n%checkpoint save -t after")
    assert again.error is None and "was removed" not in again.stderr  # said once
    assert "  after\n" in k.ok("%checkpoint list")
    k.close()
    fresh = kernels("gone.ipynb")
    fresh.ok("%load_ext jupyter_ckpt")
    fresh.ok("%checkpoint restore after")  # signed with the secret the kernel wrote again
    assert fresh.value("(x, y, z, w)") == (1, 2, 3, 4)


def test_the_cell_that_loads_the_extension_is_checkpointed_if_it_leaves_variables(kernels: Any) -> None:
    """Guarantee 7: ``wait`` makes the state the cells before it left durable, that of the cell typing ``%load_ext``
    too, and of the cells run before it. A loading cell that leaves nothing is not checkpointed: an empty new
    kernel does not become the notebook's newest state."""
    k = kernels("loading.ipynb")
    k.ok("early = 'before the extension'")
    k.ok("%load_ext jupyter_ckpt\nx = [1, 2]")
    k.ok("%checkpoint wait")
    k.kill()
    empty = kernels("loading.ipynb")
    empty.ok("%load_ext jupyter_ckpt")
    empty.ok("%checkpoint wait")
    empty.kill()
    fresh = kernels("loading.ipynb")
    fresh.ok("%load_ext jupyter_ckpt")
    fresh.ok("%checkpoint restore latest")
    assert fresh.value("(early, x)") == ("before the extension", [1, 2])


def test_enabled_kernels_resume_the_notebook_where_it_was(kernels: Any, jupyter_dirs: Path) -> None:
    assert cli("enable").returncode == 0
    config = jupyter_dirs / "ipython" / "profile_default" / "ipython_config.json"
    settings = json.loads(config.read_text())
    settings["Checkpoints"] = {"restore_on_start": True}
    config.write_text(json.dumps(settings))

    first = kernels("resume.ipynb")
    first.ok("hours_of_work = {'fitted': [1, 2, 3]}")
    first.ok("%checkpoint wait")
    first.kill()
    second = kernels("resume.ipynb")  # no magic typed: the profile loads the extension, which restores
    first_cell = second.run("%who")
    assert "jupyter-ckpt: restored kernel checkpoint" in first_cell.stderr  # said where the user looks
    assert "hours_of_work" in first_cell.stdout  # the user's, though IPython hides what start-up made
    assert second.value("hours_of_work") == {"fitted": [1, 2, 3]}
    assert [r.trigger for r in store_at(jupyter_dirs).checkpoints("resume.ipynb")][-1] == "restore"
    # Checkpoints go on holding it: a second crash loses nothing.
    second.ok("more_work = 4\n%checkpoint wait")
    second.kill()
    third = kernels("resume.ipynb")
    assert third.value("(hours_of_work, more_work)") == ({"fitted": [1, 2, 3]}, 4)


def terminal(cells: str, cwd: Path, *command: str, **env: str) -> str:
    """What terminal IPython prints running ``cells`` piped in, then ``exit``, run by ``command`` if given."""
    ran = subprocess.run(
        [*command, sys.executable, "-m", "IPython", "--simple-prompt", "--no-banner", "--HistoryManager.enabled=False"],
        input=cells + "\nexit\n",
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        cwd=cwd,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    return ran.stdout + ran.stderr


def test_a_terminal_that_exits_leaves_the_state_of_its_last_cells(kernels: Any, jupyter_dirs: Path) -> None:
    """Terminal IPython empties the namespace as its loop ends, before Python's ``atexit``: the cells piped back
    to back are checkpointed before that, not the emptied namespace after it."""
    terminal("%load_ext jupyter_ckpt\nx = 1\ny = [x, 2]", jupyter_dirs, JUPYTER_CKPT_SESSION="terminal-job")
    k = kernels(None, JUPYTER_CKPT_SESSION="terminal-job")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint restore previous")
    assert k.value("(x, y)") == (1, [1, 2])


@pytest.mark.parametrize("policy", ["%checkpoint auto on", "# the default policy"])
def test_a_clean_shutdown_right_after_the_last_cell_keeps_its_state(kernels: Any, policy: str) -> None:
    """nbclient, papermill and "Shut Down Kernel" ask the kernel to shut down as soon as the last cell replies.
    ipykernel then terminates every process of the kernel's group, a writer mid-write among them, before
    Python's ``atexit``: the state of the last cells was lost, or only an older one kept."""
    k = kernels("shut-down.ipynb")
    k.ok(f"%load_ext jupyter_ckpt\n{policy}")
    k.ok("import numpy as np\nbig = np.random.default_rng(0).random(16_000_000)\na = 1")
    k.ok("a = 2\nbig[0] = -1.0")
    k.kc.stop_channels()
    k.km.shutdown_kernel(now=False)  # a shutdown request, as they send it
    again = kernels("shut-down.ipynb")
    again.ok("%load_ext jupyter_ckpt\n%checkpoint restore previous")
    assert again.value("(a, float(big[0]))") == (2, -1.0)


def test_terminals_nothing_names_never_share_a_session_even_with_one_process_id(store: Store, tmp_path: Path) -> None:
    """In a container every first process is number 1: a session keyed by the process alone made another
    project's terminal offer (or, with ``restore_on_start``, restore) this one's state."""
    for project in ("a", "b"):
        (tmp_path / project).mkdir()
        said = terminal(
            f"%load_ext jupyter_ckpt\nfrom_{project} = 1", tmp_path / project, "unshare", "-pf", "--mount-proc"
        )
        assert "from earlier kernels" not in said
    keys = [s["key"] for s in store.sessions()]
    assert len(keys) == 2 and all(re.fullmatch(r"ipython-1-[0-9a-f]{8}", key) for key in keys), keys


def test_a_session_named_after_the_extension_loaded_resumes_unless_the_kernel_made_something(
    kernels: Any, jupyter_dirs: Path
) -> None:
    """A terminal or batch run: ``%load_ext`` in one cell, ``%checkpoint session NAME`` in the next. Nothing was
    made in between, so ``restore_on_start`` resumes the session; a kernel that made a variable first is only
    told what the session holds (a restore would remove it)."""
    profile = jupyter_dirs / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_config.py").write_text("c.Checkpoints.restore_on_start = True\n")
    first = kernels(None)
    first.ok("%load_ext jupyter_ckpt\n%checkpoint session job9")
    first.ok("x = 41")
    first.ok("%checkpoint wait")
    first.close()
    second = kernels(None)
    second.ok("%load_ext jupyter_ckpt")
    said = second.run("%checkpoint session job9")
    assert "restored kernel checkpoint" in said.stdout + said.stderr
    assert second.value("x") == 41
    third = kernels(None)
    third.ok("%load_ext jupyter_ckpt\nmine = 1")
    said = third.run("%checkpoint session job9")
    said.stderr += third.run("pass").stderr
    assert "%checkpoint restore previous" in said.stdout + said.stderr
    assert third.value("(mine, 'x' in dir())") == (1, False)


def test_periodic_checkpoints_are_taken_while_the_kernel_is_idle(kernels: Any, store: Store) -> None:
    k = kernels("periodic.ipynb")
    k.ok("%load_ext jupyter_ckpt")
    assert k.ok("%checkpoint auto on --interval 2") == "auto checkpoints: every 2 s\n"
    k.ok("started = True")  # the first cell under the new policy: a checkpoint is due at once
    k.ok("progress = 'made while nobody looked'")
    deadline = time.time() + 20
    while time.time() < deadline:  # no cell runs from here on: only the idle thread can checkpoint
        records = store.checkpoints("periodic.ipynb")
        last = records[-1] if records else None
        if last and "progress" in store.manifest(last.id)["variables"]:
            break
        time.sleep(0.2)
    assert last is not None
    assert last.trigger == "interval" and last.cell == 4  # taken by the idle thread, of the state after cell 4
    assert store.manifest(last.id)["variables"]["progress"]["repr"] == "'made while nobody looked'"


def test_a_cell_after_a_checkpoint_whose_writer_is_gone_takes_no_fault_on_the_pages_it_shared(kernels: Any) -> None:
    k = kernels("pages.ipynb")
    k.ok("%load_ext jupyter_ckpt\nimport resource\nrows = [{'id': i, 'score': 0.5} for i in range(300_000)]")
    write_all = (
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\nfor row in rows:\n    row['score'] += 1\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)"
    )
    faults = []
    for _ in range(2):
        k.ok("%checkpoint")
        # Idle: the writers exit; the idle thread then makes the pages they shared writable again. Without
        # that, the next cell takes a fault on each page it writes (about 16,000).
        time.sleep(3)
        faults.append(int(k.ok(write_all)))
    assert max(faults) < 5_000, faults


def test_a_restore_after_cells_not_checkpointed_loses_nothing_and_an_undo_says_how_far_it_went(kernels: Any) -> None:
    k = kernels("undo.ipynb")
    k.ok(
        "%load_ext jupyter_ckpt\n%checkpoint auto off\nimport jupyter_ckpt"
    )  # as cells run back to back past the budget
    k.ok("x = 1")
    k.ok("%checkpoint save")
    k.ok("x = 5")
    out = k.ok("%checkpoint undo")  # the state before the last cell, which only saved: nothing more to say
    assert k.value("x") == 1 and "not checkpointed" not in out, out
    k.ok("x = 7")
    k.ok("jupyter_ckpt.save()")
    k.ok("x = 8")
    k.ok("x = 9")
    # The newest state before the last cell is the one saved in [8]: the cells after it are undone as well, said.
    out = k.ok("print(jupyter_ckpt.undo())")
    assert k.value("x") == 7
    assert "this is the state before [8], [9] too: the states after [8], [9] were not checkpointed" in out, out
    # The state the undo left was checkpointed first: #1 save, #2 x = 5, #3 undo, #4 save, #5 x = 9.
    k.ok("%checkpoint restore #5")
    assert k.value("x") == 9
    k.ok("x = 10")
    k.ok("%checkpoint restore -1")  # as an undo: from the state x = 10 left, which stays on the timeline
    assert k.value("x") == 9
    replaced, restore = k.value("[(r.id, r.trigger, r.changed) for r in jupyter_ckpt.list()][-2:]")
    assert replaced[1:] == ("cell", ["x"]) and restore[1] == "restore"
    k.ok(f"%checkpoint restore {replaced[0]}")
    assert k.value("x") == 10


def test_an_undo_after_deleting_the_newest_checkpoint_goes_back_one_state_and_keeps_the_deleted_one(
    kernels: Any, store: Store
) -> None:
    """Deleting the checkpoint of the state the namespace is in moved the head to its parent as if the namespace
    were there: the next undo counted from the parent, one state too far, and dropped the deleted state."""
    k = kernels("deleted.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto off\nimport jupyter_ckpt")
    k.ok("w = 0")
    k.ok("%checkpoint save")
    k.ok("y = 1")
    k.ok("%checkpoint save")
    k.ok("x = 3")
    k.ok("%checkpoint save")
    k.ok("%checkpoint delete latest")
    k.ok("%checkpoint undo")  # the state before x = 3
    assert k.value("sorted(n for n in ('w', 'x', 'y') if n in globals())") == ["w", "y"]
    saved = k.value("[r.id for r in jupyter_ckpt.list() if r.changed == ['x']]")  # checkpointed before the undo
    assert len(saved) == 1
    k.ok(f"%checkpoint restore {saved[0]}")
    assert k.value("[w, x, y]") == [0, 3, 1]
    # Deleted by the server's API, which writes the store while the kernel runs: the same at the next look.
    k.ok("x = 4")
    k.ok("%checkpoint save")
    Timeline(store).delete([k.value("jupyter_ckpt.list()[-1].id")])
    k.ok("%checkpoint undo")
    assert k.value("[w, x, y]") == [0, 3, 1]


def test_the_python_api_reads_only_as_names_and_refuses_what_is_no_ref(kernels: Any) -> None:
    """``restore(c, only="xy")`` read the string letter by letter: it restored ``x`` and ``y`` over the user's
    values and left ``xy``. A REF of another type was looked up as a tag named after its text."""
    k = kernels("api.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto off\nimport jupyter_ckpt")
    k.ok("x, y, xy = 1, 2, 3")
    k.ok("c = jupyter_ckpt.save()")
    k.ok("x, y, xy = 10, 20, 30")
    k.ok("import numpy as np\njupyter_ckpt.restore(np.int64(c), only='xy')")  # an id numpy computed is one too
    assert k.value("[x, y, xy]") == [10, 20, 3]
    k.ok("jupyter_ckpt.restore(c, only='x, y')")  # several, as ``--only x,y``
    assert k.value("[x, y, xy]") == [1, 2, 3]
    k.ok("x = 5")
    for call, said in (
        ("jupyter_ckpt.restore(c, only=[])", "no variable named to restore"),
        ("jupyter_ckpt.restore(c, only=[1])", "by their names (str), not [1]"),
        ("jupyter_ckpt.restore(None)", "a REF is a checkpoint id (int) or text"),
        ("jupyter_ckpt.restore(True)", "not bool"),
        ("jupyter_ckpt.diff(3.5)", "not float"),
    ):
        error = k.run(call).error
        assert error is not None and error.startswith("BadArgument") and said in error, (call, error)
    assert k.value("[x, y, xy]") == [5, 2, 3]


def test_an_undo_after_a_cell_that_changed_nothing_says_so(kernels: Any) -> None:
    """An undo steps over cells that changed nothing (README: the state before the last cell that changed
    something); it said their state was not checkpointed, which was false."""
    k = kernels("unchanged.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto on")
    k.ok("x = 1")
    k.ok("x = 2")
    k.ok("print(x)")
    out = k.ok("%checkpoint undo")
    assert k.value("x") == 1
    assert "this is the state before [3] too: [4] changed nothing" in out, out


def test_undo_reads_only_what_the_last_cell_changed(kernels: Any) -> None:
    k = kernels("fast.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto on")
    k.ok("import numpy as np\nbig = np.zeros(5_000_000)\nsmall = [1]")
    k.ok("small.append(2)")
    out = k.ok("%checkpoint undo")
    assert "1 variable(s) read; 1 unchanged" in out  # small read back, big kept in place
    assert k.value("small") == [1]
    # Code before the restore in the same cell changed big in place: the bytes say so, and its chunk is copied back.
    out = k.ok("big[0] = 7\n%checkpoint restore latest")
    assert "0 variable(s) read; 1 changed in place; 1 unchanged" in out
    assert k.value("float(big[0])") == 0.0


def test_two_kernels_on_one_notebook_share_the_store_safely(kernels: Any, store: Store) -> None:
    a, b = kernels("shared.ipynb"), kernels("shared.ipynb")
    for k in (a, b):
        k.ok("%load_ext jupyter_ckpt\n%checkpoint auto on")
    for i in range(4):  # interleaved cells, same data in both: the same blobs written twice at once
        a.ok(f"import numpy as np\nsame = np.arange(3_000_000)\nwho = 'a{i}'")
        b.ok(f"import numpy as np\nsame = np.arange(3_000_000)\nwho = 'b{i}'")
    for k in (a, b):
        k.ok("%checkpoint wait")
    assert cli("verify").returncode == 0
    a.ok("who = None\n%checkpoint restore -1")
    assert a.value("who") == "a2"  # each kernel goes back along its own line of the timeline
    b.ok("%checkpoint undo")
    assert b.value("who") == "b2"


def test_cells_run_before_the_server_loaded_the_extension_are_caught_up(kernels: Any, store: Store) -> None:
    from jupyter_ckpt.kernelclient import request

    k = kernels("early.ipynb")
    k.ok("x = 1")  # a frontend's first cells can reach a new kernel before the server's load request
    k.run("y = 2\nraise ValueError('late')")
    k.kc.execute("", silent=True, user_expressions={"v": request("catch_up")})
    reply = k.kc.get_shell_msg(timeout=60)["content"]
    assert reply["user_expressions"]["v"]["data"]["text/plain"] == repr('"early.ipynb"')
    k.ok("%checkpoint wait")
    (caught,) = store.checkpoints("early.ipynb")
    assert caught.cell == 2
    assert [(c["count"], c["source"]) for c in store.cells(store.last_cell(caught.id))] == [
        (1, "x = 1"),
        (2, "y = 2\nraise ValueError('late')"),
    ]
    assert store.manifest(caught.id)["variables"]["y"]["repr"] == "2"


def test_a_large_array_is_mapped_on_restore_and_its_bytes_checked_after(kernels: Any, store: Store) -> None:
    first = kernels("lazy.ipynb")
    first.ok("%load_ext jupyter_ckpt\n%checkpoint auto on")  # its cells come back to back: each checkpointed
    first.ok("import numpy as np\nbig = np.random.default_rng(0).random(12_000_000)\nview = big[10:20]\nsmall = [1]")
    expected = first.value("float(big.sum())")
    first.ok("import jupyter_ckpt; jupyter_ckpt.wait()")
    first.kill()

    second = kernels("lazy.ipynb")
    second.ok("%load_ext jupyter_ckpt")
    out = second.ok("%checkpoint restore latest")
    assert "big, view mapped (read as used, verified in the background)" in out
    assert second.value("float(big.sum())") == expected
    assert second.value("bool(np.shares_memory(view, big)) and small == [1]")
    # Writing to the mapped array changes the variable, never the stored checkpoint.
    second.ok("big[:] = 0.0")
    # (No `import` in these cells: a module bound in the namespace is a change of state, and -1 would see it.)
    assert second.run("__import__('jupyter_ckpt').wait()").stderr == ""  # verified: nothing to report
    second.ok("%checkpoint restore -1")
    assert second.value("float(big.sum())") == expected
    second.ok("%checkpoint wait")

    # A chunk damaged on disk is mapped as it is, and reported once the background check reaches it.
    record = Timeline(store).resolve("lazy.ipynb", "latest")
    m = store.manifest(record.id)
    chunk = m["groups"][m["variables"]["big"]["group"]]["buffers"][0]["chunks"][5]
    path = store.root / "blobs" / chunk[:2] / chunk
    with open(path, "r+b") as f:
        f.seek(10_000)
        byte = f.read(1)
        f.seek(10_000)
        f.write(bytes([byte[0] ^ 0xFF]))
    third = kernels("lazy.ipynb")
    third.ok("%load_ext jupyter_ckpt")
    assert "mapped" in third.ok("%checkpoint restore latest")
    r = third.run("%checkpoint wait")  # the same wait as jupyter_ckpt.wait(), used above
    assert f"big, view as restored from checkpoint {record.id} may hold damaged values: blob {chunk} fails" in r.stderr
    # A checkpoint does not sign those bytes again as its own: the variables are left out, and say why.
    assert "until then they are left out of checkpoints" in r.stderr
    status = third.ok("%checkpoint save\n%checkpoint status")
    assert f"skipped: big: restored from checkpoint {record.id}, whose blob {chunk} fails its signature" in status
    assert "skipped: view: " in status and "skipped: small" not in status
    # Checkpoint 10 was taken after a restore: a view still shares memory with its array.
    assert third.value("bool(np.shares_memory(view, big)) and small == [1]")

    # Without lazy restore the same damage is refused before anything changes.
    strict = kernels("lazy.ipynb")
    strict.ok("%config Checkpoints.lazy_restore = False\n%load_ext jupyter_ckpt\nbig = 'untouched'")
    r = strict.run(f"%checkpoint restore {record.id}")  # later checkpoints hold the mapped values as they were
    assert r.stderr.startswith("UsageError: checkpoint #")
    assert f"(id {record.id}): blob {chunk} fails its signature check" in r.stderr.splitlines()[0]
    assert strict.value("big") == "untouched"


def test_a_variable_that_cannot_be_loaded_leaves_every_other_one_restored(kernels: Any, tmp_path: Path) -> None:
    helper = tmp_path / "helper_mod.py"
    helper.write_text("class Box:\n    def __init__(self, v):\n        self.v = v\n")
    k = kernels("helper.ipynb", PYTHONPATH=str(tmp_path))
    k.ok("%load_ext jupyter_ckpt")
    k.ok("import helper_mod\nfrom helper_mod import Box\nbox = Box(3)\nrows = [1, 2]\nconfig = {'a': rows}")
    k.ok("%checkpoint wait")
    k.close()
    helper.rename(tmp_path / "helper_renamed.py")  # the notebook's helper file is renamed

    fresh = kernels("helper.ipynb", PYTHONPATH=str(tmp_path))
    fresh.ok("%load_ext jupyter_ckpt")
    out = fresh.ok("%checkpoint restore latest")
    for name in ("box", "Box", "helper_mod"):
        assert f"not restored: {name} (" in out and "No module named 'helper_mod'" in out
    assert fresh.value("config") == {"a": [1, 2]} and fresh.value("config['a'] is rows") is True
    assert fresh.value("[n in dir() for n in ('box', 'Box', 'helper_mod')]") == [False, False, False]


def test_a_restore_finds_the_project_s_modules_and_working_directory_even_after_the_project_moved(
    kernels: Any, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "data" / "raw").mkdir(parents=True)
    (project / "src" / "shapes_lib.py").write_text("class Square:\n    def __init__(self, s):\n        self.side = s\n")
    (project / "data" / "raw" / "input.txt").write_text("first\n")
    k = kernels("project.ipynb", cwd=str(project))
    k.ok("%load_ext jupyter_ckpt")
    k.ok("import os, sys\nsys.path.insert(0, 'src')\nimport shapes_lib\nsquare = shapes_lib.Square(3)")
    k.ok("%checkpoint save")
    k.ok("os.chdir('data')")  # a cell that only moves: a change of state on the timeline
    k.ok("%checkpoint save")
    assert "working directory" in next(row for row in k.ok("%checkpoint list").splitlines() if " #2 " in row)
    k.close()

    moved = tmp_path / "moved"
    project.rename(moved)  # the notebook and its project were moved (or copied to another machine)
    fresh = kernels("project.ipynb", cwd=str(moved))
    fresh.ok("%load_ext jupyter_ckpt")
    out = fresh.ok("%checkpoint restore latest")
    assert "not restored" not in out, out
    # Where the session was, from where this kernel started; its modules found through its own sys.path entry.
    assert fresh.value("(os.getcwd(), square.side, type(square).__module__, sys.path[0])") == (
        str(moved / "data"),
        3,
        "shapes_lib",
        "src",
    )
    assert fresh.value("open('raw/input.txt').read()") == "first\n"
    fresh.ok("%checkpoint undo")  # back before the cell that moved
    assert fresh.value("os.getcwd()") == str(moved)


def test_the_ipython_configuration_the_cells_set_and_the_shell_come_back_in_a_new_kernel(
    kernels: Any, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "edited.py").write_text("def answer():\n    return 1\n")
    (project / "tidy_ext.py").write_text(
        "def load_ipython_extension(ip):\n    ip.register_magic_function(lambda line: 'tidied', 'line', 'tidy')\n"
    )
    k = kernels("config.ipynb", cwd=str(project))
    k.ok("%load_ext jupyter_ckpt")
    k.ok("%load_ext autoreload\n%autoreload 2\nimport edited\nip = get_ipython()\nrows = [1, 2]")
    k.ok("%checkpoint save")
    k.ok("%precision 3\n%config ZMQInteractiveShell.ast_node_interactivity = 'all'\n%load_ext tidy_ext")
    k.ok("%checkpoint save -t configured")  # a cell that only configured: a change of state on the timeline
    assert "IPython configuration" in next(row for row in k.ok("%checkpoint list").splitlines() if " #2 " in row)
    k.close()

    (project / "tidy_ext.py").unlink()  # an extension this kernel cannot load: named, and the rest is set
    fresh = kernels("config.ipynb", cwd=str(project))
    fresh.ok("%load_ext jupyter_ckpt")
    out = fresh.ok("%checkpoint restore configured")
    assert "%load_ext tidy_ext (not run again: ModuleNotFoundError: No module named 'tidy_ext')" in out, out
    (project / "edited.py").write_text("def answer():\n    return 2\n")
    assert fresh.value("(ip is get_ipython(), rows)") == (True, [1, 2])  # the shell: this kernel's
    assert fresh.value("edited.answer()") == 2  # %autoreload 2 reloads the module the notebook edits
    assert fresh.run("1/3").data[0]["text/plain"] == "0.333"
    assert [d["text/plain"] for d in fresh.run("'shown'\n'too'").data] == ["'shown'", "'too'"]
    fresh.ok("%precision 6")
    fresh.ok("%checkpoint restore configured")  # an undo: the checkpoint's own lines are set again
    assert fresh.run("1/3").data[0]["text/plain"] == "0.333"


def test_what_the_cells_changed_of_modules_and_imported_classes_comes_back_in_a_new_kernel(
    kernels: Any, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "settings_mod.py").write_text(
        "DEBUG = False\nLIMIT = 10\nPARAMS = {'lr': 0.1}\nSEEN = []\n\ndef limit():\n    return LIMIT\n\n"
        "def lr():\n    return PARAMS['lr']\n"
    )
    k = kernels("patched.ipynb", cwd=str(project))
    k.ok("%load_ext jupyter_ckpt")
    k.ok(
        "import statistics\nimport pandas as pd\nimport settings_mod as cfg\nfrom fractions import Fraction\n"
        "def my_mean(xs):\n    return 'mine'\n"
        "statistics.mean = my_mean\npd.DataFrame.doubled = lambda self: self * 2\nFraction.half = lambda self: self / 2"
    )
    k.ok("%checkpoint save")
    k.ok(
        "cfg.DEBUG = True\nsetattr(cfg, 'LIMIT', 99)\ncfg.STREAM = (i for i in range(3))\n"
        "class Model:\n    pass\nmodel = Model()\ncfg.MODEL = model\n"
        "from settings_mod import PARAMS, SEEN\ncfg.PARAMS['lr'] = 0.5\ncfg.SEEN.append('run 1')\nSEEN.append('run 2')"
    )
    k.ok("%checkpoint save -t configured")
    assert "Model, PARAMS, SEEN, cfg.DEBUG, cfg.LIMIT, cfg.MODEL ..." in next(
        row for row in k.ok("%checkpoint list").splitlines() if " #2 " in row
    )
    k.ok("cfg.DEBUG = 'later'")
    k.ok("%checkpoint undo")  # the cell that set it again, undone
    assert k.value("cfg.DEBUG") is True
    k.close()

    fresh = kernels("patched.ipynb", cwd=str(project))
    fresh.ok("%load_ext jupyter_ckpt")
    out = fresh.ok("%checkpoint restore configured")
    # One that cannot be saved is named; the module keeps its own value, and there is nothing to replay.
    assert out.splitlines()[1:] == [
        "  not restored: cfg.STREAM (generator could not be serialized: a generator's paused code and its local"
        " variables cannot be saved (TypeError: cannot pickle 'generator' object); kept its current value)"
    ], out
    # The module's own functions read the value set; a notebook function is the one the attribute holds.
    assert fresh.value("(cfg.DEBUG, cfg.limit(), statistics.mean is my_mean, statistics.mean([1]))") == (
        True,
        99,
        True,
        "mine",
    )
    # A notebook object a module was given is one object, not the module's copy (nor a name it lacks).
    assert fresh.value("(cfg.MODEL is model, type(model) is Model)") == (True, True)
    # A project module's containers changed in place, through the module or a variable bound to them by
    # ``from settings_mod import ...``: their contents, in the objects the module holds, which the variables are.
    assert fresh.value("(cfg.PARAMS, cfg.lr(), cfg.SEEN)") == ({"lr": 0.5}, 0.5, ["run 1", "run 2"])
    assert fresh.value("(PARAMS is cfg.PARAMS, SEEN is cfg.SEEN)") == (True, True)
    assert fresh.value("(int(pd.DataFrame({'a': [1]}).doubled()['a'][0]), float(Fraction(1).half()))") == (2, 0.5)
    fresh.ok("cfg.DEBUG = 'changed'")
    fresh.ok("%checkpoint restore configured")  # a whole restore in the same kernel sets them again too
    assert fresh.value("cfg.DEBUG") is True


def test_open_files_come_back_where_they_were_and_written_ones_are_never_truncated(
    kernels: Any, tmp_path: Path
) -> None:
    log, data = tmp_path / "run.log", tmp_path / "input.txt"
    data.write_text("line 1\nline 2\nline 3\n")
    k = kernels("files.ipynb")
    k.ok("%load_ext jupyter_ckpt")
    k.ok(f"out = open({str(log)!r}, 'w')\nout.write('first\\n')\nsrc = open({str(data)!r})\nhead = src.readline()")
    k.ok("%checkpoint save")
    k.ok("out.write('second\\n')\nout.flush()")
    k.kill()

    fresh = kernels("files.ipynb")
    fresh.ok("%load_ext jupyter_ckpt")
    fresh.ok("%checkpoint restore latest")
    assert fresh.value("(out.mode, src.readline(), out.closed)") == ("a", "line 2\n", False)
    fresh.ok("out.write('after restore\\n')\nout.flush()")
    assert log.read_text() == "first\nsecond\nafter restore\n"  # appended to, never truncated


def test_a_connection_is_rebuilt_by_replaying_its_cells_after_a_crash(kernels: Any, tmp_path: Path) -> None:
    k = kernels("replay.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto on")
    k.ok(f"import sqlite3\nconn = sqlite3.connect({str(tmp_path / 'd.sqlite')!r})")
    k.ok("conn.execute('create table if not exists t (x)')\nconn.commit()")
    k.ok("total = 41")
    assert k.run("ratio = total / 0").error is not None  # a failed cell, which replay must not need
    k.ok("%checkpoint wait")
    k.kill()

    fresh = kernels("replay.ipynb")
    fresh.ok("%load_ext jupyter_ckpt\n%checkpoint auto on")
    out = fresh.ok("%checkpoint restore last-good")
    assert "not restored: conn" in out and "%checkpoint replay would rebuild conn (cells [" in out
    assert fresh.value("'conn' in dir()") is False  # asked first: nothing ran yet
    assert fresh.ok("%checkpoint replay").strip() == "conn: replayed"
    assert fresh.value("(conn.execute('select count(*) from t').fetchone()[0], total)") == (0, 41)


def test_the_default_policy_checkpoints_idle_cells_and_bounds_the_lag_of_back_to_back_ones(
    kernels: Any, store: Store, jupyter_dirs: Path
) -> None:
    profile = jupyter_dirs / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_config.py").write_text("c.Checkpoints.budget = 0.0\nc.Checkpoints.max_lag = 1.0\n")
    k = kernels("policy.ipynb")
    k.ok("%load_ext jupyter_ckpt\nimport time")
    for i in range(3):  # as a person works: each cell followed by a pause
        k.ok(f"step = {i}")
        time.sleep(0.6)
    for i in range(7):  # Run All: every request at once, 0.3 s of work each
        k.kc.execute(f"time.sleep(0.3)\nbatch = {i}")
    status = k.ok("%checkpoint wait\n%checkpoint status")

    def saved(name: str) -> list[int]:
        manifests = [store.manifest(r.id) for r in store.checkpoints("policy.ipynb") if r.trigger == "cell"]
        return sorted({int(m["variables"][name]["repr"]) for m in manifests if name in m["variables"]})

    assert saved("step") == [0, 1, 2]  # every cell followed by idle got its own checkpoint
    # Back to back and over budget, a boundary is checkpointed only where another cell as long as the last
    # would take the newest checkpoint past max_lag (1 s) of execution, and the last one when the kernel
    # settles. Each batch cell runs at least 0.3 s, so at most three of them pass between two checkpoints
    # (four would be 1.2 s apart).
    batch = saved("batch")
    steps = [b - a for a, b in zip([-1, *batch[:-1]], batch, strict=True)]
    assert batch[-1] == 6 and len(batch) >= 3 and max(steps) <= 3, batch
    assert "policy: after every cell, within the overhead budget" in status
    # And the loading cell, which left ``time``: the first ``step`` cell came back to back, over the budget.
    assert f"cells not checkpointed: {8 - len(batch)} (back to back, over the overhead budget)" in status


def test_a_store_file_the_kernel_cannot_read_is_one_line_and_checkpoints_go_on(kernels: Any, store: Store) -> None:
    """A result a killed kernel's writer left, made a directory: ``%load_ext`` showed an IsADirectoryError traceback,
    then failed whole (no checkpoint at all), and the server's requests to a kernel that meets it (a notebook
    renamed) failed as "the kernel raised" it. The file is passed over, said in one line, and the notebook is
    checkpointed and renamed as any other."""
    record = store.blobs.tmp / "result.999999999.0.json"  # of a writer whose kernel is gone
    record.mkdir()
    k = kernels("unread.ipynb")
    result = k.run("%load_ext jupyter_ckpt")
    said = [line for line in result.stderr.splitlines() if "passed over" in line]
    assert result.error is None and said == [
        f"jupyter-ckpt: a file in the checkpoint store was passed over: {record}: Is a directory"
    ], result
    k.ok("x = 1\n%checkpoint save -t kept")
    assert [r.tag for r in store.checkpoints("unread.ipynb")] == ["kept"]
    old = k.value("__import__('jupyter_ckpt').extension.active().session")
    rename = json.dumps({"verb": "rename", "args": {"old": old, "new": old + ".renamed"}, "resume": True})
    request = f"from jupyter_ckpt.kernel_api import dispatch\ndispatch(get_ipython(), {rename!r})"
    assert k.run(request).error is None  # the server's request, as kernelclient sends it
    assert [r.tag for r in store.checkpoints("unread.ipynb.renamed")] == ["kept"] and record.is_dir()


def test_a_tag_is_taken_away_by_the_magic_and_the_python_api_as_the_sidebar_can(kernels: Any, store: Store) -> None:
    """The sidebar and the REST API could untag (``tag`` null); the magic and the Python API could not."""
    k = kernels("tags.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto off\nimport jupyter_ckpt")
    first = k.value("(x := 1, jupyter_ckpt.save(tag='baseline'))[1]")
    second = k.value("(x := 2, jupyter_ckpt.tag(jupyter_ckpt.save(), 'two').id)[1]")
    assert [(r.id, r.tag) for r in store.checkpoints("tags.ipynb")] == [(first, "baseline"), (second, "two")]
    assert k.ok("%checkpoint untag baseline").strip() == (
        f"kernel checkpoint #1 (id {first}) untagged (it was 'baseline'; thinning may take it now)"
    )
    no_tag = f"kernel checkpoint #1 (id {first}) has no tag (nothing changed)"
    assert k.ok(f"%checkpoint untag {first}").strip() == no_tag
    assert k.value("jupyter_ckpt.untag('two').tag") is None
    assert [r.tag for r in store.checkpoints("tags.ipynb")] == [None, None]
    for line, error in [
        ("%checkpoint untag", "%checkpoint untag takes one REF"),
        ("%checkpoint untag baseline", "no checkpoint or tag 'baseline'"),
        (f"%checkpoint untag {second} -t two", "-t does not go with %checkpoint untag, which takes no options"),
    ]:
        assert k.run(line).stderr.startswith(f"UsageError: {error}"), line
    assert "untag: take REF's tag away" in k.ok("print(get_ipython().find_line_magic('checkpoint').__doc__)")


def test_magics_and_callbacks_the_cells_registered_come_back_in_a_new_kernel(kernels: Any) -> None:
    """A notebook's own magics (``@register_line_magic``, a Magics class, ``%alias``) and event callbacks live in the
    shell, not in a variable: after a kernel died, ``%checkpoint restore previous`` gave the functions back, but
    ``%shout`` was not found and the callback no longer ran. What cannot be made again from a variable is named."""
    first = kernels("magics.ipynb")
    first.ok("%load_ext jupyter_ckpt")
    first.ok(
        "from IPython.core.magic import Magics, line_magic, magics_class, register_line_magic\n"
        "@register_line_magic\ndef shout(line):\n    return line.upper()"
    )
    first.ok(
        "@magics_class\nclass Tools(Magics):\n    @line_magic\n    def twice(self, line):\n        return line * 2"
    )
    first.ok("get_ipython().register_magics(Tools)")
    first.ok("ran = []\ndef count(result):\n    ran.append(result.execution_count)")
    first.ok("get_ipython().events.register('post_run_cell', count)")
    first.ok("get_ipython().input_transformers_cleanup.append(lambda lines: lines)")
    first.ok("%alias greet echo hello from an alias")
    first.ok("def answer(lines):\n    return [line.replace('ANSWER', '42') for line in lines]")
    first.ok("get_ipython().input_transformers_cleanup.append(answer)")
    first.ok("def calm(shell, kind, value, tb, tb_offset=None):\n    print('calm:', kind.__name__)")
    first.ok("get_ipython().set_custom_exc((KeyError,), calm)")
    first.ok("%checkpoint wait")
    first.kill()

    again = kernels("magics.ipynb")
    again.ok("%load_ext jupyter_ckpt")
    said = again.ok("%checkpoint restore previous")
    assert "not restored: an input transformer (cell [7]) (not registered again by a restore: run cell [7]" in said
    again.ok("loud = %shout hello\nlong = %twice ab")
    assert again.value("(loud, long)") == ("HELLO", "abab")
    assert again.value("len(ran)") == again.value("len(ran)") - 1  # the callback runs once after each cell
    assert again.ok("%greet").strip() == "hello from an alias"
    assert again.value("ANSWER") == 42
    assert again.ok("{}['missing']") == "calm: KeyError\n"
