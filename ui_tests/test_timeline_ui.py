"""What a user sees in JupyterLab and Notebook 7: the Kernel checkpoints sidebar, crash recovery, the widget."""

from __future__ import annotations

import os
import re
import shutil
import signal
import time

from conftest import ARTIFACTS, CULL_AFTER, ROOT, Lab
from playwright.sync_api import Browser, Locator, Page, expect

# Append a code cell to the open notebook and run it (the same commands as the toolbar buttons).
APPEND_AND_RUN = """async (code) => {
  const app = window.jupyterapp;
  const notebook = app.shell.currentWidget.content;
  notebook.activeCellIndex = notebook.widgets.length - 1;
  await app.commands.execute('notebook:insert-cell-below');
  notebook.activeCell.model.sharedModel.setSource(code);
  await app.commands.execute('notebook:run-cell');
}"""

# Run the next n cells, one after the other, as Shift+Enter does.
RUN_NEXT = """async (n) => {
  for (let i = 0; i < n; i++) {
    await window.jupyterapp.commands.execute('notebook:run-cell-and-select-next');
  }
}"""


# Wait until the notebook at `path` is the current tab and its kernel has started and answered.
KERNEL_READY = """async (path) => {
  const app = window.jupyterapp;
  const find = () => Array.from(app.shell.widgets('main')).find(w => w.context?.path === path);
  while (!find()) {
    await new Promise(resolve => setTimeout(resolve, 100));
  }
  app.shell.activateById(find().id);
  await find().sessionContext.ready;
  await find().sessionContext.session.kernel.info;
}"""


def open_notebook(page: Page, lab: Lab, name: str, *, notebook7: bool = False, workspace: str = "") -> None:
    """Open a notebook alone: in a JupyterLab workspace of its own (named after it, or ``workspace``), or in
    Notebook 7's notebook page."""
    workspace = workspace or name.removesuffix(".ipynb")
    where = f"notebooks/{name}" if notebook7 else f"lab/workspaces/{workspace}/tree/{name}"
    page.goto(f"{lab.url}/{where}?token={lab.token}")
    page.wait_for_function("() => window.jupyterapp !== undefined")  # set once the app has started
    page.evaluate(KERNEL_READY, name)


def run(page: Page, code: str) -> str:
    """Run code in a new cell at the end of the notebook; returns what it printed."""
    page.evaluate(APPEND_AND_RUN, code)
    cell = page.locator(".jp-Notebook .jp-Cell").last
    expect(cell.locator(".jp-InputPrompt")).to_have_text(re.compile(r"\[\d+\]"), timeout=60_000)
    return cell.locator(".jp-OutputArea").inner_text()


def run_next(page: Page, cells: int) -> None:
    page.evaluate(RUN_NEXT, cells)


def open_sidebar(page: Page) -> Locator:
    """Through the command palette, as a user finds it; at the sidebar's default width."""
    page.keyboard.press("Control+Shift+C")
    page.keyboard.type("Show Kernel Checkpoints")
    page.keyboard.press("Enter")
    sidebar = page.locator("#jupyter-ckpt-sidebar")
    expect(sidebar).to_be_visible()
    return sidebar


# Every row, its first line and its changed variables, that is wider than its box (cut or scrolled).
CUT = """(sidebar) => Array.from(sidebar.querySelectorAll('.jp-ckpt-row, .jp-ckpt-line, .jp-ckpt-changed'))
  .filter(e => e.scrollWidth > e.clientWidth).map(e => e.textContent)"""


def assert_rows_readable(sidebar: Locator) -> None:
    """Nothing of a row is cut at the width the sidebar has: its variables wrap onto a second line, and the
    row's hover text names them all."""
    assert sidebar.evaluate(CUT) == []
    last = sidebar.locator(".jp-ckpt-row").last
    changed = last.locator(".jp-ckpt-changed").inner_text()
    assert f"Changed: {changed}" in (last.get_attribute("title") or "")


def row(where: Locator, cell: int) -> Locator:
    return where.locator(".jp-ckpt-row", has=where.page.locator(".jp-ckpt-cell", has_text=f"[{cell}]")).last


def save_for_docs(source: str, name: str) -> None:
    shutil.copy(ARTIFACTS / source, ROOT / "docs" / name)


def run_the_first_four_checkpoints(page: Page, sidebar: Locator) -> None:
    """Run the demo's first cells, each step waiting for its checkpoint in the sidebar, numbered from 1.

    The server extension loaded jupyter_ckpt as the kernel started, so every cell followed by idle gets a
    checkpoint (a cell run while the previous checkpoint is written shares the next one).
    """
    shown: list[str] = []
    # markdown and %load_ext [1], imports [2], markdown and orders [3], revenue column [4]
    for cells, count in ((2, 1), (1, 2), (2, 3), (1, 4)):
        run_next(page, cells)
        shown.append(f"[{count}]")
        expect(sidebar.locator(".jp-ckpt-row .jp-ckpt-cell")).to_have_text(shown)
    expect(sidebar.locator(".jp-ckpt-row .jp-ckpt-id")).to_have_text(["#1", "#2", "#3", "#4"])
    expect(page.locator(".jp-ckpt-statusbar")).to_contain_text(re.compile(r"Kernel checkpoint \d+ s ago"))
    assert_rows_readable(sidebar)


def test_sidebar_follows_the_notebook_and_restores(page: Page, lab: Lab) -> None:
    open_notebook(page, lab, "analysis_session.ipynb")
    sidebar = open_sidebar(page)
    expect(sidebar.locator(".jp-ckpt-title")).to_have_text("Kernel checkpoints")
    expect(sidebar.locator(".jp-ckpt-notebook")).to_have_text("analysis_session.ipynb")

    run_the_first_four_checkpoints(page, sidebar)
    # The store's size against its retention budget, in full in its tooltip.
    expect(sidebar.locator(".jp-ckpt-store")).to_have_text(
        re.compile(r"^store: [\d.]+ (B|KiB|MiB|GiB) of [\d.]+ GiB \(\d+%\)$")
    )
    expect(sidebar.locator(".jp-ckpt-store")).to_have_attribute("title", re.compile("budget .* always left"))

    row(sidebar, 4).click()
    details = sidebar.locator(".jp-ckpt-details")
    expect(details.locator(".jp-ckpt-diff")).to_contain_text(re.compile(r"~ orders: \(5000, 4\) .+ → \(5000, 5\)"))
    expect(details.locator("tr[data-name='orders']")).to_contain_text("(5000, 5)")
    page.screenshot(path=ARTIFACTS / "sidebar.png")

    row(sidebar, 3).click()
    expect(details.locator(".jp-ckpt-touched .jp-ckpt-name")).to_have_text(["orders", "rng"])
    expect(details.locator("tr[data-name='orders']")).to_contain_text("(5000, 4)")
    details.locator(".jp-ckpt-restore").click()
    page.locator(".jp-Dialog button.jp-mod-accept").click()
    expect(sidebar.locator(".jp-ckpt-status-line")).to_contain_text("restored kernel checkpoint #3 (id ")
    expect(sidebar.locator(".jp-ckpt-row .jp-ckpt-trigger").last).to_have_text("restore")
    assert "(5000, 4)" in run(page, "print(orders.shape)")
    save_for_docs("sidebar.png", "sidebar.png")

    # Tag a checkpoint and delete another from the sidebar: the kernel's own timeline agrees.
    row(sidebar, 2).click()
    details.locator(".jp-ckpt-tag-button").click()
    page.locator(".jp-Dialog input").fill("imports done")
    page.locator(".jp-Dialog button.jp-mod-accept").click()
    expect(sidebar.locator(".jp-ckpt-status-line")).to_contain_text("kernel checkpoint #2 tagged imports done")
    expect(row(sidebar, 2).locator(".jp-ckpt-tag")).to_have_text("imports done")
    row(sidebar, 1).click()
    details.locator(".jp-ckpt-delete").click()
    page.locator(".jp-Dialog button.jp-mod-warn").click()
    expect(sidebar.locator(".jp-ckpt-status-line")).to_contain_text("kernel checkpoint #1 deleted")
    expect(sidebar.locator(".jp-ckpt-row .jp-ckpt-cell", has_text="[1]")).to_have_count(0)
    listing = run(page, "%checkpoint list")
    assert "imports done" in listing and not re.search(r"^\s*#\d+\s+\d+\s+\S+\s+1\s", listing, re.M), listing


def test_a_killed_kernel_comes_back_with_its_variables(page: Page, lab: Lab) -> None:
    open_notebook(page, lab, "crash_and_recover.ipynb")
    sidebar = open_sidebar(page)
    # markdown, %load_ext [1], measurements [2], calibrated [3], a database connection [4]
    run_next(page, 5)
    # [5]: a value that takes 3 s to unpickle (time.sleep(3) rebuilds it, as None), so that the restore runs
    # long enough for the notification to be seen in progress on any machine.
    slow = "class Slow:\n    def __reduce__(self):\n        return (__import__('time').sleep, (3,))\nslow = Slow()"
    pid = int(run(page, f"{slow}\nimport os\nprint(os.getpid())"))
    expect(row(sidebar, 5)).to_be_visible()  # the last cell's checkpoint is in the store

    os.kill(pid, signal.SIGKILL)
    # The server tells how far its restore is; the notification shows it, then turns to done.
    working = page.locator(".Toastify__toast", has_text="The kernel of crash_and_recover.ipynb crashed: re")
    expect(working).to_be_visible(timeout=60_000)
    toast = page.locator(".Toastify__toast", has_text="was restored to kernel checkpoint")
    expect(toast).to_be_visible(timeout=60_000)
    expect(working).to_have_count(0)  # the same notification, not a second one
    page.screenshot(path=ARTIFACTS / "crash-notification.png")
    restored = re.search(r"kernel checkpoint (#\d+)", toast.inner_text())
    assert restored is not None
    # The timeline ends with the crash-restore entry, where the new kernel started, and the checkpoint it
    # went back to is the last cell's.
    last = sidebar.locator(".jp-ckpt-row").last
    expect(last.locator(".jp-ckpt-trigger")).to_have_text("crash-restore")
    expect(last).to_have_class(re.compile("jp-ckpt-kernel-start"))
    target = sidebar.locator(".jp-ckpt-row", has=page.locator(".jp-ckpt-id", has_text=re.compile(f"^{restored[1]}$")))
    expect(target.locator(".jp-ckpt-cell")).to_have_text("[5]")
    assert run(page, "print(expensive_result > 0, summary.shape, slow)").strip() == "True (3, 2) None"

    # The connection could not be saved; the notification offers to run its cell again, only when asked, and
    # shows the code that would run before it runs.
    page.locator(".jp-Dialog", has_text="appears to have died").locator("button.jp-mod-accept").click()  # Lab's own
    offer = page.locator(".Toastify__toast", has_text="can be rebuilt by running their cells again: db")
    assert run(page, "print('db' in globals())").strip() == "False"
    offer.get_by_role("button", name="Review the cells").click()
    review = page.locator(".jp-Dialog", has_text="Run these cells again to rebuild db")
    expect(review.locator(".jp-ckpt-replay-cell pre").first).to_contain_text("sqlite3.connect")
    review.screenshot(path=ARTIFACTS / "replay-review.png")
    review.get_by_role("button", name="Run them").click()
    expect(page.locator(".Toastify__toast", has_text="Replay: db")).to_be_visible(timeout=30_000)
    assert run(page, "print(db.execute('select count(*) from readings').fetchone())").strip() == "(3000,)"


def test_timeline_widget_restores_a_savepoint(page: Page, lab: Lab) -> None:
    open_notebook(page, lab, "rollback_and_branching.ipynb")
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    widget = page.locator(".ckpt-timeline")
    details = widget.locator(".ckpt-details")
    # the cell that took the log of the prices, on the branch that went on from the savepoint
    widget.locator(".ckpt-row", has_text="label, prices").last.click()
    expect(details.locator(".ckpt-diff")).to_contain_text("~ label: 'raw' → 'log'")
    widget.scroll_into_view_if_needed()
    widget.screenshot(path=ARTIFACTS / "widget.png")

    widget.locator(".ckpt-row", has=page.locator(".ckpt-tag", has_text="baseline")).click()
    expect(details).to_contain_text("raw prices, first threshold")
    expect(details.locator(".ckpt-variables")).to_contain_text("'raw'")

    details.locator(".ckpt-restore").click()
    expect(widget.locator(".ckpt-status-line")).to_contain_text("restored kernel checkpoint #")
    # the restore lands on the timeline as a branch from the savepoint
    expect(widget.locator(".ckpt-row .ckpt-trigger").last).to_have_text("restore", timeout=10_000)
    assert run(page, "print(label, len(prices))").strip() == "raw 1000"
    save_for_docs("widget.png", "widget.png")


def test_a_restarted_kernel_says_what_the_last_one_left(page: Page, lab: Lab) -> None:
    shutil.copy(lab.notebooks / "analysis_session.ipynb", lab.notebooks / "restart_session.ipynb")
    open_notebook(page, lab, "restart_session.ipynb")
    sidebar = open_sidebar(page)
    run_next(page, 3)  # markdown and %load_ext [1], imports [2]
    expect(sidebar.locator(".jp-ckpt-row .jp-ckpt-cell")).to_have_text(["[1]", "[2]"])
    page.evaluate("async () => { await window.jupyterapp.shell.currentWidget.sessionContext.restartKernel(); }")

    # The server loads the extension into the new kernel as it starts; the first cell after that says
    # what the earlier kernel left, and how to get it back.
    for _ in range(3):
        said = run(page, "x = 1")
        if "jupyter-ckpt:" in said:
            break
    assert re.search(r"the last good one is #2 after cell \[2\], \d+ s ago, 2 variable\(s\)", said), said
    assert said.strip().endswith("Get it back with: %checkpoint restore previous")
    # The new kernel's own checkpoint starts a line of its own; previous still names the old one's.
    new_kernel = sidebar.locator(".jp-ckpt-kernel-start").last
    expect(new_kernel.locator(".jp-ckpt-id")).to_have_text("#3")
    expect(new_kernel.locator(".jp-ckpt-kernel-label")).to_have_text("new kernel")
    # (progress_after = 0 here: the restore shows its progress, bytes read of all, in the cell first)
    restored = run(page, "%checkpoint restore previous").splitlines()
    assert re.fullmatch(r"restoring kernel checkpoint #2: (\d+ B) of \1", restored[0])
    assert restored[1].startswith("restored kernel checkpoint #2 (id ")
    assert run(page, "print(n_orders, 'x' in dir())").strip() == "5000 False"


def test_notebook7_has_the_sidebar_and_restores(page: Page, lab: Lab) -> None:
    """Jupyter Notebook 7 (``jupyter notebook``): the same extension, from its command palette."""
    shutil.copy(lab.notebooks / "analysis_session.ipynb", lab.notebooks / "notebook7_session.ipynb")
    open_notebook(page, lab, "notebook7_session.ipynb", notebook7=True)
    sidebar = open_sidebar(page)
    expect(sidebar.locator(".jp-ckpt-notebook")).to_have_text("notebook7_session.ipynb")
    run_the_first_four_checkpoints(page, sidebar)  # numbered from 1, though the store holds other notebooks'
    expect(row(sidebar, 4).locator(".jp-ckpt-changed")).to_have_text("orders")

    row(sidebar, 3).click()
    details = sidebar.locator(".jp-ckpt-details")
    expect(details.locator(".jp-ckpt-touched .jp-ckpt-name")).to_have_text(["orders", "rng"])
    page.screenshot(path=ARTIFACTS / "notebook7.png")
    run(page, "orders = None")  # gone: the restore reads it back whole
    details.locator(".jp-ckpt-restore").click()
    page.locator(".jp-Dialog button.jp-mod-accept").click()
    expect(sidebar.locator(".jp-ckpt-status-line")).to_contain_text("restored kernel checkpoint #3 (id ")
    # The kernel told the sidebar how far the restore was, in bytes (the server asked for it, not a cell).
    expect(sidebar.locator(".jp-ckpt-progress")).to_have_text(
        re.compile(r"restoring kernel checkpoint #3: (\d+\.\d \w+) of \1")
    )
    assert "(5000, 4)" in run(page, "print(orders.shape)")
    # A save asked for from the sidebar tells its progress there too, from the child that writes it.
    sidebar.locator(".jp-ckpt-save").click()
    expect(sidebar.locator(".jp-ckpt-progress")).to_have_text(
        re.compile(r"saving a kernel checkpoint: (\d+\.\d \w+) of \1")
    )
    save_for_docs("notebook7.png", "notebook7.png")


def test_a_culled_kernel_state_is_one_click_away(page: Page, browser: Browser, lab: Lab) -> None:
    """A hub culls a kernel left idle with no page open; the notebook opened again offers its state back."""
    shutil.copy(lab.notebooks / "analysis_session.ipynb", lab.notebooks / "culled_session.ipynb")
    open_notebook(page, lab, "culled_session.ipynb")
    sidebar = open_sidebar(page)
    run_next(page, 3)  # markdown and %load_ext [1], imports [2]
    expect(sidebar.locator(".jp-ckpt-row .jp-ckpt-cell")).to_have_text(["[1]", "[2]"])
    culled = page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.id")
    page.goto("about:blank")  # the laptop closes: no page is connected to the kernel any more
    deadline = time.monotonic() + CULL_AFTER + 30
    while any(k["id"] == culled for k in lab.api("/api/kernels")):  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "the kernel was not culled"
        time.sleep(1)

    again = browser.new_context(viewport={"width": 1500, "height": 900}).new_page()
    open_notebook(again, lab, "culled_session.ipynb", workspace="next_morning")  # the sidebar closed, as new
    sidebar = open_sidebar(again)
    offer = sidebar.locator(".jp-ckpt-resume")
    expect(offer).to_contain_text(
        re.compile(r"Resume where you left off: #2 after cell \[2\], \d+ s ago, \d+ variables?")
    )
    offer.locator(".jp-ckpt-resume-button").click()
    expect(sidebar.locator(".jp-ckpt-status-line")).to_contain_text("restored kernel checkpoint #2 (id ")
    expect(offer).to_have_count(0)
    assert run(again, "print(type(rng).__name__, np.__name__, pd.__name__)").strip() == "Generator numpy pandas"
    again.context.close()
