"""One fixed-dialogue job run by the local executor and on a real two-node Ray cluster, compared.

    python -m tests.functional.cluster_job OUT_DIR [--dims N] [--latency S] [--submit]

What a user on a cluster does, from a folder of their own (``OUT_DIR/driver``, the driver's working
directory): relative paths everywhere (``--sessions``, ``--dialogues``, a ``replay:`` role), their own
memory system in ``mysys.py`` beside them (``--systems …,mysys:MyMem``), and a key in a variable
named with ``api_key_env`` that the loopback endpoint checks (it refuses any other). The nodes
(``tests/ray_cluster.py``) run in folders of their own, with no key, no ``MEMPROBE_*`` variable of the
driver's and MemProbe importable, nothing else. Writes ``OUT_DIR/result.json``: what
``tests/functional/test_ray_cluster.py`` checks (and ``bench`` quotes). ``--submit`` also runs the job
through ``ray job submit --working-dir .`` to the head's job server (it needs ``ray[default]``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from memprobe_engine.events.reader import open_recording  # noqa: E402
from tests.loopback_endpoint import raw_stats, running_endpoint  # noqa: E402
from tests.ray_cluster import RAY, two_nodes  # noqa: E402

KEY = "sk-loopback-cluster-3f9a1c77e2"
KEY_ENV = "LOOPBACK_API_KEY"
USERS = "user_001,user_002"
ALL_DIMS = ["geographic_knowledge", "directness_preference", "writing_skill"]
SYSTEMS = "nomem,longctx_full,mysys:MyMem"


def plugin_source() -> str:
    """The user's own memory system: the example plug-in, as a module only the driver's folder holds."""
    return (ROOT / "examples" / "keyword_memory.py").read_text().replace("class KeywordMemory", "class MyMem")


def write_inputs(driver: Path, url: str) -> None:
    driver.mkdir(parents=True, exist_ok=True)
    (driver / "sessions").symlink_to(ROOT / "sessions")
    (driver / "mysys.py").write_text(plugin_source())
    live = f'[models.default]\nspec = "openai:scripted@{url}"\napi_key_env = "{KEY_ENV}"\n'
    (driver / "first.toml").write_text(live)
    # The recovery judge answers from the first run's recording, named relative to the driver's folder.
    (driver / "job.toml").write_text(f'[models]\nrecovery_judge = "replay:first"\n\n{live}')


def run_args(record: str, config: str, dims: list[str]) -> list[str]:
    return ["run", "--record", record, "--config", config, "--sessions", "sessions/release-a", "--dialogues",
            "sessions/release-a/dialogues", "--users", USERS, "--dims", ",".join(dims), "--systems", SYSTEMS,
            "--no-cache", "--concurrency", "8"]


def memprobe(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> float:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "memprobe_tui.main", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"memprobe {' '.join(args[:3])} exited {done.returncode}: {done.stderr[-3000:]}")
    return time.monotonic() - started


def report_tables(record: Path, out: Path, cwd: Path, env: dict[str, str]) -> dict[str, str]:
    """The report's CSV tables, and its printed calls table (calls and tokens per role)."""
    memprobe(["report", str(record), "--csv", str(out)], cwd, env)
    tables = {path.name: path.read_text().replace(str(record), "<recording>") for path in sorted(out.glob("*.csv"))}
    text = subprocess.run([sys.executable, "-m", "memprobe_tui.main", "report", str(record)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300, check=True).stdout
    start, end = text.index("tokens and cost per role"), text.index("actual tokens in all")
    tables["calls (printed)"] = text[start:text.index("\n", end)]
    return tables


def recorded(record: Path) -> dict[str, Any]:
    with open_recording(record) as reader:
        calls = list(reader.iter_events(kinds=["llm_call"]))
        scores = sorted(json.dumps([e.user_id, e.system, e.dimension, e.mode, e.score])  # type: ignore[union-attr]
                        for e in reader.iter_events(kinds=["judge_score"]))
        stores = Counter(json.dumps([e.user_id, e.system, e.op, e.patch], sort_keys=True)  # type: ignore[union-attr]
                         for e in reader.iter_events(kinds=["memory_op"]))
    return {"calls": len(calls), "sent": sum(1 for c in calls if not c.cache_hit and c.error is None),  # type: ignore[union-attr]
            "hashes": len({c.request_hash for c in calls}), "scores": scores, "stores": sorted(stores.items())}  # type: ignore[union-attr]


def files_holding(folders: list[Path], secret: bytes) -> list[str]:
    found = []
    for folder in folders:
        for path in folder.rglob("*"):
            try:
                if path.is_file() and not path.is_symlink() and secret in path.read_bytes():
                    found.append(str(path))
            except OSError:
                continue
    return found


def sent_twice(before: dict[str, int], after: dict[str, int]) -> int:
    return sum(max(0, count - before.get(body, 0) - 1) for body, count in after.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--dims", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--submit", action="store_true")
    args = parser.parse_args()
    out: Path = args.out.resolve()
    driver = out / "driver"
    dims = ALL_DIMS[:args.dims]
    result: dict[str, Any] = {}
    # The nodes' folders sit high in /tmp: a Ray node's socket paths must stay under 108 bytes.
    cluster = Path(tempfile.mkdtemp(prefix="mp-ray-"))
    env = {key: value for key, value in os.environ.items() if not key.startswith(("MEMPROBE_", "RAY_ADDRESS"))}
    env.update({"PYTHONPATH": str(ROOT), KEY_ENV: KEY, "MEMPROBE_CACHE_DIR": str(driver / "cache"),
                "RAY_AUTH_MODE": "disabled"})
    os.environ["LOOPBACK_REQUIRE_KEY"] = KEY  # the endpoint's, which refuses any other key
    try:
        run_all(args, out, driver, cluster, dims, env, result)
    finally:
        shutil.rmtree(cluster, ignore_errors=True)
    (out / "result.json").write_text(json.dumps(result, indent=1))


def run_all(args: argparse.Namespace, out: Path, driver: Path, cluster: Path, dims: list[str], env: dict[str, str],
            result: dict[str, Any]) -> None:
    with running_endpoint(args.latency) as (url, _):
        write_inputs(driver, url)
        memprobe(run_args("first", "first.toml", dims), driver, env)
        stats = [raw_stats(url)]
        result["local_s"] = memprobe(run_args("local", "job.toml", dims), driver, env)
        stats.append(raw_stats(url))
        # A submitted job's driver runs on the head in the head's environment: the key is exported there.
        head_env = {KEY_ENV: KEY} if args.submit else None
        with two_nodes(cluster, dashboard=args.submit, head_env=head_env) as (address, job_server):
            ray = [*run_args("ray", "job.toml", dims), "--executor", "ray", "--ray-address", address]
            result["ray_s"] = memprobe(ray, driver, env)
            stats.append(raw_stats(url))
            if args.submit and job_server is not None:
                submitted = run_args(str(driver / "submitted"), "job.toml", dims)
                submit = [RAY, "job", "submit", "--address", job_server, "--working-dir", ".", "--",
                          sys.executable, "-m", "memprobe_tui.main", *submitted, "--executor", "ray",
                          "--ray-address", "auto"]
                started = time.monotonic()
                done = subprocess.run(submit, cwd=driver, env=env, capture_output=True, text=True, timeout=600)
                result["submit"] = {"command": " ".join(submit[1:]), "rc": done.returncode,
                                    "recording": (driver / "submitted" / "events.jsonl").exists(),
                                    "seconds": round(time.monotonic() - started, 1),
                                    "output": (done.stdout + done.stderr)[-3000:]}
                stats.append(raw_stats(url))
        secret_files = files_holding([cluster, driver / "first", driver / "local", driver / "ray"],
                                     KEY.encode())
    for name in ("local", "ray"):
        result[name] = recorded(driver / name)
        result[name]["tables"] = report_tables(driver / name, out / f"{name}-csv", driver, env)
    result["endpoint"] = {
        "refused": stats[-1]["refused"],
        "local_sent": stats[1]["answered"] - stats[0]["answered"],
        "ray_sent": stats[2]["answered"] - stats[1]["answered"],
        "local_sent_twice": sent_twice(stats[0]["bodies"], stats[1]["bodies"]),
        "ray_sent_twice": sent_twice(stats[1]["bodies"], stats[2]["bodies"]),
    }
    result["secret_files"] = secret_files
    result["nodes_with_units"] = [node for node in ("head", "node2") if any(
        b"run_unit_task" in log.read_bytes() for log in (cluster / node / "ray").glob("session_2*/logs/worker-*"))]


if __name__ == "__main__":
    main()
