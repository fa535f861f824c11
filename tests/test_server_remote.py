"""The server's view of an object store: a notebook opened on machine B shows what machine A checkpointed."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from objectstore import S3, machine, notebook
from traitlets.config import Config

pytest_plugins = ("pytest_jupyter.jupyter_server", "conftest_server")


@pytest.fixture
def jp_server_config(s3: S3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Config:
    """The server runs on machine B: a local directory of its own, the bucket's URL from the environment."""
    monkeypatch.setenv("JUPYTER_CKPT_DIR", str(tmp_path / "machine-b"))
    return Config({"ServerApp": {"jpserver_extensions": {"jupyter_ckpt": True}}, "CkptServerApp": {"remote_poll": 0.2}})


async def test_the_timeline_of_another_machine_is_listed(api: Any, ckpt_app: Any, s3: S3, jupyter_dirs: Path) -> None:
    key = ckpt_app.service.session_keys("analysis.ipynb")[1]
    a, up = machine(jupyter_dirs / "machine-a", s3)
    nb = notebook(a, session=key)
    nb.save(tag="loaded")
    nb.module.extra = 42
    nb.save()
    up.push()

    deadline = time.time() + 30
    reply: dict[str, Any] = {"checkpoints": []}
    while len(reply["checkpoints"]) < 2 and time.time() < deadline:
        await asyncio.sleep(0.2)
        sessions = await api("GET", "api", "ckpt", "sessions")
        if any(s["key"] == key for s in sessions["sessions"]):
            reply = await api("GET", "api", "ckpt", "checkpoints", params={"session": "analysis.ipynb"})
    assert [r["tag"] for r in reply["checkpoints"]] == ["loaded", None]
    assert reply["checkpoints"][1]["changed"] == ["extra"]
    assert reply["remote"] == {"url": s3.url, "behind": 0, "behind_bytes": 0, "error": None}
    details = await api("GET", "api", "ckpt", "checkpoints", str(reply["checkpoints"][1]["id"]))
    assert details["variables"]["extra"]["repr"] == "42"  # browsing needs the manifest, not the blobs
