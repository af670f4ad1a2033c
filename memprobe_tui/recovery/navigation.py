"""Protocol A's own routes between its screens (transcript, dimension inspector), typed, and its live
re-score hook, so the shared app knows none of them. A route goes through the app by name
(``Navigator.route``); the entry (``entry.py``) says which screen each name opens, so the screens never
import one another."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from textual.app import App
from textual.screen import Screen

from memprobe_engine.recovery.read import RescoreFunction, resolve_rescore
from memprobe_engine.replay import ReplaySession
from memprobe_tui.navigation import Navigator

if TYPE_CHECKING:
    from memprobe_engine.llm.config import LLMConfig

#: The name the app's live hooks hold the re-score under.
RESCORE = "rescore"


#: Route names (the entry maps each to its screen).
TRANSCRIPT, SWITCH_TRANSCRIPT, DIMENSION = "recovery.transcript", "recovery.switch_transcript", "recovery.dimension"


def open_transcript(app: App[Any], session: ReplaySession, user_id: str, system: str,
                    at: tuple[int, int] | None = None) -> None:
    cast(Navigator, app).route(TRANSCRIPT, session, user_id, system, at)


def switch_transcript(app: App[Any], screen: Screen[None], system: str, at: tuple[int, int]) -> None:
    cast(Navigator, app).route(SWITCH_TRANSCRIPT, screen, system, at)


def open_dimension(app: App[Any], session: ReplaySession, user_id: str, system: str, dimension: str | None,
                   layer: str | None = None) -> None:
    """The dimension inspector, showing the judgments of ``layer`` (None: the run's own, ``main``)."""
    cast(Navigator, app).route(DIMENSION, session, user_id, system, dimension, layer)


def rescore_of(app: App[Any]) -> RescoreFunction | None:
    """The app's re-score: the one ``memprobe replay`` built from its --model/--config, the engine's
    default when none was given, None when the app was opened without one (compare, tests)."""
    live: dict[str, object] = getattr(app, "live", {})
    if RESCORE not in live:
        return resolve_rescore()
    return cast("RescoreFunction | None", live[RESCORE])


def live_hooks(llm_config: object) -> dict[str, object]:
    """The re-score on the models the user chose (``memprobe replay --model``)."""
    import functools

    from memprobe_engine.recovery.rescore import rescore_dimension

    return {RESCORE: functools.partial(rescore_dimension, llm_config=cast("LLMConfig", llm_config))}
