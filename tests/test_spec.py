"""SPEC.md's promises to a notebook user, each checked in a real kernel as a test written from the spec alone would."""

from __future__ import annotations

from typing import Any

from jupyter_ckpt.store import Store

LOOP = """
import time
taken = []
for step in range(10):
    done = step
    taken.append(jupyter_ckpt.here())
    time.sleep(0.4)
print(sum(taken))
"""


def test_list_returns_the_session_s_checkpoints_oldest_first_as_records_with_the_named_fields(kernels: Any) -> None:
    k = kernels("records.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto off\nimport jupyter_ckpt")
    k.ok("x = 1")
    first = k.value("jupyter_ckpt.save(message='one')")
    k.ok("x = 2")
    k.ok("%ckpt save -t two")  # the alias
    assert k.run("1 / 0").error == "ZeroDivisionError: division by zero"
    k.ok("%checkpoint")
    fields = ("id", "time", "cell", "trigger", "status", "tag", "parent")
    records = k.value(f"[{{f: getattr(r, f) for f in {fields!r}}} for r in jupyter_ckpt.list()]")
    assert [r["id"] for r in records] == sorted(r["id"] for r in records) and records[0]["id"] == first
    assert [(r["cell"], r["trigger"], r["status"], r["tag"]) for r in records] == [
        (2, "manual", "ok", None),  # each holds the state the cell before it left
        (4, "manual", "ok", "two"),
        # After a failed cell, a checkpoint the user asks for is a state they chose: ok, one last-good and crash
        # recovery go back to (the automatic one after that cell is an error).
        (6, "manual", "ok", None),
    ]
    assert [r["parent"] for r in records] == [None, records[0]["id"], records[1]["id"]]
    assert all(isinstance(r["time"], float) for r in records)
    # A record reads as a mapping too, with the same fields as the REST API's checkpoints.
    assert k.value("[jupyter_ckpt.list()[-1][f] for f in ('id', 'cell', 'trigger', 'status', 'tag')]") == [
        records[-1]["id"],
        6,
        "manual",
        "ok",
        None,
    ]


def test_here_takes_milestones_inside_a_running_cell_at_the_policy_s_rate(kernels: Any) -> None:
    k = kernels("loop.ipynb")
    k.ok("%load_ext jupyter_ckpt\nimport jupyter_ckpt")
    # Under the default policy, checkpoints are never more than max_lag apart: nor are a loop's milestones.
    k.ok("%config Checkpoints.max_lag = 1.0")
    taken = int(k.ok(LOOP))
    k.ok("jupyter_ckpt.wait()")
    loops = k.value("[r.cell for r in jupyter_ckpt.list() if r.trigger == 'loop']")
    assert 2 <= taken <= 6 and len(loops) == taken, (taken, loops)  # about 4 s of loop, one a second at most
    # With --interval, one per interval.
    k.ok("%checkpoint auto on --interval 1")
    taken = int(k.ok(LOOP))
    assert 2 <= taken <= 6, taken


def test_the_python_api_works_in_a_kernel_that_has_not_loaded_the_extension(kernels: Any) -> None:
    """VS Code, a terminal or a kernel nothing configured: ``import jupyter_ckpt`` and its verbs, as the REST API's
    requests load the extension first."""
    k = kernels("plain.ipynb")
    k.ok("import jupyter_ckpt\nx = 1")
    cid = k.value("jupyter_ckpt.save(tag='start')")
    assert k.value("[(r.id, r.tag) for r in jupyter_ckpt.list()]") == [(cid, "start")]
    k.ok("x = 2")
    k.ok("jupyter_ckpt.restore('start')")
    assert k.value("x") == 1
    assert "start" in k.ok("%checkpoint list")  # the magic is there too from then on


def test_what_the_python_api_returns_shows_in_a_cell_as_the_magic_prints_it(kernels: Any) -> None:
    k = kernels("shown.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto on\nimport jupyter_ckpt")
    k.ok("x = 1")
    k.ok("y = [1, 2]")
    (diff,) = k.run("jupyter_ckpt.diff(-1)").data
    assert diff["text/plain"] == k.ok("%checkpoint diff -1").rstrip("\n")
    assert diff["text/plain"].startswith("+ y: list (")
    (undone,) = k.run("jupyter_ckpt.undo()").data
    assert undone["text/plain"].startswith("restored kernel checkpoint #")
    assert k.value("'y' in globals()") is False


def test_the_python_api_has_the_magic_s_verbs_for_status_history_exclude_include_and_delete(kernels: Any) -> None:
    k = kernels("verbs.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto off\nimport jupyter_ckpt")
    k.ok("x = 1\nscratch = 2")
    assert k.value("jupyter_ckpt.exclude('scratch')") == ["scratch"]
    first = k.value("jupyter_ckpt.save()")
    assert "scratch" not in k.ok("%checkpoint diff")  # kept out: not in the checkpoint, so not compared either
    assert k.value("jupyter_ckpt.include('scratch')") == []
    second = k.value("jupyter_ckpt.save(tag='two')")
    status = k.value("{k: v for k, v in jupyter_ckpt.status().items() if k in ('checkpoints', 'session', 'writing')}")
    assert status["checkpoints"] == 2 and status["session"].endswith("verbs.ipynb") and status["writing"] is False
    cells = k.value(f"[(c['count'], c['source'], c['status']) for c in jupyter_ckpt.history({first})]")
    assert cells[1] == (2, "x = 1\nscratch = 2", "ok") and [c[0] for c in cells] == [1, 2, 3]  # up to its state
    assert k.value("jupyter_ckpt.delete('two').id") == second
    assert k.value("[r.id for r in jupyter_ckpt.list()]") == [first]


def test_an_option_set_to_a_value_it_cannot_take_is_refused_and_keeps_its_value(
    kernels: Any, jupyter_dirs: Any
) -> None:
    k = kernels("options.ipynb")
    k.ok("%load_ext jupyter_ckpt")
    options = "(c.budget, c.max_lag, c.idle_poll, c.progress_after, c.interval, c.every)"
    read = f"[{options} for c in get_ipython().configurables if type(c).__name__ == 'Checkpoints']"
    before = k.value(read)
    for line, why in [
        ("%config Checkpoints.idle_poll = 0", "idle_poll"),  # the idle thread looked again at once, for ever
        ("%config Checkpoints.max_lag = -5", "max_lag"),
        ("%config Checkpoints.max_lag = float('nan')", "max_lag"),
        ("%config Checkpoints.budget = -1", "budget"),
        ("%config Checkpoints.progress_after = float('nan')", "progress_after"),
        ("%config Checkpoints.interval = -1", "interval"),
        ("%config Checkpoints.every = -2", "every"),
    ]:
        result = k.run(line)
        assert f"c.Checkpoints.{why} must be" in result.stderr, (line, result)
    assert k.value(read) == before
    # Set in a configuration file, such a value keeps the extension from loading, said in one line.
    profile = jupyter_dirs / "ipython" / "profile_default"
    profile.mkdir(parents=True, exist_ok=True)
    (profile / "ipython_config.py").write_text("c.Checkpoints.max_lag = 0.0\n")
    fresh = kernels("options.ipynb")
    result = fresh.run("%load_ext jupyter_ckpt")
    assert result.error is not None and "max_lag" in result.error and "Traceback" not in result.stderr, result


def test_the_policy_and_the_variables_kept_out_are_remembered_for_the_notebook_s_next_kernel(
    kernels: Any, store: Store
) -> None:
    first = kernels("remembered.ipynb")
    first.ok("%load_ext jupyter_ckpt")
    policy = first.ok("%checkpoint auto on --every 3 --interval 600")
    assert policy == "auto checkpoints: after every 3 cells or every 600 s\n"
    first.ok("%checkpoint exclude big")
    first.close()
    second = kernels("remembered.ipynb")
    second.ok("%load_ext jupyter_ckpt")
    status = second.ok("%checkpoint status").splitlines()
    assert "policy: after every 3 cells or every 600 s" in status and "excluded: big" in status
    second.ok("big = 1\nsmall = 2")
    cid = second.value("__import__('jupyter_ckpt').save()")
    assert sorted(store.manifest(cid)["variables"]) == ["small"]


def test_a_restore_keeps_the_state_it_replaces_on_the_timeline(kernels: Any) -> None:
    """As ``restore -1`` and ``undo`` do: a restore by id or tag, after cells whose states the policy did not take
    (automatic checkpoints off, ``--every N``, back to back past the budget), lost the state they left."""
    k = kernels("replaced.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto off\nimport jupyter_ckpt")
    k.ok("x = 1")
    k.ok("%checkpoint save -t start")
    k.ok("x = 2\ny = 'work'")
    k.ok("%checkpoint restore start")
    assert k.value("(x, 'y' in globals())") == (1, False)
    replaced = k.value("[r.id for r in jupyter_ckpt.list() if r.cell == 4]")
    assert len(replaced) == 1, replaced
    k.ok(f"%checkpoint restore {replaced[0]}")
    assert k.value("(x, y)") == (2, "work")


def test_an_undo_after_a_restore_goes_back_to_the_state_the_restore_replaced(kernels: Any) -> None:
    """The last cell that changed something was the restore: undo takes it back (it went on up the restored
    state's ancestors, further into the past), and the next undo goes on back from there."""
    k = kernels("undo-restore.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto on\nimport jupyter_ckpt")
    k.ok("x = 1")
    k.ok("x = 2")
    k.ok("x = 3")
    k.ok("%checkpoint restore -2")
    assert k.value("x") == 1
    k.ok("print('a cell that changes nothing')")
    k.ok("%checkpoint undo")
    assert k.value("x") == 3
    k.ok("%checkpoint undo")
    assert k.value("x") == 2
    # Through the Python API too, and a cell that changed something after the restore is what an undo undoes.
    k.ok("jupyter_ckpt.restore(-1)")
    k.ok("y = 5")
    k.ok("jupyter_ckpt.undo()")
    assert k.value("('y' in globals(), x)") == (False, 1)
