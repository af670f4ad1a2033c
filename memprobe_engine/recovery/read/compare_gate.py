"""Protocol A's CI gate (``memprobe compare --fail-on``), on the comparison ``read/compare.py`` builds.

``regression``: the paired 95 % interval of ΔB (category-balanced, either access mode; bootstrap
over the paired users) lies wholly below 0. ``any-regressed``: any case's score went down.
"""

from __future__ import annotations

from collections.abc import Mapping

from memprobe_engine.report.compare_gate import Verdict, frame, interval_gate


def gate(comparison: Mapping[str, object], rule: str) -> Verdict:
    """Protocol A's verdict from the comparison's categories and cases frames."""
    if rule == "any-regressed":
        cases = frame(comparison, "compare_cases")
        regressed = cases[cases["change"] == "regressed"]
        if len(regressed):
            first = regressed.iloc[0]
            return Verdict(True, f"FAIL: {len(regressed)} case(s) regressed, e.g. {first['user_id']}:"
                                 f"{first['dimension']} ({first['mode']}) {float(first['base_score']):.2f} → "
                                 f"{float(first['other_score']):.2f}")
        return Verdict(False, f"PASS: no case regressed ({len(cases)} compared)")
    categories = frame(comparison, "compare_categories")
    rows = categories[categories["category"] == "B"]
    return interval_gate(rows, lambda r: f"ΔB {r['mode']} {r['base_system']}→{r['other_system']}", "delta_B",
                         "users", "user")
