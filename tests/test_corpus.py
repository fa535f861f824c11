"""Every pattern of ``corpus.py`` comes back, in the kernel that made it (an undo) and in a fresh kernel:
value, identity and behaviour."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from corpus import PATTERNS


def failing(kernel: Any) -> dict[str, str]:
    """The patterns whose check is not True in ``kernel``, with what it gave instead."""
    checks = "{" + ", ".join(f"{p.name!r}: _corpus_check({p.check!r})" for p in PATTERNS) + "}"
    helper = (
        "def _corpus_check(expr):\n    try:\n        return bool(eval(expr, globals())) or 'false'\n"
        "    except Exception as e:\n        return f'{type(e).__name__}: {e}'\n"
    )
    kernel.ok(helper)
    results = kernel.value(f"{{k: v for k, v in {checks}.items() if v is not True}}")
    kernel.ok("del _corpus_check")
    return results


def test_every_pattern_comes_back_through_undo_and_in_a_fresh_kernel(kernels: Any, tmp_path: Path) -> None:
    assert len(PATTERNS) >= 90 and len({p.name for p in PATTERNS}) == len(PATTERNS)
    source = kernels("corpus.ipynb", TMPDIR=str(tmp_path))
    # Only the checkpoints this test asks for: the checks below change what they check, and an idle checkpoint
    # of that changed state (the kernel waits past ``grace`` for the next cell on a loaded machine) would be
    # the one the undo goes back to.
    source.ok("%load_ext jupyter_ckpt\n%checkpoint auto off")
    for pattern in PATTERNS:
        source.ok(pattern.setup)
    source.ok("%checkpoint save -t corpus")  # before the checks, which may call what they check
    assert failing(source) == {}  # the checks hold where the patterns were made

    # A cell that deletes every variable, undone: each group is read back into the kernel that made it, where
    # the old classes and modules are still alive.
    names = source.value(
        "[n for n, v in globals().items() if __import__('jupyter_ckpt.capture').capture.is_user_variable(n, v)"
        " and type(v).__name__ != 'module']"
    )
    source.ok(f"for _name in {names!r}:\n    del globals()[_name]\ndel _name")
    source.ok("%checkpoint save")
    summary = source.ok("%checkpoint undo")
    assert "not restored" not in summary, summary
    assert failing(source) == {}
    source.close()

    fresh = kernels("corpus.ipynb", TMPDIR=str(tmp_path))
    fresh.ok("%load_ext jupyter_ckpt")
    summary = fresh.ok("%checkpoint restore corpus")
    assert "not restored" not in summary, summary
    assert failing(fresh) == {}


def test_a_checkpoint_after_a_cell_that_changed_nothing_lists_no_pattern(kernels: Any, tmp_path: Path) -> None:
    """Each checkpoint is written by a writer forked from the kernel: a pattern that pickles to other bytes in each
    was written again, listed as changed, and an undo took the cell after it for the last one that changed
    something. Then a map the cells write through makes the kernel write its checkpoints itself: there the first
    pickling filled caches (a preview's repr, ``tensor.numpy()``, an ABC's negative cache) that the next ones
    wrote, and 43 patterns were listed as changed once."""
    source = kernels("corpus.ipynb", TMPDIR=str(tmp_path))
    source.ok("%load_ext jupyter_ckpt\n%checkpoint auto off")
    for pattern in PATTERNS:
        if pattern.name != "memmap_written":
            source.ok(pattern.setup)
    source.ok("%checkpoint save -t first")
    source.ok("unrelated = 1")
    source.ok("%checkpoint save -t again")
    assert source.value("sorted(__import__('jupyter_ckpt').diff('first', 'again').changed)") == []
    source.ok(next(p.setup for p in PATTERNS if p.name == "memmap_written"))
    source.ok("%checkpoint save -t in_kernel")
    source.ok("unrelated = 2")
    source.ok("%checkpoint save -t in_kernel_again")
    changed = source.value("sorted(__import__('jupyter_ckpt').diff('in_kernel', 'in_kernel_again').changed)")
    assert changed == ["unrelated"]
    source.close()
