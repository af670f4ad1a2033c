"""Which judge scores a protocol-A fill: the ``recovery_judge`` model role, or a calibrated judge.

``model`` asks the ``recovery_judge`` role's model the paper's question (the release's judge; the
default for real endpoints). ``calibrated:NAME`` scores with a cross-encoder trained on the paper's
own judgments (:mod:`.cross_judge`; no model call) — the default under the embedded
framing, where the 1.5B model's own verdicts agreed with the paper's judge at kappa 0.33. The
choice is recorded in the header (``config.recovery_judge``, only when not ``model``, so recordings
made before it existed keep their fingerprint and are re-scored as they were made).
"""

from __future__ import annotations

from collections.abc import Mapping

from memprobe_engine.errors import ConfigError
from memprobe_engine.recovery.config import MODEL_JUDGE as MODEL_JUDGE
from memprobe_engine.recovery.config import RecoveryConfig
from memprobe_engine.recovery.cross_judge import DEFAULT_JUDGE, WEIGHTS_DIR
from memprobe_engine.recovery.framing import Framing

CALIBRATED_PREFIX = "calibrated"


def known_calibrated() -> list[str]:
    return sorted(p.stem for p in WEIGHTS_DIR.glob("*.json"))


def check_judge(name: str, *, where: str = "--recovery-judge") -> str:
    """``name`` as recorded (``calibrated`` alone names the default weights); ConfigError otherwise."""
    if name == MODEL_JUDGE:
        return name
    kind, _, weights = name.partition(":")
    if kind == CALIBRATED_PREFIX:
        weights = weights or DEFAULT_JUDGE
        if weights in known_calibrated():
            return f"{CALIBRATED_PREFIX}:{weights}"
    raise ConfigError(f"{where} {name!r}: use model (the recovery_judge role's model, the paper's judge) or "
                      f"calibrated[:NAME] (a judge trained on the paper's judgments; shipped: "
                      f"{', '.join(known_calibrated())}).")


def default_judge(framing: Framing) -> str:
    """The embedded framing's default is the calibrated judge; the release's is the model."""
    return f"{CALIBRATED_PREFIX}:{DEFAULT_JUDGE}" if framing == "embedded" else MODEL_JUDGE


def calibrated_name(judge: str) -> str | None:
    """The weights a ``calibrated:NAME`` judge uses; None for the model judge."""
    kind, _, weights = judge.partition(":")
    return weights or DEFAULT_JUDGE if kind == CALIBRATED_PREFIX else None


def judge_of(config: RecoveryConfig | Mapping[str, object]) -> str:
    """The judge a recording was scored with (``model`` when its header names none)."""
    return (config if isinstance(config, RecoveryConfig) else RecoveryConfig.of(config)).recovery_judge


def judge_error_sd(judge: str) -> float | None:
    """The judge's measured error on one case (SD of its difference from the paper's judge on
    held-out users), from the calibrated judge's card; None for a model judge (never measured here)."""
    from memprobe_engine.recovery.cross_judge import JudgeCard

    weights = calibrated_name(judge)
    if weights is None or weights not in known_calibrated():
        return None
    measured = JudgeCard.load(weights).held_out.get("error_sd")
    return float(measured) if isinstance(measured, (int, float)) else None
