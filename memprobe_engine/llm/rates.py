"""This machine's measured speed of the embedded model, kept for wall-time estimates.

``memprobe doctor`` measures prompt and generation tokens per second of an embedded tier (one
stream, llama.cpp's own timings) and saves them here; ``memprobe run --dry-run`` reads them to say
how long the embedded model would take. One file per machine, in MemProbe's cache folder.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from memprobe_engine.llm.model_assets import cache_dir

RATES_FILE = "measured-rates.json"


@dataclass(frozen=True)
class MeasuredRates:
    tier: str
    prompt_tok_s: float
    gen_tok_s: float
    measured: float

    def seconds(self, prompt_tokens: float, completion_tokens: float) -> float:
        """Wall seconds of one stream evaluating these tokens (no prefix reuse, no batching)."""
        return prompt_tokens / self.prompt_tok_s + completion_tokens / self.gen_tok_s


def rates_path() -> Path:
    return cache_dir() / RATES_FILE


def save_rates(tier: str, prompt_tok_s: float, gen_tok_s: float) -> None:
    """Record a measurement (best effort: a read-only cache loses nothing but the estimate)."""
    path = rates_path()
    try:
        known = orjson.loads(path.read_bytes()) if path.is_file() else {}
    except (OSError, orjson.JSONDecodeError):
        known = {}
    if not isinstance(known, dict):
        known = {}
    known[tier] = {"prompt_tok_s": prompt_tok_s, "gen_tok_s": gen_tok_s, "measured": time.time()}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(orjson.dumps(known, option=orjson.OPT_INDENT_2))
    except OSError:
        pass


def load_rates(tier: str) -> MeasuredRates | None:
    """The last measurement of ``tier`` on this machine, or None when ``memprobe doctor`` never ran."""
    try:
        known = orjson.loads(rates_path().read_bytes())
        entry = known[tier]
        return MeasuredRates(tier, float(entry["prompt_tok_s"]), float(entry["gen_tok_s"]), float(entry["measured"]))
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
