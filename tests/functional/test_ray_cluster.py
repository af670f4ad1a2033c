"""A real two-node Ray cluster (``ray start --head`` and ``ray start --address``, each in its own folder)
runs a fixed-dialogue job the way a user on a cluster would: from a folder of their own, with relative
``--sessions`` / ``--dialogues`` / ``replay:`` paths, their own memory system beside the driver
(``mysys:MyMem``) and a key in a variable named with ``api_key_env`` that the loopback endpoint
checks. The nodes have neither the key nor the driver's folder. It must give the local executor's
scores, stores and report tables (the calls table included), send no request twice (the endpoint
counts every body it answers), and leave the key in no file of the cluster or the recordings.

Where this user may create namespaces, the cluster runs in new network and process namespaces
(``tests/ray_cluster.py``), so its ports meet no other Ray instance's on the machine. With Ray's
job server installed (``memprobe[ray]`` brings ``ray[default]``) the job also goes through
``ray job submit --working-dir .`` and its recording is found where docs/scale.md says.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.ray_cluster import ROOT, can_isolate, isolated

ray = pytest.importorskip("ray")


def job_server_installed() -> bool:
    from ray._private.utils import get_dashboard_dependency_error

    return get_dashboard_dependency_error() is None


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("cluster")
    command = [sys.executable, "-m", "tests.functional.cluster_job", str(out),
               *(["--submit"] if job_server_installed() else [])]
    done = subprocess.run(isolated(command) if can_isolate() else command, cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    outcome: dict[str, Any] = json.loads((out / "result.json").read_text())
    return outcome


def test_a_cluster_run_records_what_the_local_executor_records(result: dict[str, Any]) -> None:
    local, distributed = result["local"], result["ray"]
    assert local["scores"] and distributed["scores"] == local["scores"]
    assert local["stores"] and distributed["stores"] == local["stores"]
    assert distributed["tables"] == local["tables"] and "attribution_judge" in local["tables"]["calls (printed)"]
    assert (distributed["calls"], distributed["sent"]) == (local["calls"], local["sent"])
    assert result["nodes_with_units"] == ["head", "node2"]


def test_no_request_is_sent_twice_and_every_one_carries_the_key(result: dict[str, Any]) -> None:
    endpoint = result["endpoint"]
    assert endpoint["refused"] == 0  # no request went out without the driver's key
    assert endpoint["ray_sent"] == endpoint["local_sent"] > 0
    assert endpoint["ray_sent_twice"] == endpoint["local_sent_twice"] == 0


def test_the_key_is_written_nowhere(result: dict[str, Any]) -> None:
    assert result["secret_files"] == []


def test_ray_job_submit_runs_the_job_to_its_recording(result: dict[str, Any]) -> None:
    if "submit" not in result:
        pytest.skip("Ray's job server is not installed here (pip install 'memprobe[ray]' brings it)")
    submit = result["submit"]
    assert submit["rc"] == 0 and "succeeded" in submit["output"], submit["output"]
    assert submit["recording"]
