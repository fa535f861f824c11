"""Fixtures: a private store per test, and real IPython kernels that use it."""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import KernelManager
from objectstore import S3

from jupyter_ckpt.retention import Limits
from jupyter_ckpt.store import Store, load_secret

# What the tests' stores may hold at once above the floor: the largest tests write about 400 MiB, and a passing
# test's directory is removed at its end (tmp_path_retention_policy).
ROOM_FOR_THE_TESTS = 1 << 30


def pytest_sessionstart(session: pytest.Session) -> None:
    """Stop before the first test, saying why, where the disk under the tests' stores is near the free space a
    store always leaves (``retention.Limits``): there the stores would refuse the tests' larger checkpoints, and
    tests far from the disk's concerns would fail on what they checkpointed."""
    disk = shutil.disk_usage(tempfile.gettempdir())
    floor = Limits().floor(disk.total)
    if disk.free < floor + ROOM_FOR_THE_TESTS:
        pytest.exit(
            f"{disk.free / 2**30:.1f} GiB free under {tempfile.gettempdir()}: a store always leaves "
            f"{floor / 2**30:.1f} GiB free, and the tests need {ROOM_FOR_THE_TESTS / 2**30:.1f} GiB above that",
            returncode=1,
        )


@pytest.fixture
def jupyter_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """JUPYTER_DATA_DIR (where the secret lives) and the store, both private to the test."""
    data = tmp_path / "data"
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(data))
    monkeypatch.setenv("JUPYTER_CKPT_DIR", str(tmp_path / "store"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    return tmp_path


@pytest.fixture
def store(jupyter_dirs: Path) -> Store:
    return Store(jupyter_dirs / "store", load_secret(jupyter_dirs / "data" / "ckpt" / "secret"))


@dataclass
class Result:
    stdout: str = ""
    stderr: str = ""
    error: str | None = None
    traceback: list[str] = field(default_factory=list)
    data: list[dict[str, Any]] = field(default_factory=list)


@functools.cache
def _sockets() -> Path:
    """The folder of this test run's kernel sockets, wherever the kernels start: the run's own, so that two runs at
    once (two checkouts, a helper's and yours) never pick the same socket file and read each other's messages."""
    folder = Path(tempfile.mkdtemp(prefix="jupyter-ckpt-kernels-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


class Kernel:
    """A real ipykernel in its own process, on a notebook path (JPY_SESSION_NAME), or with none (``session`` None)
    as VS Code, the terminal and nbclient start kernels."""

    def __init__(self, session: str | None, extra_env: dict[str, str] | None = None, cwd: str | None = None) -> None:
        env = {k: v for k, v in os.environ.items() if k != "JPY_SESSION_NAME"}
        env.update(extra_env or {})
        if session is not None:
            env["JPY_SESSION_NAME"] = session
        self.km = KernelManager(kernel_name="python3", transport="ipc", ip=str(_sockets() / "kernel"))
        self.km.start_kernel(env=env, cwd=cwd)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    @property
    def pid(self) -> int:
        return int(self.km.provisioner.process.pid)  # type: ignore[union-attr]

    def run(self, code: str, timeout: float = 120) -> Result:
        result = Result()

        def hook(msg: dict[str, Any]) -> None:
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                if content["name"] == "stdout":
                    result.stdout += content["text"]
                else:
                    result.stderr += content["text"]
            elif kind == "error":
                result.error = f"{content['ename']}: {content['evalue']}"
                result.traceback = content["traceback"]
            elif kind in ("execute_result", "display_data", "update_display_data"):
                result.data.append(content["data"])

        self.kc.execute_interactive(code, output_hook=hook, timeout=timeout)
        return result

    def ok(self, code: str) -> str:
        """Run code that must succeed; returns its stdout."""
        r = self.run(code)
        assert r.error is None, f"{code!r} failed: {r.error}\n{r.stderr}"
        return r.stdout

    def value(self, expr: str) -> Any:
        """The value of an expression whose repr is a Python literal."""
        import ast

        return ast.literal_eval(self.ok(f"print(repr({expr}))").strip())

    def kill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        deadline = time.time() + 10
        while self.km.is_alive() and time.time() < deadline:
            time.sleep(0.05)
        self.close()

    def close(self) -> None:
        self.kc.stop_channels()
        if self.km.has_kernel:
            self.km.shutdown_kernel(now=True)
        self.km.cleanup_resources()


@pytest.fixture
def kernels(jupyter_dirs: Path) -> Iterator[Any]:
    """Start kernels with ``kernels(session)`` (None: no notebook path), in the directory ``cwd`` if given; all are
    shut down after the test."""
    started: list[Kernel] = []

    def start(session: str | None = "analysis.ipynb", cwd: str | None = None, **env: str) -> Kernel:
        k = Kernel(session, env, cwd)
        started.append(k)
        return k

    yield start
    for k in started:
        with contextlib.suppress(Exception):
            k.close()


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``jupyter ckpt`` as a user would, in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "jupyter_ckpt.cli", *args],
        capture_output=True,
        text=True,
        env=env or dict(os.environ),
        cwd=cwd,
        timeout=120,
    )


def descendants(pid: int) -> list[int]:
    """Child processes (a background writer, say) of ``pid``, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def huge_bytes(a: Any) -> int:
    """Bytes of a numpy array's mappings that huge pages hold (``/proc/self/smaps``)."""
    lo, hi = a.ctypes.data, a.ctypes.data + a.nbytes
    total, inside = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split(maxsplit=1)[0]
            if "-" in head and not head.endswith(":"):
                start, end = (int(x, 16) for x in head.split("-"))
                inside = start < hi and end > lo
            elif inside and head == "AnonHugePages:":
                total += int(line.split()[1]) << 10
    return total


@pytest.fixture(scope="module")
def s3_server() -> Iterator[S3]:
    s3 = S3()
    yield s3
    s3.stop()


@pytest.fixture
def s3(s3_server: S3, jupyter_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3]:
    """A fresh bucket; credentials and endpoint in the standard variables, the URL and a shared secret file too."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": s3_server.endpoint,
    }.items():
        monkeypatch.setenv(name, value)
    bucket = f"ckpt-{uuid.uuid4().hex[:12]}"
    s3_server.client().create_bucket(Bucket=bucket)
    s3_server.bucket, s3_server.url = bucket, f"s3://{bucket}/users/alice"
    monkeypatch.setenv("JUPYTER_CKPT_URL", s3_server.url)
    monkeypatch.setenv("JUPYTER_CKPT_SECRET_FILE", str(jupyter_dirs / "shared-secret"))
    yield s3_server
    if not s3_server.running:  # a test that stopped it and failed before starting it again
        s3_server.start()
