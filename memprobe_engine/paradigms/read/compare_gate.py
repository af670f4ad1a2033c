"""Protocol B's CI gate (``memprobe compare --fail-on``), on the comparison ``read/compare.py`` builds.

``regression``: the paired 95 % interval of Δaccuracy (episode bootstrap) lies wholly below 0.
``any-regressed``: any probe answered correctly in the base run is lost in the other.
"""

from __future__ import annotations

from collections.abc import Mapping

from memprobe_engine.report.compare_gate import Verdict, frame, interval_gate


def gate(comparison: Mapping[str, object], rule: str) -> Verdict:
    """Protocol B's verdict from the comparison's metrics and probes frames."""
    if rule == "any-regressed":
        probes = frame(comparison, "compare_probes")
        lost = probes[probes["change"] == "lost"]
        if len(lost):
            first = lost.iloc[0]
            return Verdict(True, f"FAIL: {len(lost)} probe(s) regressed, e.g. {first['episode_id']} probe "
                                 f"{first['probe_index']} ({first['probe_type']})")
        return Verdict(False, f"PASS: no probe regressed ({len(probes)} compared)")
    metrics = frame(comparison, "compare_metrics")
    rows = metrics[metrics["metric"] == "accuracy"]
    return interval_gate(rows, lambda r: f"Δaccuracy {r['base_system']}→{r['other_system']}", "delta", "episodes",
                         "episode")
