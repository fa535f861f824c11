"""How many of the corpus's patterns each tool brings back in a fresh kernel: jupyter-ckpt, dill, Kishu.

Each pattern of ``tests/corpus.py`` is made in a kernel of its own, saved by the tool, and restored
into a new kernel, where its check (value, identity, behaviour) must be True. A restore that fails
whole fails the pattern. Writes ``results/corpus.json`` and ``results/corpus.md``. With ``--patterns``,
only those are run (by the tools given), and the other patterns' results recorded in ``results/corpus.json``
are kept; a pattern a tool was not run on is marked so.

    .venv/bin/python benchmarks/fidelity.py [--tools jupyter-ckpt,dill,kishu] [--patterns alias,cycle]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from run import RESULTS, WORK, Kernel, KernelError, Kishu, ensure_kishu_venv

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from corpus import PATTERNS, Pattern

TIMEOUT = 120.0


def save_and_restore(tool: str, pattern: Pattern, tmp: Path) -> tuple[str, str]:
    """(code that saves the namespace in the source kernel, code that restores it in a fresh one)."""
    if tool == "jupyter-ckpt":
        return "%checkpoint save", "%load_ext jupyter_ckpt\n%checkpoint restore latest"
    if tool == "dill":
        path = str(tmp / "session.pkl")
        dill = "__import__('dill')"
        return f"{dill}.dump_module({path!r}, refimported=True)", f"{dill}.load_module({path!r})"
    return "", "from kishu import init_kishu\ninit_kishu()\n_kishu.checkout(_head)"


def attempt(tool: str, pattern: Pattern) -> str | None:
    """None if the pattern came back whole, else what went wrong."""
    tmp = Path(tempfile.mkdtemp(prefix=f"corpus-{tool}-", dir=WORK))
    notebook = tmp / f"{pattern.name}.ipynb"
    notebook.write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    python = Kishu.python if tool == "kishu" else Path(sys.executable)
    env = {
        "JUPYTER_CKPT_DIR": str(tmp / "store"),
        "JUPYTER_DATA_DIR": str(tmp / "data"),
        "IPYTHONDIR": str(tmp / "ipython"),
        "JPY_SESSION_NAME": str(notebook),
        "TEST_NOTEBOOK_PATH": str(notebook),
        "ENV_KISHU_TEST_MODE": "true",
        "KISHU_PATH_ROOT": str(tmp / "store"),
        "TMPDIR": str(tmp),  # the files a pattern makes
    }
    save, restore = save_and_restore(tool, pattern, tmp)
    log = WORK / "logs" / f"corpus-{tool}.log"
    try:
        source = Kernel(python, env, log)
        try:
            first = {"jupyter-ckpt": "%load_ext jupyter_ckpt", "kishu": "from kishu import init_kishu\ninit_kishu()"}
            if tool in first:
                source.run(first[tool], timeout=TIMEOUT)
            source.run(pattern.setup, timeout=TIMEOUT)
            if save:
                source.run(save, timeout=TIMEOUT)
            head = None
            if tool == "kishu":
                head = source.run("", silent=True, expressions={"h": "_kishu._kishu_graph.head()"}, timeout=TIMEOUT)
        finally:
            source.stop()
        fresh = Kernel(python, env, log)
        try:
            if head is not None:
                fresh.run(f"_head = {head.values['h']!r}", silent=True, timeout=TIMEOUT)
            fresh.run(restore, timeout=TIMEOUT)
            check = f"bool({pattern.check})"
            ok = fresh.run("", silent=True, expressions={"ok": check}, timeout=TIMEOUT).values["ok"]
            return None if ok is True else "check is False"
        finally:
            fresh.stop()
    except (KernelError, TimeoutError, RuntimeError) as e:  # RuntimeError: a kernel that died as it started
        return f"{type(e).__name__}: {e}"[:200]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", default="jupyter-ckpt,dill,kishu")
    parser.add_argument("--patterns", help="comma-separated names: run only these, keep the other recorded results")
    args = parser.parse_args()
    tools = args.tools.split(",")
    chosen = PATTERNS if args.patterns is None else [p for p in PATTERNS if p.name in args.patterns.split(",")]
    recorded: dict[str, Any] = {"seconds": 0, "results": {}}
    if args.patterns is not None and (RESULTS / "corpus.json").exists():
        recorded = json.loads((RESULTS / "corpus.json").read_text())
    if "kishu" in tools:
        ensure_kishu_venv()
    (WORK / "logs").mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    results: dict[str, dict[str, str | None]] = {t: dict(recorded["results"].get(t, {})) for t in recorded["results"]}
    for tool in tools:
        results.setdefault(tool, {})
    for pattern in chosen:
        for found in results.values():
            found.pop(pattern.name, None)  # its setup or check may have changed: a tool not run now was not run on it
        for tool in tools:
            found = attempt(tool, pattern)
            if found is not None and found.startswith("RuntimeError: Kernel died before replying"):
                found = attempt(tool, pattern)  # the machine's doing (memory taken by other work): once more
            results[tool][pattern.name] = found
        print(pattern.name, {t: results[t][pattern.name] is None for t in tools}, flush=True)
    names = [p.name for p in PATTERNS]  # in the corpus's order, without patterns it no longer has
    results = {t: {n: found[n] for n in names if n in found} for t, found in results.items()}
    report: dict[str, Any] = {
        "patterns": len(PATTERNS),
        "passed": {t: sum(v is None for v in found.values()) for t, found in results.items()},
        "run": {t: len(found) for t, found in results.items()},
        "seconds": round(recorded["seconds"] + time.monotonic() - started),
        "results": results,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "corpus.json").write_text(json.dumps(report, indent=1) + "\n")
    lines = [
        "# Restore fidelity: the corpus (tests/corpus.py), each pattern restored in a fresh kernel",
        "",
        "| area | pattern | " + " | ".join(results) + " |",
        "|---|---|" + "---|" * len(results),
    ]
    for pattern in PATTERNS:
        marks = [mark(found, pattern.name) for found in results.values()]
        cells = (" ".join(m.replace("|", "/").split()) for m in marks)  # a reason's newlines would end the row
        lines.append(f"| {pattern.area} | {pattern.name} | " + " | ".join(cells) + " |")
    totals = [f"**{report['passed'][t]} of {report['run'][t]}**" for t in results]
    lines.append("| | **passed** | " + " | ".join(totals) + " |")
    (RESULTS / "corpus.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def mark(found: dict[str, str | None], name: str) -> str:
    if name not in found:
        return "not run"
    return "yes" if found[name] is None else f"no: {found[name]}"


if __name__ == "__main__":
    raise SystemExit(main())
