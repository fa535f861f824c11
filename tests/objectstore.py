"""A real S3-protocol server for the remote tier's tests (moto's server mode on loopback), and machines using it.

The fixtures ``s3_server`` and ``s3`` (a fresh bucket per test) are in conftest.py.
"""

from __future__ import annotations

import textwrap
import types
from pathlib import Path
from typing import Any

import boto3
from moto.server import ThreadedMotoServer

from jupyter_ckpt.checkpointer import Checkpointer
from jupyter_ckpt.remote import Remote, Replica
from jupyter_ckpt.store import Store, load_secret

NOTEBOOK = """
import numpy as np
data = np.random.default_rng(1).random(300_000)
view = data[:10]
same = {"data": data}
def total(a):
    return float(a.sum())
class Box:
    def __init__(self, v):
        self.v = v
box = Box([1, 2, 3])
"""


class S3:
    """One moto server in this process; stopping and starting it keeps its buckets (they live in moto's memory)."""

    def __init__(self) -> None:
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        self.port = self.server.get_host_and_port()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.running = True
        self.bucket = self.url = ""  # set per test by the s3 fixture

    def stop(self) -> None:
        self.server.stop()
        self.running = False

    def start(self) -> None:
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()
        self.running = True

    def client(self) -> Any:
        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1")


def machine(root: Path, s3: S3) -> tuple[Store, Replica]:
    """A machine's local tier and its replica of the bucket."""
    store = Store(root, load_secret(root.parent / "shared-secret"))
    return store, Replica(store, Remote(s3.url))


def notebook(store: Store, replica: Replica | None = None, session: str = "nb.ipynb") -> Checkpointer:
    module = types.ModuleType("__main__")
    exec(textwrap.dedent(NOTEBOOK), module.__dict__)
    return Checkpointer(store, session, module, replica=replica)


def objects(s3: S3, under: str = "") -> dict[str, bytes]:
    client = s3.client()
    found = client.list_objects_v2(Bucket=s3.bucket, Prefix=under).get("Contents", [])
    return {o["Key"]: client.get_object(Bucket=s3.bucket, Key=o["Key"])["Body"].read() for o in found}
