"""Paper Table 4, the reader ablation: each system's accuracy under the run's reader and under every
other reader a ``memprobe reader-ablation`` added (layers ``reader:<spec>``), and how far the readers
agree on the systems' order (Spearman ρ, and Kendall τ-b as the judge-layer comparison computes it,
over the systems both readers answered)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from rich import box
from rich.table import Table

from memprobe_engine.paradigms import metrics as M
from memprobe_engine.paradigms.config import ParadigmConfig
from memprobe_engine.paradigms.read.frames import load_paradigm_frames
from memprobe_engine.paradigms.reader_ablation import READER_LAYER_PREFIX
from memprobe_engine.replay.session import ReplaySession
from memprobe_engine.report.compare_stats import kendall_tau_b


@dataclass(frozen=True)
class RankAgreement:
    other: str
    systems: int
    spearman: float | None
    kendall: float | None


def _ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing their average rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Pearson correlation of the ranks; None when either side has no spread."""
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    va, vb = sum((x - ma) ** 2 for x in ra), sum((y - mb) ** 2 for y in rb)
    return None if va == 0 or vb == 0 else cov / (va * vb) ** 0.5


def run_reader(recordings: Sequence[Path]) -> str:
    """The spec of the reader the run itself used (header models: ``reader``, else ``default``)."""
    specs = []
    for path in recordings:
        session = ReplaySession.open(Path(path))
        try:
            models = ParadigmConfig.of(session.header).models.models
            role = models.get("reader") or models.get("default")
            specs.append(str(role.spec if role is not None and role.spec else "the run's reader"))
        finally:
            session.close()
    return ", ".join(dict.fromkeys(specs)) or "the run's reader"


def reader_ablation(recordings: Sequence[Path], layers: Sequence[str]) -> tuple[pd.DataFrame, list[RankAgreement]]:
    """Accuracy (fraction) per system under the run's reader (column ``run``) and each reader layer,
    over the systems a reader layer holds; and each layer's rank agreement with the run's reader."""
    readers = [name for name in layers if name.startswith(READER_LAYER_PREFIX)]
    own = M.system_metrics(load_paradigm_frames(recordings).probes)
    table = pd.DataFrame({"system": own["system"], "run": own["accuracy"]}) if len(own) else \
        pd.DataFrame(columns=["system", "run"])
    agreements = []
    for name in readers:
        other = M.system_metrics(load_paradigm_frames(recordings, layer=name).probes)
        if other.empty:
            continue
        table = table.merge(other[["system", "accuracy"]].rename(columns={"accuracy": name}), on="system",
                            how="left")
        both = table.dropna(subset=["run", name])
        a, b = [float(x) for x in both["run"]], [float(x) for x in both[name]]
        agreements.append(RankAgreement(name, len(both), spearman(a, b) if len(a) > 1 else None,
                                        kendall_tau_b(a, b) if len(a) > 1 else None))
    answered = [n for n in readers if n in table.columns]
    table = table.dropna(subset=answered, how="all") if answered else table.iloc[0:0]
    return table.sort_values("run", ascending=False, kind="stable").reset_index(drop=True), agreements


def render_reader_table(table: pd.DataFrame, agreements: list[RankAgreement], run_spec: str) -> tuple[Table, str]:
    """The terminal form: the table and one line per other reader with ρ and τ."""
    from memprobe_engine.paradigms.read.tables import pct

    out = Table(title="Table 4: reader ablation — accuracy % of the same recorded retrieval under two readers",
                title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    others = [c for c in table.columns if c not in ("system", "run")]
    for heading in ("System", f"{run_spec} (run)", *[c[len(READER_LAYER_PREFIX):] for c in others]):
        out.add_column(heading, justify="left" if heading == "System" else "right")
    for row in table.to_dict("records"):
        out.add_row(str(row["system"]), pct(row["run"]), *[pct(row[c]) for c in others])

    def num(value: float | None) -> str:
        return "–" if value is None else f"{value:.2f}"

    lines = [f"{run_spec} vs {a.other[len(READER_LAYER_PREFIX):]}: Spearman ρ = {num(a.spearman)}, "
             f"Kendall τ = {num(a.kendall)} over {a.systems} systems" for a in agreements]
    return out, "\n".join(lines)
