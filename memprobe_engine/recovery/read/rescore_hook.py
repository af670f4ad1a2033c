"""Where a replay UI finds the engine's re-score (the contract itself lives in
``recovery/rescore_contract.py``; its types are re-exported here for the replay's callers)."""

from __future__ import annotations

from memprobe_engine.recovery.rescore_contract import RescoreFunction, RescoreRequest, RescoreSink


def resolve_rescore() -> RescoreFunction | None:
    """The engine's re-score function (protocol A's :func:`~memprobe_engine.recovery.rescore.rescore_dimension`)."""
    from memprobe_engine.recovery.rescore import rescore_dimension

    return rescore_dimension


__all__ = ["RescoreFunction", "RescoreRequest", "RescoreSink", "resolve_rescore"]
