"""Protocol-B result tables (paper Tables 1, 2, 3, 5, 7, Figure 4 as a table) and their terminal form.

Tables are pandas frames with fractions (0..1) so exports keep full precision; :func:`print_paradigm_tables`
is the only place that writes percentages. Table names for ``--tables``: 1, 2, 3, 4 (Figure 4: per
probe type), 5, 7, paired (paired bootstrap between systems), failures, exclusions, intervals (the 95 %
episode-bootstrap interval of every metric of Tables 2–7, printed under each value and exported as
``intervals.csv``; leave it out of ``--tables`` for the bare values).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pandas as pd
from rich import box
from rich.console import Console
from rich.table import Table

from memprobe_engine.errors import ConfigError
from memprobe_engine.paradigms import metrics as M
from memprobe_engine.paradigms.intervals import metric_intervals

TABLE_NAMES: tuple[str, ...] = ("1", "2", "3", "4", "5", "7", "paired", "failures", "exclusions", "intervals")
DEFAULT_TABLES = ",".join(TABLE_NAMES)
DASH = "–"
FAILURE_SHORT = {"under_update": "under-upd.", "over_update": "over-upd.", "historical_overwrite": "hist. overwr.",
                 "provenance_loss": "provenance", "temporal_reconstruction": "temporal",
                 "distributed_evidence_miss": "split miss", "conflict_missed": "conflict"}
PROBE_SHORT = {"current_value": "Current", "previous_value": "Previous", "change_detection": "Change",
               "source": "Source", "conflict_value": "Conflict", "temporal": "Temporal"}


def parse_paradigm_tables(spec: str) -> list[str]:
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in TABLE_NAMES]
    if unknown:
        raise ConfigError(f"--tables: unknown protocol-B table(s) {', '.join(unknown)}; choose from "
                          f"{', '.join(TABLE_NAMES)}.")
    return names


def build_paradigm_tables(probes: pd.DataFrame, names: Iterable[str] = TABLE_NAMES,
                          reference: str = "full_context") -> dict[str, pd.DataFrame]:
    """Every requested table from the probe frame (see :mod:`memprobe_engine.paradigms.metrics`)."""
    wanted = set(names)
    metrics = M.system_metrics(probes) if len(probes) else pd.DataFrame(columns=["system", "accuracy"])
    counts = M.episode_counts(probes)
    weights = M.draws(len(counts.episodes)) if counts.episodes else None
    out: dict[str, pd.DataFrame] = {}
    if "1" in wanted:
        ci = M.bootstrap_ci(counts, weights)
        t1 = metrics[["system", "accuracy", "correct", "scored", "excluded", "mean_score"]].copy() if len(metrics) \
            else pd.DataFrame(columns=["system", "accuracy", "correct", "scored", "excluded", "mean_score"])
        t1["ci_low"] = [ci.get(s, (None, None))[0] for s in t1["system"]]
        t1["ci_high"] = [ci.get(s, (None, None))[1] for s in t1["system"]]
        out["table1"] = t1
    if "2" in wanted:
        out["table2"] = _cols(metrics, ["system", "plasticity", "stability", "sp_balance", "preserve_err",
                                        "update_err"])
    if "3" in wanted:
        long = M.breakdown(probes, "paradigm", M.PARADIGM_ORDER)
        out["table3"] = _wide(long, "paradigm", metrics)
    if "4" in wanted:
        long = M.breakdown(probes, "probe_type", M.PROBE_ORDER)
        out["table4_probe_types"] = _wide(long, "probe_type", metrics)
    if "5" in wanted:
        out["table5"] = _cols(metrics, ["system", "historical", "source_fidelity", "source_probe", "conflict_status",
                                        "temporal"])
    if "7" in wanted:
        gap = M.retrieval_gap(metrics, reference)
        t7 = _cols(metrics, ["system", "non_split", "split", "split_cv", "split_cd", "delta_split"])
        out["table7"] = t7.merge(gap, on="system", how="left")[
            ["system", "delta_fc", "rag_norm", "non_split", "split", "split_cv", "split_cd", "delta_split"]]
    if "paired" in wanted:
        out["paired_bootstrap"] = M.paired_bootstrap(counts, weights, frame=probes)
    if "failures" in wanted:
        out["failures"] = M.failures(probes) if len(probes) else pd.DataFrame(columns=["system"])
    if "exclusions" in wanted:
        out["exclusions"] = M.exclusions(probes)
    if "intervals" in wanted:
        out["intervals"] = metric_intervals(probes, weights, reference)
    return out


def _cols(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    return frame[columns].copy() if len(frame) else pd.DataFrame(columns=columns)


def _wide(long: pd.DataFrame, column: str, metrics: pd.DataFrame) -> pd.DataFrame:
    if long.empty:
        return pd.DataFrame(columns=["system"])
    wide = long.pivot(index="system", columns=column, values="accuracy")
    order = [c for c in (M.PARADIGM_ORDER if column == "paradigm" else M.PROBE_ORDER) if c in wide.columns]
    wide = wide[order + [c for c in wide.columns if c not in order]]
    systems = list(dict.fromkeys(long["system"].tolist()))
    wide = wide.reindex(systems).reset_index()
    wide.columns.name = None
    return wide.merge(metrics[["system", "accuracy"]].rename(columns={"accuracy": "overall"}), on="system", how="left")


# --- terminal -------------------------------------------------------------------------------------

def pct(value: float | None, signed: bool = False) -> str:
    if value is None or pd.isna(value):
        return DASH
    number = float(value)
    return f"{number * 100:+.1f}" if signed else f"{number * 100:.1f}"


def ratio(value: float | None) -> str:
    if value is None or pd.isna(value):
        return DASH
    return f"{float(value):.3f}"


class Intervals:
    """Looks up a (system, metric) interval and writes it compactly (whole percent, or a ratio for
    RAGnorm) on a line under the value, so a table with CIs stays within the report's width."""

    def __init__(self, frame: pd.DataFrame | None) -> None:
        self._by_key: dict[tuple[str, str], tuple[float, float] | None] = {}
        for r in (frame.itertuples(index=False) if frame is not None else ()):
            known = not (pd.isna(r.ci_low) or pd.isna(r.ci_high))
            self._by_key[(str(r.system), str(r.metric))] = (float(r.ci_low), float(r.ci_high)) if known else None

    def __bool__(self) -> bool:
        return bool(self._by_key)

    def under(self, text: str, system: object, metric: str, signed: bool = False, as_ratio: bool = False) -> str:
        if not self._by_key or text == DASH:
            return text
        interval = self._by_key.get((str(system), metric))
        if interval is None:
            return f"{text}\n{DASH}"
        low, high = interval
        if as_ratio:
            return f"{text}\n[{low:.2f}, {high:.2f}]"
        fmt = "{:+.0f}" if signed else "{:.0f}"
        return f"{text}\n[{fmt.format(low * 100)}, {fmt.format(high * 100)}]"


def _table(title: str, headers: list[str]) -> Table:
    # The title goes in a caption-less header line of its own (print_paradigm_tables): a rich title
    # wraps at the table's width, and these tables are narrower than their titles.
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1, 0, 0), pad_edge=False)
    table.title = title
    table.add_column(headers[0], no_wrap=True)
    for header in headers[1:]:
        table.add_column(header, justify="right", no_wrap=True)
    return table


def _render(name: str, df: pd.DataFrame, ci: Intervals | None = None) -> Table | None:
    ci = ci or Intervals(None)
    note = " [95% CI]" if ci else ""
    if name == "table1":
        t = _table("Table 1: overall accuracy % [95% CI, episode bootstrap, 2,000 resamples]",
                   ["System", "Acc.", "95% CI", "correct/scored", "excl.", "mean score"])
        for r in df.itertuples(index=False):
            t.add_row(str(r.system), pct(r.accuracy), f"[{pct(r.ci_low)}, {pct(r.ci_high)}]",
                      f"{r.correct}/{r.scored}", str(r.excluded), ratio(r.mean_score))
        return t
    if name == "table2":
        t = _table(f"Table 2: stability–plasticity %{note}", ["System", "Plast.", "Stab.", "SP-Bal",
                                                               "PreserveErr.", "UpdateErr."])
        for r in df.itertuples(index=False):
            s = r.system
            t.add_row(str(s), ci.under(pct(r.plasticity), s, "plasticity"), ci.under(pct(r.stability), s, "stability"),
                      ci.under(pct(r.sp_balance), s, "sp_balance"), ci.under(pct(r.preserve_err), s, "preserve_err"),
                      ci.under(pct(r.update_err), s, "update_err"))
        return t
    if name in ("table3", "table4_probe_types"):
        title = "Table 3: accuracy % per paradigm" if name == "table3" else \
            "Figure 4 (as a table): accuracy % per probe type"
        prefix = "paradigm:" if name == "table3" else "probe:"
        columns = [c for c in df.columns if c not in ("system", "overall")]
        t = _table(title + note, ["System"] + [PROBE_SHORT.get(c, c.capitalize()) for c in columns] + ["Overall"])
        for row in df.to_dict("records"):
            s = row["system"]
            t.add_row(str(s), *[ci.under(pct(row[c]), s, prefix + str(c)) for c in columns],
                      ci.under(pct(row["overall"]), s, "overall"))
        return t
    if name == "table5":
        t = _table(f"Table 5: historical, source and temporal fidelity %{note}",
                   ["System", "Hist.", "Source", "(source probe)", "(conflict status)", "Temp."])
        for r in df.itertuples(index=False):
            s = r.system
            t.add_row(str(s), ci.under(pct(r.historical), s, "historical"),
                      ci.under(pct(r.source_fidelity), s, "source_fidelity"),
                      ci.under(pct(r.source_probe), s, "source_probe"),
                      ci.under(pct(r.conflict_status), s, "conflict_status"), ci.under(pct(r.temporal), s, "temporal"))
        return t
    if name == "table7":
        t = _table(f"Table 7: retrieval gap and split perturbation (ΔFC, Δsplit in pp){note}",
                   ["System", "ΔFC", "RAGnorm", "Non-split", "Split", "Split CV", "Split CD", "Δsplit"])
        for r in df.itertuples(index=False):
            s = r.system
            t.add_row(str(s), ci.under(pct(r.delta_fc, signed=True), s, "delta_fc", signed=True),
                      ci.under(ratio(r.rag_norm), s, "rag_norm", as_ratio=True),
                      ci.under(pct(r.non_split), s, "non_split"), ci.under(pct(r.split), s, "split"),
                      ci.under(pct(r.split_cv), s, "split_cv"), ci.under(pct(r.split_cd), s, "split_cd"),
                      ci.under(pct(r.delta_split, signed=True), s, "delta_split", signed=True))
        return t
    if name == "paired_bootstrap":
        t = _table("Paired bootstrap of overall accuracy (same episode draws): A − B, pp; every metric in "
                   "paired_bootstrap.csv", ["System A", "System B", "Δ", "95% CI", "p"])
        for r in df[df["metric"] == "overall"].itertuples(index=False):
            t.add_row(str(r.system_a), str(r.system_b), pct(r.diff, signed=True),
                      f"[{pct(r.ci_low, True)}, {pct(r.ci_high, True)}]", f"{float(r.p):.3f}")
        return t
    if name == "failures":
        cats = [c for c in df.columns if c != "system"]
        t = _table("Failure categories (not-correct probes per paper §5.5 mode)",
                   ["System"] + [FAILURE_SHORT.get(c, c) for c in cats])
        for row in df.to_dict("records"):
            t.add_row(str(row["system"]), *[str(row[c]) for c in cats])
        return t
    if name == "exclusions":
        t = _table(f"Exclusions: {len(df)} probe(s) out of every denominator (execution errors)",
                   ["System", "Episode", "Probe", "Reason"])
        for r in df.head(20).itertuples(index=False):
            t.add_row(str(r.system), str(r.episode_id), f"{r.probe_index} {r.probe_type}",
                      str(r.exclusion_reason)[:60])
        return t
    return None


def print_paradigm_tables(tables: Mapping[str, pd.DataFrame], console: Console) -> None:
    intervals = Intervals(tables.get("intervals"))
    for name, df in tables.items():
        rendered = _render(name, df, intervals)
        if rendered is not None:
            title, rendered.title = rendered.title, None
            console.print(str(title), markup=False)
            console.print(rendered)
            if name == "exclusions" and len(df) > 20:
                console.print(f"… and {len(df) - 20} more (see exclusions.csv with --csv)")
            console.print()
