"""The demo notebooks run top to bottom, headless, and show what their markdown promises."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

DEMOS = Path(__file__).parent.parent / "demo_notebooks"

# What a reader sees in each notebook's outputs when it worked.
EXPECTED = {
    # the status after the long loop: every cell checkpointed, nothing left to write
    "analysis_session": ["policy: after every cell", "writing: no", "boot_means"],
    # after the (skipped) crash, the expensive result and the summary table are there
    "crash_and_recover": ["calibrate, calibrated, db, expensive_result", "(3, 2))"],
    # undo, restore of the savepoint, a one-variable restore on the new branch, and the timeline widget
    "rollback_and_branching": [
        "40.0",
        "('raw', 1000)",
        "(40.0, 'log')",
        "baseline",
        "application/vnd.jupyter.widget-view+json",
    ],
}


def shown(nb: nbformat.NotebookNode) -> str:
    """The text of every output, and the media type of every rich one (a widget shows as its type)."""
    return "\n".join(
        out.get("text", "") + "\n".join([out.get("data", {}).get("text/plain", ""), *out.get("data", {})])
        for cell in nb.cells
        for out in cell.get("outputs", [])
    )


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_demo_notebook_runs_top_to_bottom(name: str, jupyter_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JPY_SESSION_NAME", f"{name}.ipynb")
    nb = nbformat.read(DEMOS / f"{name}.ipynb", as_version=4)
    client = NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(jupyter_dirs)}})
    client.execute()
    text = shown(nb)
    assert "checkpoint failed" not in text
    for expected in EXPECTED[name]:
        assert expected in text


def test_every_demo_is_tested() -> None:
    assert sorted(p.stem for p in DEMOS.glob("*.ipynb")) == sorted(EXPECTED)
