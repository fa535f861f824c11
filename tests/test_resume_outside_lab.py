"""Resuming outside JupyterLab, as users bring it: a VS Code kernel with ``restore_on_start``, which learns its
notebook only after it started (``__vsc_ipynb_file__``), resumes where the last kernel on it was killed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

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
