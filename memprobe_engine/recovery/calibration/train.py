"""Fitting the calibrated judge's adapters on a release's judgments (``memprobe judge train``).

The training signal is the paper's strong judge: every non-"unknown" fill it scored, with its score
as the target (squared error on the sigmoid output). Users named in ``held_out`` are kept out of
training and measured afterwards; the cut points that turn the output into a level are fitted on the
training cases only (the level boundaries that maximise linear-weighted kappa there). Seeds, thread
count and case order are fixed, so the same data and settings give the same weights on one machine.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memprobe_engine.report.compare_stats import JUDGE_LEVELS as LEVELS
from memprobe_engine.report.compare_stats import level_index, linear_weighted_kappa
from memprobe_engine.recovery.calibration.agreement import ScoredPair, agreement
from memprobe_engine.recovery.calibration.cases import JudgedCase
from memprobe_engine.recovery.cross_judge import (
    MAX_TOKENS,
    build_network,
    file_sha256,
    level_of,
    pooled_output,
    trainable_state,
    value_text,
)
from memprobe_engine.recovery.scoring import is_unknown

if TYPE_CHECKING:
    from transformers import BatchEncoding

DEFAULT_CUTS = (0.125, 0.375, 0.625, 0.875)


@dataclass(frozen=True)
class TrainSettings:
    epochs: int = 4
    learning_rate: float = 5e-4
    batch_size: int = 16
    rank: int = 8
    alpha: float = 16.0
    seed: int = 0
    threads: int = 2


def trainable(cases: Sequence[JudgedCase]) -> list[JudgedCase]:
    """The cases a judge is asked about: fills other than "unknown" (the rubric scores those 0)."""
    return [c for c in cases if not is_unknown(c.predicted)]


def fit_cuts(probabilities: Sequence[float], references: Sequence[float]) -> tuple[float, float, float, float]:
    """Cut points (ascending) that maximise linear-weighted kappa of the levels they give, found by
    coordinate search over a 0.01 grid from the even cuts."""
    ref = [level_index(r) for r in references]
    cuts = list(DEFAULT_CUTS)

    def kappa(candidate: list[float]) -> float:
        levels = [level_index(level_of(p, tuple(candidate))) for p in probabilities]
        return linear_weighted_kappa(ref, levels)

    best = kappa(cuts)
    grid = [i / 100 for i in range(1, 100)]
    for _ in range(3):
        for index in range(len(cuts)):
            low = cuts[index - 1] if index else 0.0
            high = cuts[index + 1] if index + 1 < len(cuts) else 1.0
            for value in grid:
                if low < value < high:
                    trial = cuts[:index] + [value] + cuts[index + 1:]
                    score = kappa(trial)
                    if score > best + 1e-9:
                        best, cuts = score, trial
    return (cuts[0], cuts[1], cuts[2], cuts[3])


def train(train_cases: Sequence[JudgedCase], held_out: Sequence[JudgedCase], out_dir: Path, name: str,
          settings: TrainSettings, *, sources: list[str], progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Fit adapters on ``train_cases``, measure on ``held_out``, write ``<name>.npz`` and ``<name>.json``
    into ``out_dir``; returns the card."""
    import torch

    torch.manual_seed(settings.seed)
    torch.set_num_threads(settings.threads)
    rng = random.Random(settings.seed)
    tokenizer, encoder, head = build_network(settings.rank, settings.alpha)
    params = [p for p in encoder.parameters() if p.requires_grad] + list(head.parameters())
    optimiser = torch.optim.AdamW(params, lr=settings.learning_rate, weight_decay=0.01)
    cases = list(train_cases)
    targets = torch.tensor([c.reference for c in cases], dtype=torch.float32)

    def batch(chunk: Sequence[JudgedCase]) -> BatchEncoding:
        encoded: BatchEncoding = tokenizer([value_text(c.dimension, c.truth, c.explanation) for c in chunk],
                                           [c.predicted for c in chunk], truncation="only_first",
                                           max_length=MAX_TOKENS, padding=True, return_tensors="pt")
        return encoded

    for epoch in range(settings.epochs):
        encoder.train()
        head.train()
        order = list(range(len(cases)))
        rng.shuffle(order)
        total = 0.0
        for start in range(0, len(order), settings.batch_size):
            ids = order[start:start + settings.batch_size]
            output = torch.sigmoid(head(pooled_output(encoder, batch([cases[i] for i in ids]))).squeeze(-1))
            loss = ((output - targets[ids]) ** 2).mean()
            optimiser.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            optimiser.step()
            total += float(loss.detach()) * len(ids)
        if progress is not None:
            progress(f"epoch {epoch + 1}/{settings.epochs}: mean squared error {total / len(cases):.4f}")

    def predict(chunk: Sequence[JudgedCase]) -> list[float]:
        encoder.train(False)
        head.train(False)
        out: list[float] = []
        with torch.no_grad():
            for case in chunk:  # one case per pass, as the judge scores at run time
                b = batch([case])
                out.append(float(torch.sigmoid(head(pooled_output(encoder, b)).squeeze())))
        return out

    cuts = fit_cuts(predict(cases), [c.reference for c in cases])
    measured: dict[str, Any] = {}
    if held_out:
        probabilities = predict(held_out)
        result = agreement([ScoredPair(c.system, c.reference, level_of(p, cuts))
                            for c, p in zip(held_out, probabilities)])
        measured = {"users": sorted({c.user_id for c in held_out}), "cases": result.n,
                    "exact": round(result.exact, 4), "within_one": round(result.within_one, 4),
                    "kappa_linear": round(result.kappa_linear, 4), "spearman": round(result.spearman, 4),
                    "error_sd": round(result.error_sd, 4), "confusion": result.confusion,
                    "bias_by_system": {s: round(b, 4) for s, (b, _) in result.bias_by_system.items()}}
    out_dir.mkdir(parents=True, exist_ok=True)
    weights = out_dir / f"{name}.npz"
    state = trainable_state(encoder, head)
    arrays: dict[str, Any] = {k: v.astype(np.float16) for k, v in sorted(state.items())}
    np.savez_compressed(weights, **arrays)
    card = {"name": name, "rank": settings.rank, "alpha": settings.alpha, "cuts": [round(c, 4) for c in cuts],
            "levels": list(LEVELS), "sha256": file_sha256(weights),
            "trained_on": {"sources": sources, "users": sorted({c.user_id for c in cases}), "cases": len(cases),
                           "epochs": settings.epochs, "learning_rate": settings.learning_rate,
                           "batch_size": settings.batch_size, "seed": settings.seed},
            "held_out": measured,
            "attribution": "Trained on judgments from the public release of the hidden user-state recovery "
                           "benchmark (github: sora1998/MemProbe), CC BY 4.0."}
    (out_dir / f"{name}.json").write_text(json.dumps(card, indent=1) + "\n")
    return card
