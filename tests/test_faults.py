"""Faults: random kills (a short run of ``faults.py``; ``make faults`` runs the full one), a full disk,
two kernels on one notebook, and a server killed while a kernel writes."""

from __future__ import annotations

import json
import os
import random
import secrets
import socket
import subprocess
import sys
import time
import types
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import cli
from faults import HERE, KILLS, SETUP, mutating_cell, restores_outside_a_kernel, run, sealed

from jupyter_ckpt.restore import restore_namespace
from jupyter_ckpt.store import Store, load_secret


def test_random_kills_never_tear_lose_or_break_a_checkpoint(store: Store) -> None:
    tally = run(store, cycles=12, seed=20261124)
    assert tally.problems == []
    assert tally.bad() == 0
    assert all(tally.kills[mode] == 4 for mode in KILLS)
    assert tally.committed == 12 and 0 < tally.back_to_back < 12


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 48 MiB filesystem of its own (tmpfs), so that it can be filled without filling the machine's."""
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mount)]).returncode:
        pytest.skip("mounting a small filesystem needs root")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=True)


def test_a_full_disk_is_said_once_loses_nothing_and_checkpoints_resume(
    kernels: Any, small_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUPYTER_CKPT_DIR", str(small_disk / "store"))
    profile = Path(os.environ["IPYTHONDIR"]) / "profile_default"
    profile.mkdir(parents=True)
    # The whole filesystem as the store's budget: what fills it here is another program's file.
    (profile / "ipython_config.py").write_text("c.Checkpoints.max_store_share = 1.0\n")
    k = kernels("full.ipynb")
    k.ok("%load_ext jupyter_ckpt")
    k.ok("import numpy as np\nsmall = list(range(100))")
    k.ok("%checkpoint wait")
    filler = small_disk / "filler"
    filler.write_bytes(os.urandom(30 << 20))  # about 18 MiB left
    said = []
    for i in range(5):  # 32 MB of random doubles cannot fit: every cell still runs
        r = k.run(f"big = np.random.default_rng({i}).random(4_000_000)\nsmall.append({i})")
        assert r.error is None
        said.append(r.stderr)
        time.sleep(1.5)  # the writer fails, and the next cell boundary says so
    said.append(k.run("%checkpoint wait").stderr)
    assert sum("the store can take only" in text and "free on its disk" in text for text in said) == 1, said
    assert k.value("small[-5:]") == [0, 1, 2, 3, 4]
    assert cli("verify").returncode == 0
    store = Store(small_disk / "store", load_secret(Path(os.environ["JUPYTER_DATA_DIR"]) / "ckpt" / "secret"))
    first = store.checkpoints("full.ipynb")[0].id
    module = types.ModuleType("__main__")
    restore_namespace(store.blobs, module, first, store.manifest(first))
    assert module.__dict__["small"] == list(range(100))  # the checkpoint before the disk filled is whole

    filler.unlink()  # space comes back
    again = k.run("resumed = True").stderr + k.run("%checkpoint wait").stderr
    assert "written again" in again
    newest = store.checkpoints("full.ipynb")[-1]
    assert {"big", "resumed"} <= set(store.manifest(newest.id)["variables"])
    assert cli("verify").returncode == 0


def test_a_store_gone_read_only_is_said_once_and_checkpoints_resume(
    kernels: Any, small_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's filesystem read-only under the kernel (a bind mount of it made read-only on top: files the
    kernel opened before stay writable, a new file is refused, as on a disk remounted read-only)."""
    monkeypatch.setenv("JUPYTER_CKPT_DIR", str(small_disk / "store"))
    k = kernels("readonly.ipynb")
    k.ok("%load_ext jupyter_ckpt")
    k.ok("kept = [1]")
    k.ok("%checkpoint wait")
    subprocess.run(["mount", "--bind", str(small_disk), str(small_disk)], check=True)
    subprocess.run(["mount", "-o", "remount,ro,bind", str(small_disk)], check=True)
    try:
        said: list[str] = []
        for i in range(4):
            r = k.run(f"kept.append({i})")
            assert r.error is None and r.stdout == ""
            said.append(r.stderr)
            time.sleep(0.6)  # past the idle grace: the idle thread tries, and fails
        saved = k.run("%checkpoint save")
        assert saved.error is None and saved.stderr.startswith("UsageError: checkpoint failed: cannot write to the")
        assert sum(text.count("cannot write to the checkpoint store") for text in said) == 1, said
        assert "the newest state is not on the timeline: checkpoint failed" in k.run("%checkpoint list").stderr
    finally:
        subprocess.run(["umount", str(small_disk)], check=True)  # the read-only bind mount: writable again
    again = k.run("resumed = True").stderr + k.run("%checkpoint wait").stderr
    assert "written again" in again
    assert k.value("kept") == [1, 0, 1, 2, 3]
    assert cli("verify").returncode == 0


def test_the_command_line_reads_a_store_on_a_read_only_disk(kernels: Any, small_disk: Path) -> None:
    """An archived store, a snapshot, a disk mounted read-only: SQLite cannot make the files its write-ahead log
    needs there, and the command line said the catalog was unreadable."""
    root = small_disk / "store"
    k = kernels("archived.ipynb", JUPYTER_CKPT_DIR=str(root))
    k.ok("%load_ext jupyter_ckpt\nkept = [1]\n%checkpoint save -t archived\n%checkpoint wait")
    k.close()
    env = {**os.environ, "JUPYTER_CKPT_DIR": str(root)}
    assert cli("list", env=env).returncode == 0  # the last to close the catalog: its log is folded in and removed
    before = sorted(p.name for p in root.iterdir())
    assert "catalog.sqlite-shm" not in before, before
    subprocess.run(["mount", "--bind", str(small_disk), str(small_disk)], check=True)
    subprocess.run(["mount", "-o", "remount,ro,bind", str(small_disk)], check=True)
    try:
        listed = cli("list", "archived.ipynb", env=env)
        assert listed.returncode == 0 and "archived" in listed.stdout, listed
        assert cli("verify", env=env).returncode == 0
        assert "kept" in cli("show", "archived", "--session", "archived.ipynb", env=env).stdout
    finally:
        subprocess.run(["umount", str(small_disk)], check=True)
    assert sorted(p.name for p in root.iterdir()) == before


def test_two_kernels_on_one_notebook_keep_every_checkpoint_whole(kernels: Any, store: Store) -> None:
    pick = random.Random(3)
    pair = [kernels("both.ipynb", PYTHONPATH=str(HERE)) for _ in range(2)]
    for k in pair:
        k.ok("%load_ext jupyter_ckpt\n%checkpoint auto on")
        k.ok(SETUP)
    for _ in range(6):  # interleaved, each kernel's requests back to back
        for k in pair:
            k.kc.execute(mutating_cell(pick))
    for k in pair:
        k.ok("%checkpoint wait")
    assert cli("verify").returncode == 0
    records = store.checkpoints("both.ipynb")
    assert len(records) >= 8
    for record in records:
        assert restores_outside_a_kernel(store, record.id), f"checkpoint {record.id} is torn"
    for k in pair:
        k.ok("%checkpoint restore last-good")
        assert sealed(k)


def api(port: int, token: str, path: str) -> Any:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def serve(tmp_path: Path) -> tuple[subprocess.Popen[bytes], int, str]:
    """A jupyter_server with jupyter_ckpt, in a process of its own, once it answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    token = secrets.token_hex(16)
    command = [sys.executable, "-m", "jupyter_server", "--no-browser", "--ip=127.0.0.1", f"--port={port}"]
    command += [f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={tmp_path}"]
    command += ["--allow-root"] if os.getuid() == 0 else []
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
    deadline = time.time() + 60
    while True:
        try:
            api(port, token, "/api/ckpt/sessions")
            return server, port, token
        except OSError:
            assert server.poll() is None and time.time() < deadline, "the server did not start"
            time.sleep(0.2)


def test_a_server_killed_while_a_kernel_writes_leaves_the_store_whole(
    kernels: Any, store: Store, tmp_path: Path
) -> None:
    pick = random.Random(4)
    k = kernels("served.ipynb", PYTHONPATH=str(HERE))
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto on")  # a write at every cell, back to back too
    k.ok(SETUP)
    for _ in range(2):
        server, port, token = serve(tmp_path)
        for _ in range(4):
            k.kc.execute(mutating_cell(pick))
        deadline = time.time() + pick.uniform(0.2, 1.5)
        while time.time() < deadline:  # the server reads the catalog while the kernel writes it
            api(port, token, "/api/ckpt/checkpoints?session=served.ipynb")
        server.kill()
        server.wait()
    k.ok("%checkpoint wait")
    server, port, token = serve(tmp_path)
    try:
        listed = api(port, token, "/api/ckpt/checkpoints?session=served.ipynb")["checkpoints"]
    finally:
        server.kill()
        server.wait()
    assert [c["id"] for c in listed] == [r.id for r in store.checkpoints("served.ipynb")]
    assert len(listed) >= 5
    assert cli("verify").returncode == 0
    for record in listed:
        assert restores_outside_a_kernel(store, record["id"])


def test_a_store_whose_disk_goes_away_mid_write_is_said_in_one_clear_line(
    kernels: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's filesystem is unmounted while a writer writes (a USB disk pulled, a network mount lost): the
    kernel goes on in a new store, saying so once, as when the store is removed. It first showed a raw
    "FileNotFoundError: [Errno 2] No such file or directory: '.../blobs'" line."""
    mount = tmp_path / "mount"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(mount)]).returncode:
        pytest.skip("mounting a filesystem needs root")
    mounted = True
    try:
        monkeypatch.setenv("JUPYTER_CKPT_DIR", str(mount / "store"))
        k = kernels("unplugged.ipynb")
        k.ok("%load_ext jupyter_ckpt\nimport numpy as np\nx = 1")
        k.ok("%checkpoint wait")
        tmp = mount / "store" / "blobs" / "tmp"
        k.kc.execute("big = np.random.default_rng(0).random(16_000_000)\nx = 2")
        deadline = time.monotonic() + 30
        while not any(len(p.name.split(".")[0]) == 32 for p in tmp.iterdir()):
            assert time.monotonic() < deadline, "the checkpoint of `big` never began writing a blob"
            time.sleep(0.001)
        subprocess.run(["umount", "-l", str(mount)], check=True)
        mounted = False
        said = [k.run(f"y = {i}") for i in range(4)]
        said.append(k.run("%checkpoint wait"))
        text = "".join(r.stdout + r.stderr for r in said)
        assert all(r.error is None for r in said), [r.error for r in said]
        assert text.count("\n") == 1 and "was removed, and its checkpoints with it;" in text, text
        assert k.value("(x, y)") == (2, 3)
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(mount)], check=True)
