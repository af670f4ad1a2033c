"""The smallest difference in B a protocol-A run can detect, and whether a comparison's is below it.

A developer runs the quick job before and after a change and reads the difference in B. Whether that
difference means anything depends on how many cases it rests on and how much one case's score moves
for reasons other than the change: the judge's own error, and how differently cases respond.

For paired cases (the same user, dimension and mode in both runs) a two-sided test at 5 % with
power 80 % detects a mean difference of about ``(z₀.₉₇₅ + z₀.₈₀) · sd(d) / √n`` = 2.80 · sd(d) / √n,
where ``d`` is a case's difference between the runs.

* ``memprobe compare`` has the differences themselves: ``sd(d)`` is measured.
* ``memprobe report`` has one run: ``sd(d)`` is predicted as √(2·σⱼ² + s²) — σⱼ, the judge's error on
  one case (the SD of its difference from the paper's judge, measured by ``memprobe judge check``
  and recorded on the calibrated judge's card), counts once per run; ``s``, the spread of this run's
  case scores, stands for how much a change moves one case more than another. A judge whose error
  was never measured (a model judge) is counted as exact, so the figure is then a lower bound and
  says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

#: z of a two-sided 5 % test plus z of 80 % power.
Z_SUM = 1.959964 + 0.841621


def detectable(sd_difference: float, cases: int) -> float:
    """The smallest mean paired difference ``cases`` pairs with this spread detect."""
    return Z_SUM * sd_difference / math.sqrt(cases) if cases else float("inf")


@dataclass(frozen=True)
class RunDetectable:
    """What one run's cases can detect."""

    cases: int
    case_sd: float
    judge_sd: float | None
    difference: float

    def line(self, what: str) -> str:
        if not math.isfinite(self.difference) or self.difference == 0:
            return (f"{what}: {self.cases} scored case(s), all alike and no judge error to count: no spread to "
                    f"estimate a detectable difference from")
        judge = f"judge error {self.judge_sd:.2f}" if self.judge_sd is not None else \
            "judge error not measured (counted as 0: a lower bound; memprobe judge check measures it)"
        return (f"{what}: {self.cases} scored cases can detect a change in B of about {self.difference:.2f} or more "
                f"(paired, 5 %, power 80 %; case spread {self.case_sd:.2f}, {judge})")


def run_detectable(scores: Sequence[float], judge_sd: float | None) -> RunDetectable:
    """The predicted detectable difference of a rerun of these cases (see the module docstring)."""
    values = np.asarray(scores, dtype=float)
    spread = float(values.std(ddof=1)) if values.size > 1 else 0.0
    sd = math.sqrt(2 * (judge_sd or 0.0) ** 2 + spread ** 2)
    return RunDetectable(cases=int(values.size), case_sd=spread, judge_sd=judge_sd, difference=detectable(sd, values.size))


def paired_line(differences: Sequence[float], what: str) -> str:
    """The comparison's verdict: its mean difference against what its pairs can detect."""
    values = np.asarray(differences, dtype=float)
    if values.size < 2:
        return f"{what}: fewer than 2 paired cases; no difference can be told from noise."
    mean = float(values.mean())
    floor = detectable(float(values.std(ddof=1)), values.size)
    verdict = ("below what these cases can detect: do not read it as a change" if abs(mean) < floor
               else "at or above what these cases can detect")
    return (f"{what}: ΔB {mean:+.3f} over {values.size} paired cases; detectable (5 %, power 80 %) from "
            f"{floor:.3f}: {verdict}.")


def report_lines(scores: Sequence[tuple[str, str, float, bool]],
                 judge_sd_of: Callable[[str], float | None]) -> list[str]:
    """One line per system of (system, recording, score, judged) rows, usable scores only; a system
    none of whose cases went to a judge ("unknown" scores 0 by the rubric) carries no judge error."""
    lines = []
    for system in sorted({row[0] for row in scores}):
        rows = [(recording, score, judged) for s, recording, score, judged in scores if s == system]
        sds = {judge_sd_of(recording) for recording, _, judged in rows if judged}
        judge_sd = (max((sd for sd in sds if sd is not None), default=None) if None not in sds else None) \
            if sds else 0.0
        lines.append(run_detectable([score for _, score, _ in rows], judge_sd).line(system))
    return lines
