"""One real JupyterLab for the whole browser run, and Debian's Chromium driven by Playwright.

JupyterLab runs as a subprocess on a free loopback port, with every Jupyter
directory (data, config, settings, the checkpoint store, the notebooks) in a
temporary folder, so a run never reads or writes the developer's own.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

ROOT = Path(__file__).parent.parent
CULL_AFTER = 10
ARTIFACTS = Path(__file__).parent / "artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@dataclass
class Lab:
    url: str
    token: str
    notebooks: Path
    log: Path

    def api(self, path: str) -> object:
        request = urllib.request.Request(f"{self.url}{path}", headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    home = tmp_path_factory.mktemp("lab")
    notebooks = home / "notebooks"
    shutil.copytree(ROOT / "demo_notebooks", notebooks)
    # JupyterLab's news and update checks would cover the screenshots, and so would the kernel
    # picker that a notebook opened before the kernel specs have loaded can show.
    for plugin, values in {
        "apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
        "notebook-extension/tracker": {"autoStartDefaultKernel": True},
    }.items():
        settings = home / "settings" / "@jupyterlab" / f"{plugin}.jupyterlab-settings"
        settings.parent.mkdir(parents=True, exist_ok=True)
        settings.write_text(json.dumps(values))
    # Every restore shows its progress (bytes read of the total), not only those that take over a second.
    kernel_config = home / "ipython" / "profile_default" / "ipython_config.json"
    kernel_config.parent.mkdir(parents=True)
    kernel_config.write_text(json.dumps({"Checkpoints": {"progress_after": 0}}))
    env = dict(
        os.environ,
        JUPYTER_DATA_DIR=str(home / "data"),
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        JUPYTER_CKPT_DIR=str(home / "store"),
        JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
        IPYTHONDIR=str(home / "ipython"),
    )
    port, token = free_port(), secrets.token_hex(16)
    log = ARTIFACTS / "jupyterlab.log"
    ARTIFACTS.mkdir(exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--ServerApp.root_dir={notebooks}",
        f"--IdentityProvider.token={token}",
        "--LabApp.expose_app_in_browser=True",
        "--JupyterNotebookApp.expose_app_in_browser=True",  # Notebook 7, served by the same server
        # A hub's idle culler, short: a kernel no page is connected to goes after CULL_AFTER seconds idle.
        f"--MappingKernelManager.cull_idle_timeout={CULL_AFTER}",
        "--MappingKernelManager.cull_interval=2",
    ]
    if os.getuid() == 0:
        command.append("--allow-root")
    with log.open("w") as out:
        server = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=home)
    running = Lab(f"http://127.0.0.1:{port}", token, notebooks, log)
    try:
        deadline = time.time() + 60
        while True:
            try:
                running.api("/api/status")
                break
            except OSError:
                assert server.poll() is None, f"JupyterLab exited; see {log}"
                assert time.time() < deadline, f"JupyterLab did not start in 60 s; see {log}"
                time.sleep(0.25)
        yield running
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser, lab: Lab, request: pytest.FixtureRequest) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1500, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    expect.set_options(timeout=30_000)
    yield page
    page.screenshot(path=ARTIFACTS / f"{request.node.name}-end.png")
    context.close()
