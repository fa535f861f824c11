"""The remote tier against an S3-protocol server (moto's server mode, in its own process, on loopback).

Measured side by side in one run, as ratios to what the same client does with the same bytes:

* upload: ``Replica.push`` of one checkpoint against writing the same objects as one pickle-5 file
  (buffers in band) with the same client (s3fs);
* restore on a fresh machine (empty local directory): pull, fetch and restore as the kernel starts (and,
  apart, a restore asked for once the kernel has started, its timeline pulled at load) against reading that
  pickle file back with the same client (and unpickling it), and against downloading the checkpoint's
  own objects from 8 threads with the requests the fetch makes (the floor of any restore that reads them),
  by the client that uploaded them and by a new one (as a new machine's restore makes its own); against the
  floor of a restore as the kernel starts, the pull by a new client and then that download; and the new
  client's own cost (made, and its first request answered);
* a restore as the kernel starts on the machine of a kernel that crashed before its newest checkpoint
  (``--mib`` / 4 of new arrays) was uploaded: that state comes back while the backlog uploads;
* the pull of a long session's timeline (``--records`` checkpoints) by a new machine, per record;
* bytes uploaded over a session of cells that each change a little, against the pickle file per cell
  that a naive upload would write;
* the client: s3fs (fsspec) with botocore's default checksums, s3fs as the tier makes it (checksums only
  where S3 requires them) and obstore (Rust), putting and getting the same 4 MiB objects from 8 threads.

moto keeps objects in memory and answers from Python, so absolute rates are moto's; the ratios are
what the choices cost. Memory is made to cost the same to touch in every run as ``run.py`` does (free page
reporting off, free memory touched first; ``--memory-as-found`` leaves it alone). Usage:
``.venv/bin/python benchmarks/remote.py [--mib 256]``.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from run import host_backed_memory  # this script's directory is on sys.path

from jupyter_ckpt.checkpointer import Checkpointer
from jupyter_ckpt.remote import S3_CHECKSUMS, Remote, Replica
from jupyter_ckpt.store import Store, load_secret

RESULTS = Path(__file__).parent / "results"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_moto() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(300):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.1)
    return server, f"http://127.0.0.1:{port}"


def namespace(mib: int) -> types.ModuleType:
    """Arrays (most of the bytes), a DataFrame with text and a dict of small objects."""
    rng = np.random.default_rng(0)
    module = types.ModuleType("__main__")
    n = mib * (1 << 20) // 8
    module.arrays = [rng.random(n // 4) for _ in range(4)]
    module.frame = pd.DataFrame({"x": rng.random(200_000), "name": [f"row {i}" for i in range(200_000)]})
    module.small = {f"k{i}": [i, str(i), (i, i * 2.0)] for i in range(50_000)}
    return module


def cpu_seconds(server: subprocess.Popen[bytes]) -> tuple[float, float]:
    """CPU seconds used so far by this process (the client) and by the object store's server."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    fields = Path(f"/proc/{server.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return usage.ru_utime + usage.ru_stime, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(fn: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def bench_tier(url: str, server: subprocess.Popen[bytes], mib: int, cells: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ckpt-remote-") as work:  # a full copy of the namespace per restore
        return measure_tier(url, server, mib, cells, rounds, Path(work))


def measure_tier(
    url: str, server: subprocess.Popen[bytes], mib: int, cells: int, rounds: int, work: Path
) -> dict[str, Any]:
    secret = load_secret(work / "secret")
    module = namespace(mib)
    a = Store(work / "a", secret)
    ckpt = Checkpointer(a, "bench.ipynb", module)
    ckpt.save()
    replica = Replica(a, Remote(url))
    push_s, _ = timed(replica.push)
    fs = replica.remote.fs
    objects = {n: getattr(module, n) for n in ("arrays", "frame", "small")}
    payload = pickle.dumps(objects, protocol=5)
    base = replica.remote.root + "/baseline.pkl"
    pickle_put_s, _ = timed(lambda: fs.pipe_file(base, payload))

    def restore(name: str, started: bool) -> tuple[float, types.ModuleType]:
        """As a kernel on a new machine: pull, fetch, restore, as the kernel starts; or, ``started``, a restore
        asked for once the kernel has started, whose timeline was pulled at ``%load_ext``, in the background."""
        b = Store(work / name, secret)
        restored = types.ModuleType("__main__")
        fresh = Replica(b, Remote(url))
        if started:
            kernel = Checkpointer(b, "bench.ipynb", restored, lazy=False, replica=fresh)
            fresh.pulled.wait()
            seconds, _ = timed(kernel.restore)
        else:
            seconds, _ = timed(lambda: Checkpointer(b, "bench.ipynb", restored, lazy=False, replica=fresh).restore())
        fresh.wait_fetched()  # not timed: the local tier is written after the restore, while the kernel is in use
        fresh.stop()
        return seconds, restored

    keys = [path for path in fs.find(replica.remote.root + "/blobs")]
    restores, floors, fresh_floors, gets, loads, pulls, clients = [], [], [], [], [], [], []
    cpu: dict[str, list[float]] = {"restore": [], "restore, server": [], "download": [], "download, server": []}
    for n in range(rounds):  # alternated: the restore, then its floors, then the pickle file
        before = cpu_seconds(server)
        seconds, restored = restore(f"b{n}", started=False)
        after = cpu_seconds(server)
        restores.append(seconds)
        cpu["restore"].append(after[0] - before[0])
        cpu["restore, server"].append(after[1] - before[1])
        # What any restore must do first: learn the timeline (list the records, read the newest).
        pulls.append(timed(Replica(Store(work / f"c{n}", secret), Remote(url)).pull)[0])
        clients.append(timed(lambda: Remote(url).listing("sessions"))[0])  # a new client, up to its first answer
        with ThreadPoolExecutor(8) as pool:  # the floor: the checkpoint's own objects, downloaded as the fetch does
            floors.append(timed(lambda: list(pool.map(replica.remote.get_bytes, keys)))[0])
            done = cpu_seconds(server)
            # The same by a client made for it, as on a new machine, where the restore makes its own.
            fresh_floors.append(timed(lambda: list(pool.map(Remote(url).get_bytes, keys)))[0])
        cpu["download"].append(done[0] - after[0])
        cpu["download, server"].append(done[1] - after[1])
        get_s, data = timed(lambda: fs.cat_file(base))
        gets.append(get_s)
        loads.append(timed(lambda data=data: pickle.loads(data))[0])
        assert np.array_equal(restored.arrays[0], module.arrays[0])
    # Apart, after: run inside the rounds, each slowed the next round's restore by 0.15-0.2 s (work its kernel
    # leaves running after the restore; which, not identified).
    started = [restore(f"s{n}", started=True)[0] for n in range(rounds)]
    backlog = [restore_beside_backlog(f"{url}-backlog-{n}", work / f"k{n}", secret, mib // 4, n) for n in range(rounds)]
    restore_s, floor_s = statistics.median(restores), statistics.median(floors)
    pickle_get_s, unpickle_s = statistics.median(gets), statistics.median(loads)
    # The least any restore takes: the pull, the download of the objects, and unpickling the same objects.
    least_s = statistics.median(pulls) + floor_s + unpickle_s

    uploaded = sum(info["size"] for info in replica.remote.listing("").values() if not info["name"].endswith(".pkl"))
    for i in range(cells):  # each cell changes a few rows of one array and one small object
        module.arrays[i % 4][i * 1000 : i * 1000 + 100] += 1
        module.small[f"k{i}"] = [i, "changed"]
        ckpt.save()
        replica.push()
    session = sum(info["size"] for info in replica.remote.listing("").values() if not info["name"].endswith(".pkl"))
    return {
        "bytes": len(payload),
        "push_s": push_s,
        "pickle_put_s": pickle_put_s,
        "push_vs_pickle_put": push_s / pickle_put_s,
        "restore_fresh_s": restore_s,
        "pickle_get_s": pickle_get_s,
        "pickle_get_and_load_s": pickle_get_s + unpickle_s,
        "restore_vs_pickle_get": restore_s / pickle_get_s,
        "download_objects_s": floor_s,
        "restore_vs_download_objects": restore_s / floor_s,
        "restore_rounds_s": restores,
        "restore_started_s": statistics.median(started),
        "restore_started_rounds_s": started,
        "restore_started_vs_download_objects": statistics.median(started) / floor_s,
        "client_s": statistics.median(clients),
        "pull_and_download_s": statistics.median(pulls) + floor_s,
        "restore_vs_pull_and_download": restore_s / (statistics.median(pulls) + floor_s),
        "restore_beside_backlog_s": statistics.median(backlog),
        "restore_beside_backlog_rounds_s": backlog,
        "download_objects_new_client_s": statistics.median(fresh_floors),
        "restore_vs_download_objects_new_client": restore_s / statistics.median(fresh_floors),
        "pull_s": statistics.median(pulls),
        "unpickle_s": unpickle_s,
        "restore_vs_pull_download_unpickle": restore_s / least_s,
        "cpu_s": {k: statistics.median(v) for k, v in cpu.items()},
        "restore_vs_pickle_get_and_load": restore_s / (pickle_get_s + unpickle_s),
        "session_cells": cells,
        "uploaded_first": uploaded,
        "uploaded_session": session,
        "naive_session": len(payload) * (cells + 1),
    }


def restore_beside_backlog(url: str, root: Path, secret: bytes, mib: int, seed: int) -> float:
    """A kernel crashed before its newest checkpoint was uploaded; the kernel started in its place on the same
    machine restores that state as it starts (pull, then restore from the local tier), while the backlog uploads.
    Timed from the kernel's start to its restore's end; the upload is finished untimed."""
    store = Store(root, secret)
    left = types.ModuleType("__main__")
    rng = np.random.default_rng(100 + seed)
    left.arrays = [rng.random(mib * (1 << 20) // 32) for _ in range(4)]
    Checkpointer(store, "backlog.ipynb", left).save()  # in a prefix of its own: the only checkpoint of the session
    restored = types.ModuleType("__main__")
    fresh = Replica(store, Remote(url))
    seconds, _ = timed(lambda: Checkpointer(store, "backlog.ipynb", restored, lazy=False, replica=fresh).restore())
    assert np.array_equal(restored.arrays[3], left.arrays[3])
    fresh.flush()
    fresh.stop()
    return seconds


def bench_timeline(url: str, server: subprocess.Popen[bytes], records: int) -> dict[str, Any]:
    """The pull of a long session's timeline on a new machine: one record per checkpoint, each read once."""
    with tempfile.TemporaryDirectory(prefix="ckpt-remote-") as work:
        secret = load_secret(Path(work) / "secret")
        a = Store(Path(work) / "a", secret)
        module = types.ModuleType("__main__")
        ckpt = Checkpointer(a, "long.ipynb", module)
        for i in range(records):
            module.x = i
            ckpt.save()
        Replica(a, Remote(url)).push()
        fresh = Replica(Store(Path(work) / "b", secret), Remote(url))
        before = cpu_seconds(server)
        seconds, pulled = timed(lambda: fresh.pull("long.ipynb"))
        after = cpu_seconds(server)
    assert len(pulled) == records
    return {
        "records": records,
        "pull_s": seconds,
        "per_record_ms": 1000 * seconds / records,
        "server_cpu_per_record_ms": 1000 * (after[1] - before[1]) / records,
    }


def bench_clients(endpoint: str, bucket: str, count: int) -> dict[str, Any]:
    """s3fs and obstore moving the same 4 MiB objects from 8 threads: MB/s each way, median of 3."""
    import fsspec
    from obstore import get, put
    from obstore.store import S3Store

    blobs = [os.urandom(4 << 20) for _ in range(count)]
    total = sum(len(b) for b in blobs) / 1e6
    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    # As ``remote.Remote`` makes it: no CRC32 of each byte, which the blobs' own signatures make redundant.
    bare = fsspec.filesystem("s3", skip_instance_cache=True, config_kwargs=S3_CHECKSUMS)
    obs = S3Store(
        bucket,
        endpoint=endpoint,
        access_key_id="bench",
        secret_access_key="bench",
        region="us-east-1",
        client_options={"allow_http": True},
    )
    clients = {
        "s3fs": (
            lambda i: fs.pipe_file(f"{bucket}/clients/s3fs/{i}", blobs[i]),
            lambda i: fs.cat_file(f"{bucket}/clients/s3fs/{i}"),
        ),
        "s3fs, checksums when required": (
            lambda i: bare.pipe_file(f"{bucket}/clients/bare/{i}", blobs[i]),
            lambda i: bare.cat_file(f"{bucket}/clients/bare/{i}"),
        ),
        "obstore": (
            lambda i: put(obs, f"clients/obstore/{i}", blobs[i]),
            lambda i: bytes(get(obs, f"clients/obstore/{i}").bytes()),
        ),
    }
    out: dict[str, Any] = {}
    with ThreadPoolExecutor(8) as pool:
        for name, (up, down) in clients.items():
            ups, downs = [], []
            for _ in range(3):
                ups.append(total / timed(lambda up=up: list(pool.map(up, range(count))))[0])
                downs.append(total / timed(lambda down=down: list(pool.map(down, range(count))))[0])
            out[name] = {"put_MBps": statistics.median(ups), "get_MBps": statistics.median(downs)}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=int, default=256, help="size of the array data in the namespace")
    p.add_argument("--cells", type=int, default=10, help="cells of the session whose uploaded bytes are counted")
    p.add_argument("--rounds", type=int, default=3, help="alternated rounds of the restore and its floors (medians)")
    p.add_argument("--objects", type=int, default=32, help="4 MiB objects per client in the client comparison")
    p.add_argument("--records", type=int, default=300, help="checkpoints of the session whose timeline is pulled")
    p.add_argument("--memory-as-found", action="store_true", help="leave free page reporting as it is")
    p.add_argument("--out", type=Path, default=RESULTS / "remote.json", help="where to write the results")
    args = p.parse_args()
    with host_backed_memory(not args.memory_as_found) as memory:
        result = measure(args)
    result["memory"] = memory
    result["package"] = str(Path(sys.modules["jupyter_ckpt"].__file__ or "").parent)  # which code was measured
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


def measure(args: argparse.Namespace) -> dict[str, Any]:
    server, endpoint = start_moto()
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ENDPOINT_URL=endpoint,
    )
    try:
        import boto3

        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bench")
        return {
            "tier": bench_tier("s3://bench/tier", server, args.mib, args.cells, args.rounds),
            "clients": bench_clients(endpoint, "bench", args.objects),
            "timeline": bench_timeline("s3://bench/timeline", server, args.records),
            "mib": args.mib,
        }
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
