"""A real two-node Ray cluster on this machine, for tests and benchmarks (never product code).

``ray start --head`` and ``ray start --address`` each run in a folder of their own (working directory
and ``--temp-dir``), with one CPU each, so a worker sees neither the driver's folder as its own nor
the other node's files. The nodes are stopped by process id (the processes whose command line names
the cluster's folder), never by name: other Ray instances on the machine are left alone.

:func:`isolated` re-runs a command in new network and process namespaces where this user may create
them (``unshare``): the cluster's ports then meet no other cluster's, and nothing outlives the command.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RAY = str(Path(sys.executable).with_name("ray"))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def node_env(folder: Path) -> dict[str, str]:
    """A node's environment: MemProbe importable, no key, a cache of its own, no dashboard login."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("MEMPROBE_", "LOOPBACK_", "OPENAI_", "RAY_ADDRESS"))}
    return {**env, "PYTHONPATH": str(ROOT), "MEMPROBE_CACHE_DIR": str(folder / "cache"), "HOME": str(folder),
            "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


def _start(args: Sequence[str], folder: Path, extra_env: dict[str, str] | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([RAY, "start", *args, "--num-cpus", "1", "--temp-dir", str(folder / "ray"),
                           "--disable-usage-stats"], cwd=folder, env={**node_env(folder), **(extra_env or {})},
                          capture_output=True, text=True, timeout=180)
    if done.returncode != 0:
        raise RuntimeError(f"ray start {' '.join(args)} failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")


def cluster_pids(base: Path) -> list[int]:
    """Processes whose command line names ``base`` (the cluster's nodes and their workers)."""
    mark = str(base).encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if mark in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def stop(base: Path) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in cluster_pids(base):
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        deadline = time.time() + 10
        while cluster_pids(base) and time.time() < deadline:
            time.sleep(0.2)


@contextlib.contextmanager
def two_nodes(base: Path, dashboard: bool = False,
              head_env: dict[str, str] | None = None) -> Iterator[tuple[str, str | None]]:
    """A head (``base/head``) and a second node (``base/node2``), one CPU each; yields (GCS address,
    the job server's URL when ``dashboard``). ``head_env``: variables the head starts with (a submitted
    job's driver runs there, in the head's environment)."""
    port = free_port()
    dash_port = free_port() if dashboard else None
    head = ["--head", "--port", str(port), "--node-ip-address", "127.0.0.1"]
    head += ["--include-dashboard=true", "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dash_port)] \
        if dashboard else ["--include-dashboard=false"]
    try:
        _start(head, base / "head", head_env)
        _start(["--address", f"127.0.0.1:{port}", "--node-ip-address", "127.0.0.1"], base / "node2")
        yield f"127.0.0.1:{port}", (f"http://127.0.0.1:{dash_port}" if dashboard else None)
    finally:
        stop(base)
        shutil.rmtree(base / "head" / "ray" / "session_latest" / "sockets", ignore_errors=True)


def can_isolate() -> bool:
    """Whether ``unshare`` gives this user new network and process namespaces here."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    flags = ["-n", "-p", "-f", "--mount-proc"] if os.geteuid() == 0 else ["-r", "-n", "-p", "-f", "--mount-proc"]
    return subprocess.run(["unshare", *flags, "true"], capture_output=True).returncode == 0


def isolated(command: Sequence[str]) -> list[str]:
    """``command`` in new network and process namespaces (loopback up), where :func:`can_isolate`."""
    flags = ["-n", "-p", "-f", "--mount-proc"] if os.geteuid() == 0 else ["-r", "-n", "-p", "-f", "--mount-proc"]
    script = 'ip link set lo up && exec "$@"'
    return ["unshare", *flags, "sh", "-c", script, "sh", *command]
