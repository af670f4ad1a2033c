"""Protocol B's TUI entry: its episode list, its screens and its palette (named by the spec's ``tui`` line)."""

from __future__ import annotations

from typing import cast

from memprobe_tui.paradigms.commands import ParadigmCommands
from memprobe_tui.paradigms.episode_stepper import EpisodeScreen
from memprobe_tui.paradigms.overview import ParadigmOverviewScreen
from memprobe_tui.paradigms.probe_inspector import PROBE_RERUN, ProbeScreen
from memprobe_tui.tui_entry import TuiEntry


def live_hooks(llm_config: object) -> dict[str, object]:
    """The probe re-run on the models the user chose (``memprobe replay --model``)."""
    from memprobe_engine.llm.config import LLMConfig
    from memprobe_engine.paradigms.rerun import default_hook

    return {PROBE_RERUN: default_hook(cast(LLMConfig, llm_config))}


ENTRY = TuiEntry(overview=ParadigmOverviewScreen, screens=(ParadigmOverviewScreen, EpisodeScreen, ProbeScreen),
                 commands=(ParadigmCommands,), live_hooks=live_hooks)
