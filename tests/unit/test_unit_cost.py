"""The order units start in (issue 35): the costliest first, by the plan's estimate. Protocol A weighs
a unit by its memory system's cost per turn and the turns that system will read — on the paper's two
released users, with their fixed dialogues, the model-writing ``amem`` units start before the others,
and of two units of one system the user with the longer dialogues goes first."""

from __future__ import annotations

from pathlib import Path

from memprobe_engine.llm.config import LLMConfig
from memprobe_engine.llm.spec import parse_spec
from memprobe_engine.orchestration.units import costliest_first, system_cost, unit_cost
from memprobe_engine.protocol_spec import RunCommon
from memprobe_engine.recovery.options import RecoveryOptions
from memprobe_engine.recovery.run_options import recovery_plan
from memprobe_engine.recovery.runner import RecoveryRun

ROOT = Path(__file__).resolve().parents[2]


def protocol(tmp_path: Path, dialogues: bool) -> RecoveryRun:
    config = LLMConfig(models={"default": parse_spec("openai:scripted@http://127.0.0.1:9/v1")})
    common = RunCommon(record=tmp_path / "r", sessions=ROOT / "sessions/release-a", systems="nomem,amem",
                       config=None, shard=(0, 1), seed=0, concurrency=4, embeddings=None, llm_config=config,
                       cache=None, ray=None)
    options = RecoveryOptions(users="user_001,user_002",
                              dialogues=str(ROOT / "sessions/release-a/dialogues") if dialogues else None)
    return RecoveryRun(recovery_plan(common, options))


def test_fixed_dialogue_units_are_ordered_by_system_and_turns(tmp_path: Path) -> None:
    recovery = protocol(tmp_path, dialogues=True)
    units = recovery.units()
    costs = {recovery.unit_label(u): unit_cost(recovery, u) for u in units}
    assert recovery.dialogues is not None
    turns = {user.user_id: sum(1 + len(recovery.dialogues.get(user.user_id, t.dimension).exchanges)
                               for t in user.tasks.tasks) for user, _ in units}
    assert turns["user_001"] != turns["user_002"]
    longer, shorter = sorted(turns, key=lambda user: -turns[user])
    order = [recovery.unit_label(units[i]) for i in costliest_first(recovery, units)]
    assert order == [f"{longer} × amem", f"{shorter} × amem", f"{longer} × nomem", f"{shorter} × nomem"], costs
    assert costs[f"{longer} × amem"] == system_cost("amem") * turns[longer]


def test_a_live_rollout_weighs_tasks_and_a_protocol_without_an_estimate_its_system(tmp_path: Path) -> None:
    recovery = protocol(tmp_path, dialogues=False)
    user, _ = recovery.units()[0]
    assert unit_cost(recovery, (user, "amem")) == system_cost("amem") * len(user.tasks.tasks)
    assert unit_cost(NoEstimate(), "an amem unit") == system_cost("amem")  # type: ignore[arg-type]


class NoEstimate:
    """A protocol without ``unit_cost``: only its units' keys."""

    def unit_key(self, unit: str) -> tuple[str, str]:
        return "u", "amem"
