"""Upstream-labelled probes of a whole system through `import release-b` and `report`: the printed
Table 1/2/3/5 cells against upstream's own computation (``compute_metrics.py``: a probe counts when its
label is correct / partial / incorrect, is right only when correct; source fidelity pools source
probes with the conflict probes' status sub-score), done here independently from the labels.

The system is built from the real upstream answers of tests/fixtures/release-b-real: for each of its
ten episodes (all four paradigms, both expected behaviours) the answers of one report, mem0 first."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

from rich.console import Console

from memprobe_engine.paradigms.release.importer import import_release_b
from memprobe_engine.paradigms.read.report import paradigm_report

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "release-b-real"
REPORTS = ("mem0_qwen3", "graphiti_qwen3", "amem_qwen3", "gpt54_v2")
SYSTEM = "composite_full"


def _whole_system(tmp: Path) -> tuple[Path, dict[str, list[dict[str, Any]]], dict[str, dict[str, Any]]]:
    checkout = tmp / "checkout"
    shutil.copytree(REAL / "data", checkout / "data")
    raw = json.loads((REAL / "data" / "suite56" / "latent_specs.json").read_text())
    specs = {s["episode_id"]: s for s in (raw["specs"] if isinstance(raw, dict) else raw)}
    episodes: dict[str, list[dict[str, Any]]] = {}
    for name in REPORTS:
        report = json.loads((REAL / "results" / "suite56" / "reports" / f"baselines_report_{name}.json").read_text())
        for entries in report.values():
            for episode_id, entry in entries.items():
                if episode_id in specs:
                    episodes.setdefault(episode_id, entry["answers"])
    assert set(episodes) == set(specs)
    reports = checkout / "results" / "suite56" / "reports"
    reports.mkdir(parents=True)
    (reports / "whole.json").write_text(json.dumps({SYSTEM: {e: {"answers": a} for e, a in episodes.items()}}))
    return checkout, episodes, specs


def _accuracy(labels: list[str]) -> float | None:
    scored = [m for m in labels if m in ("correct", "partial", "incorrect")]
    return sum(m == "correct" for m in scored) / len(scored) if scored else None


def _conflict_status(answer: dict[str, Any]) -> str | None:
    subs = answer.get("conflict_sub_scores")
    if isinstance(subs, dict):
        return str(subs.get("status_classified"))
    found = re.search(r"status=(\w+)", str(answer.get("reason") or ""))
    return found.group(1) if found else None


def upstream_computation(episodes: dict[str, list[dict[str, Any]]], specs: dict[str, dict[str, Any]]
                         ) -> dict[str, float | None]:
    rows = [(specs[e], a) for e, answers in episodes.items() for a in answers]

    def acc(keep: Any) -> float | None:
        return _accuracy([a["match"] for s, a in rows if keep(s, a)])

    plasticity = acc(lambda s, a: s["expected_behavior"] == "should_update")
    stability = acc(lambda s, a: s["expected_behavior"] == "should_preserve")
    assert plasticity is not None and stability is not None
    statuses = [st for _, a in rows if a["probe_type"] == "conflict_value" and a["match"] != "execution_error"
                for st in [_conflict_status(a)] if st in ("correct", "partial", "incorrect")]
    source = [a["match"] for _, a in rows if a["probe_type"] == "source" and
              a["match"] in ("correct", "partial", "incorrect")]
    pooled = (sum(m == "correct" for m in source) + sum(st == "correct" for st in statuses)) / \
        (len(source) + len(statuses))
    cells: dict[str, float | None] = {
        "overall": acc(lambda s, a: True), "plasticity": plasticity, "stability": stability,
        "sp_balance": 2 * plasticity * stability / (plasticity + stability) if plasticity + stability else 0.0,
        "historical": acc(lambda s, a: a["probe_type"] == "previous_value"),
        "source_probe": acc(lambda s, a: a["probe_type"] == "source"), "source": pooled,
        "conflict_status": sum(st == "correct" for st in statuses) / len(statuses) if statuses else None,
        "temporal": acc(lambda s, a: a["probe_type"] == "temporal")}
    for paradigm in ("interference", "misinformation", "consolidation", "reconsolidation"):
        cells[paradigm] = acc(lambda s, a, p=paradigm: s["paradigm"] == p)
    return cells


def _printed(recording: Path, layer: str) -> dict[str, list[str]]:
    """The cells of the system's row in each printed table, by table number."""
    out = io.StringIO()
    paradigm_report([recording], tables="1,2,3,5", layers=[layer], console=Console(file=out, width=200),
                    errors=Console(file=io.StringIO()))
    rows: dict[str, list[str]] = {}
    table = ""
    for line in out.getvalue().splitlines():
        heading = re.match(r"Table (\d)", line)
        if heading:
            table = heading.group(1)
        elif line.startswith(SYSTEM):
            rows[table] = line.split()[1:]
    return rows


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def test_a_whole_upstream_system_prints_upstreams_own_tables(tmp_path: Path) -> None:
    checkout, episodes, specs = _whole_system(tmp_path)
    result = import_release_b(checkout, tmp_path / "out")
    [agreement] = result.reports
    assert agreement.compared == 36 and agreement.agree == 36, agreement.disagreements  # default mode: 100 %
    want = upstream_computation(episodes, specs)
    recording = tmp_path / "out" / "recordings" / f"whole__{SYSTEM}"
    for layer in ("main", "upstream-labels"):
        got = _printed(recording, layer)
        assert got["1"][0] == _pct(want["overall"]), layer
        assert got["2"][:3] == [_pct(want["plasticity"]), _pct(want["stability"]), _pct(want["sp_balance"])], layer
        assert got["3"] == [_pct(want[p]) for p in ("interference", "misinformation", "consolidation",
                                                     "reconsolidation", "overall")], layer
        assert got["5"][0] == _pct(want["historical"]) and got["5"][2] == _pct(want["source_probe"]), layer
        assert got["5"][4] == _pct(want["temporal"]), layer
    # Pooled source fidelity needs the conflict probes' status sub-scores: upstream reads them from the
    # report (its reasons are trimmed in this fixture, so it pools the source probes alone), we from ours.
    labels = _printed(recording, "upstream-labels")["5"]
    assert labels[1] == _pct(want["source"]) and labels[3] == _pct(want["conflict_status"])
