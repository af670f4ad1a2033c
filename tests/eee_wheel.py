"""The authority the Every Eval Ever export is checked against: the ``every-eval-ever`` 0.3.0 wheel
from PyPI, whose ``every_eval_ever/schemas/*.json`` are the format's JSON Schemas.

Nothing of it is kept in the repository. ``make test`` fetches the wheel once (``python
tests/eee_wheel.py``) into ``.test-cache/every-eval-ever/`` (ignored by git), and the tests read
the schemas straight out of the zip; a test that finds no wheel fetches it the same way. The
wheel's sha256 is pinned, so a tampered or different file is refused. ``MEMPROBE_EEE_WHEEL`` may
name a wheel fetched elsewhere (a machine without PyPI).

The package itself is not installed: it needs Python >= 3.12 and a large stack, and only its
schema files are wanted. ``pip download --python-version 3.12`` fetches it from any Python.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VERSION = "0.3.0"
WHEEL = f"every_eval_ever-{VERSION}-py3-none-any.whl"
#: sha256 of the wheel PyPI serves for every-eval-ever 0.3.0.
SHA256 = "564b8bc624c1f822f749a769dc69dc058a736e83d920cbeb147c3a30d3152317"
FOLDER = ROOT / ".test-cache" / "every-eval-ever"
#: The schemas inside the wheel: the aggregate record and the instance record.
SCHEMAS = {"aggregate": "every_eval_ever/schemas/eval.schema.json",
           "instance": "every_eval_ever/schemas/instance_level_eval.schema.json"}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch() -> Path:
    """The wheel's path, downloaded with pip first when it is not there yet; RuntimeError saying why
    when it cannot be had or is not the pinned file."""
    given = os.environ.get("MEMPROBE_EEE_WHEEL")
    wheel = Path(given) if given else FOLDER / WHEEL
    if not wheel.is_file():
        if given:
            raise RuntimeError(f"MEMPROBE_EEE_WHEEL={given}: no such file")
        FOLDER.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([sys.executable, "-m", "pip", "download", f"every_eval_ever=={VERSION}", "--no-deps",
                               "--python-version", "3.12", "--only-binary=:all:", "--timeout", "30", "--retries", "2",
                               "--disable-pip-version-check", "--quiet", "-d", str(FOLDER)],
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0 or not wheel.is_file():
            raise RuntimeError(f"could not download every_eval_ever {VERSION} from PyPI into {FOLDER} "
                               f"(pip: {done.stderr.strip()[-500:] or done.returncode}); run `python tests/eee_wheel.py` "
                               f"where PyPI is reachable, or set MEMPROBE_EEE_WHEEL to the wheel")
    if _digest(wheel) != SHA256:
        raise RuntimeError(f"{wheel}: sha256 {_digest(wheel)} is not PyPI's every_eval_ever {VERSION} wheel "
                           f"({SHA256}); delete it and fetch again")
    return wheel


def schemas(wheel: Path) -> dict[str, dict[str, object]]:
    """The aggregate and instance JSON Schemas, read out of the wheel."""
    with zipfile.ZipFile(wheel) as archive:
        return {name: json.loads(archive.read(member)) for name, member in SCHEMAS.items()}


if __name__ == "__main__":
    try:
        print(fetch())
    except RuntimeError as err:
        sys.exit(f"error: {err}")
