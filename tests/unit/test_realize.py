"""The realizer (`memprobe generate episodes`): plan, rules, regeneration, exclusion, resume.

A scripted author plays the model: it finds which planned session a request is for and writes a
dialogue that satisfies (or, where a test asks, breaks) that session's rules."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from memprobe_engine.errors import RecordingError
from memprobe_engine.events.reader import open_recording
from memprobe_engine.llm.config import LLMConfig
from memprobe_engine.llm.spec import parse_spec
from memprobe_engine.llm.types import ChatRequest
from memprobe_engine.paradigms.realize.plan import (
    SESSION_TYPES,
    SessionPlan,
    build_plan,
    readable_fact,
)
from memprobe_engine.paradigms.realize.prompts import reply_start, session_messages
from memprobe_engine.paradigms.realize.rules import adopts, check_session, mentions
from memprobe_engine.paradigms.realize.run import RealizeRequest, realize_suite
from memprobe_engine.paradigms.realize.writer import RealizeSettings, parse_turns, session_turns
from memprobe_engine.paradigms.suite import (
    LatentSpec,
    Turn,
    load_fact_types,
    load_specs,
    load_suite,
)
from tests.doubles import ScriptedBackend

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "sessions" / "paradigms" / "suite56-specs" / "latent_specs.json"
ALL = {s.episode_id: s for s in load_specs(SPECS)}
FACTS = load_fact_types(SPECS.parent / "value_pairs.json")
CONFIG = LLMConfig(models={"default": parse_spec("openai:scripted@http://127.0.0.1:9/v1")})


def good_dialogue(plan: SessionPlan, spec: LatentSpec) -> str:
    """A dialogue that satisfies every rule of ``plan``."""
    i, n, cur, other = spec.canonical_initial, spec.canonical_new, plan.current, plan.other
    kind, cond = plan.kind, spec.condition
    if kind == "encoding":
        return f"USER: I go to {i} most days, any tips?\nASSISTANT: Sure, here are a few ideas."
    if kind in ("weakly_related_background", "near_miss"):
        return "USER: Can you help me plan something this week?\nASSISTANT: Of course, let's start with a list."
    if kind == "confusable":
        return f"USER: My colleague raves about {other} for herself.\nASSISTANT: Sounds like it suits her."
    if kind == "decoy_nonupdate":
        return f"USER: Someone suggested {other}, but I'm sticking with {cur}.\nASSISTANT: Makes sense."
    if kind == "stale_reference":
        return f"USER: The old tracker still lists {other}.\nASSISTANT: That entry looks out of date."
    if kind == "perturbation_p1":
        return f"USER: I'm done with {i}; it stopped working for me, so I picked a new one.\nASSISTANT: Got it."
    if kind == "perturbation_p2":
        return f"USER: Heading to {n} again tonight, what should I bring?\nASSISTANT: Water and a towel."
    if spec.expected_behavior == "should_update":
        if cond == "direct":
            return f"USER: Quick note: it's {n} now.\nASSISTANT: Noted, {n} from now on."
        return f"USER: Remember {i}? I switched to {n} last week.\nASSISTANT: Got it, {n} it is."
    if cond == "assistant_noise":
        return f"ASSISTANT: Reminder: yours is {n}.\nUSER: No, it is still {i}.\nASSISTANT: Sorry, {i} it is."
    if cond == "stale_tool":
        return f"TOOL: value={n}\nUSER: That output is stale; it is still {i}.\nASSISTANT: Thanks, {i} noted."
    if cond == "direct_weak":
        return f"USER: A rumour says {n}, but I'm keeping {i}.\nASSISTANT: Understood."
    return f"USER: Recall it's {i}. Someone said {n}, but that's wrong; still {i}.\nASSISTANT: Understood."


def author(specs: list[LatentSpec], bad: Callable[[SessionPlan, int], bool] = lambda plan, attempt: False,
           fail_after: int | None = None) -> ScriptedBackend:
    """A backend that recognises each planned session from its prompt and answers it; ``bad`` says
    which (session, attempt) gets a rule-breaking reply; ``fail_after`` crashes after N requests."""
    keys: dict[str, tuple[SessionPlan, LatentSpec]] = {}
    for spec in specs:
        fact = readable_fact(spec, FACTS)
        for plan in [*build_plan(spec), *build_plan(spec, filler_cap=1)]:  # uncapped plans win on a tie
            for feedback in ([], ["retry"]):  # a retry is asked as an outline: another prompt
                keys.setdefault(_key(session_messages(plan, spec, fact, feedback)[1].content), (plan, spec))
    counter = {"n": 0}

    def reply(request: ChatRequest) -> str:
        counter["n"] += 1
        if fail_after is not None and counter["n"] > fail_after:
            raise RuntimeError("simulated crash")
        prompt = request.messages[-1].content
        plan, spec = keys[_key(prompt)]
        attempt = 1 if "Your previous attempt" in prompt else 0  # a retry shows the problems
        if bad(plan, attempt):
            return f"USER: I switched to {spec.canonical_new}.\nASSISTANT: ok"  # breaks most rules
        return good_dialogue(plan, spec)
    return ScriptedBackend(reply)


def _key(prompt: str) -> str:
    return prompt.split("\n\nYour previous attempt")[0].split("\n\nWrite only the dialogue")[0]


def realize(out: Path, ids: list[str], backend: ScriptedBackend, **settings: int) -> object:
    request = RealizeRequest(SPECS, out, ids, RealizeSettings(**settings), concurrency=2)  # type: ignore[arg-type]
    return asyncio.run(realize_suite(request, CONFIG, backend_factory=lambda spec: backend))


def test_plan_follows_the_filler_plan_and_split_order() -> None:
    spec = ALL["PILOT-19B"]
    plan = build_plan(spec)
    kinds = [p.kind for p in plan]
    assert kinds[:3] == ["encoding"] * 3
    pre = spec.filler_plan.pre_perturbation
    for kind in ("weakly_related_background", "near_miss", "confusable", "decoy_nonupdate"):
        assert kinds[3:18].count(kind) == pre[kind]
    p1, p2 = kinds.index("perturbation_p1"), kinds.index("perturbation_p2")
    assert p2 - p1 - 1 == 1  # interleave_fillers: 1
    assert [p.phase for p in plan[p2 + 1:]] == ["post_perturbation"] * spec.filler_plan.post_perturbation.total
    # After the update the user's value is the new one: a post decoy considers going back.
    post_decoy = next(p for p in plan[p2 + 1:] if p.kind == "decoy_nonupdate")
    assert (post_decoy.current, post_decoy.other) == (spec.canonical_new, spec.canonical_initial)
    assert build_plan(spec) == plan, "deterministic, so a resumed run asks the same requests"


def test_value_rules() -> None:
    assert mentions("Port 8080 is open.", "8080") and not mentions("port 18080", "8080")
    assert mentions("we meet at 9:30 AM", "9:30 AM") and mentions("I love CROSSFIT central!", "CrossFit Central")
    assert adopts("I switched to CrossFit Central last week", "CrossFit Central")
    assert not adopts("I'm not switching to CrossFit Central", "CrossFit Central")
    spec = ALL["PILOT-01A"]
    decoy = next(p for p in build_plan(spec) if p.kind == "decoy_nonupdate")
    confirms = [Turn(role="user", content="My friend said CrossFit Central is great, so I switched to "
                     "CrossFit Central from FitLife."), Turn(role="assistant", content="Nice!")]
    problems = check_session(decoy, confirms, spec)
    assert any("must not switch" in p for p in problems)
    encoding = build_plan(spec)[0]
    leaked = [Turn(role="user", content="I go to FitLife, not Planet Fitness or CrossFit Central."),
              Turn(role="assistant", content="ok")]
    problems = check_session(encoding, leaked, spec)
    assert '"CrossFit Central" must not appear in this session' in problems
    assert '"Planet Fitness" must not appear in this session' in problems  # distractor outside near-miss


def test_parse_turns_handles_tags_and_loops() -> None:
    text = "Sure! Here it is:\n[USER] hi there\nmore\n**Assistant:** hello\nTOOL: port=80\nUSER: hello\nUSER: x"
    turns = parse_turns(text)
    assert [(t.role, t.content) for t in turns] == [("user", "hi there\nmore"), ("assistant", "hello"),
                                                    ("tool_output", "port=80")]


def test_realizes_loadable_episodes_end_to_end(tmp_path: Path) -> None:
    ids = ["PILOT-01A", "PILOT-02B", "PILOT-19B", "PILOT-16A"]
    backend = author([ALL[i] for i in ids])
    summary = realize(tmp_path / "suite", ids, backend)
    suite = load_suite(tmp_path / "suite")
    assert sorted(e.episode_id for e in suite.episodes) == sorted(ids)
    assert {s.episode_id for s in suite.specs} == set(ids) and suite.fact_types
    split = suite.episode("PILOT-19B")
    assert split.is_split and [s.session_type for s in split.sessions].count("perturbation_p1") == 1
    assert len(split.sessions) == len(build_plan(ALL["PILOT-19B"]))
    assert [s.session_idx for s in split.sessions] == list(range(len(split.sessions)))
    noise = suite.episode("PILOT-02B")
    pert = next(s for s in noise.sessions if s.session_type == "perturbation")
    assert pert.dialogue[0].role == "assistant"
    assert [p.probe_type for p in noise.probes] == [p.type for p in ALL["PILOT-02B"].probes]
    assert noise.probes[0].gold is not None and noise.probes[0].gold.current_value == "March 28"
    stats = summary.stats  # type: ignore[attr-defined]
    assert stats.regenerations == 0 and stats.live_calls == len(backend.requests)
    # Background chats are generic per domain: the ones planned in several episodes are written once.
    assert stats.calls > stats.live_calls
    with open_recording(tmp_path / "suite" / "_generation") as reader:
        calls = list(reader.iter_events(kinds=["llm_call"]))
        checks = list(reader.iter_events(kinds=["realize_check"]))
    assert len(calls) == len(checks) == stats.calls
    assert {c.role for c in calls} == {"realizer", "realizer_strong"}


def test_regenerates_then_escalates_then_records_exclusions(tmp_path: Path) -> None:
    spec = ALL["PILOT-01A"]
    misses = [p.index for p in build_plan(spec) if p.kind == "near_miss"]
    # First near-miss: bad once, then fine. Second: always bad -> dropped. The rest stays fine.
    backend = author([spec], bad=lambda plan, attempt: (plan.index == misses[0] and attempt == 0)
                     or plan.index == misses[1])
    summary = realize(tmp_path / "suite", ["PILOT-01A"], backend, attempts=2, strong_attempts=1)
    stats = summary.stats  # type: ignore[attr-defined]
    episode = load_suite(tmp_path / "suite").episode("PILOT-01A")
    assert len(episode.sessions) == len(build_plan(spec)) - 1
    assert episode.metadata["dropped_sessions"][0]["planned_index"] == misses[1]
    strong_first = sum(p.kind == "decoy_nonupdate" for p in build_plan(spec))
    assert stats.regenerations == 1 + 2 and stats.dropped_sessions == 1
    assert stats.strong_sessions == strong_first + 1, "decoys start strong; one filler escalated"
    with open_recording(tmp_path / "suite" / "_generation") as reader:
        checks = [e for e in reader.iter_events(kinds=["realize_check"]) if e.session_idx in misses]
        exclusions = list(reader.iter_events(kinds=["realize_exclusion"]))
        roles = [e.role for e in reader.iter_events(kinds=["llm_call"])]
    assert [c.outcome for c in checks if c.session_idx == misses[0]] == ["retry", "accepted"]
    assert [(c.outcome, c.role) for c in checks if c.session_idx == misses[1]] == [
        ("retry", "realizer"), ("retry", "realizer"), ("failed", "realizer_strong")]
    assert all('"CrossFit Central" must not appear' in " ".join(c.problems)
               for c in checks if c.session_idx == misses[1])
    assert [(x.scope, x.session_idx) for x in exclusions] == [("session", misses[1])]
    assert roles.count("realizer_strong") == strong_first + 1


def test_failed_perturbation_excludes_the_episode(tmp_path: Path) -> None:
    backend = author([ALL["PILOT-02B"]], bad=lambda plan, attempt: plan.kind == "perturbation")
    summary = realize(tmp_path / "suite", ["PILOT-02B"], backend, attempts=1, strong_attempts=1)
    assert summary.stats.excluded_episodes == 1  # type: ignore[attr-defined]
    assert not (tmp_path / "suite" / "episodes.jsonl").exists()
    line = orjson.loads((tmp_path / "suite" / "excluded.jsonl").read_bytes().splitlines()[0])
    assert line["episode_id"] == "PILOT-02B" and "assistant must speak first" in line["reason"]
    again = author([ALL["PILOT-02B"]])
    realize(tmp_path / "suite", ["PILOT-02B"], again, attempts=1, strong_attempts=1)
    assert again.requests == [], "an excluded episode is not realized again on resume"
    # Tried again with the same requests, the recorded failures are served back: excluded once more,
    # at no cost, and listed once.
    request = RealizeRequest(SPECS, tmp_path / "suite", ["PILOT-02B"], RealizeSettings(attempts=1, strong_attempts=1),
                             retry_excluded=("PILOT-02B",))
    retried = asyncio.run(realize_suite(request, CONFIG, backend_factory=lambda spec: again))
    assert retried.stats.excluded_episodes == 1 and again.requests == []
    assert len((tmp_path / "suite" / "excluded.jsonl").read_bytes().splitlines()) == 1


def test_resume_repeats_no_finished_call(tmp_path: Path) -> None:
    ids = ["PILOT-01A", "PILOT-19B", "PILOT-03B"]
    specs = [ALL[i] for i in ids]
    first = author(specs, bad=lambda plan, attempt: plan.kind == "decoy_nonupdate" and attempt == 0, fail_after=30)
    with pytest.raises(RuntimeError, match="simulated crash"):
        realize(tmp_path / "suite", ids, first)
    with open_recording(tmp_path / "suite" / "_generation") as reader:
        ends = [e.status for e in reader.iter_events(kinds=["run_end"])]
        assert ends == ["failed"] and reader.damage.clean, "the crash closed every span and ended the run"
    answered = {(r.messages, r.params) for r in first.requests[:30]}
    second = author(specs, bad=lambda plan, attempt: plan.kind == "decoy_nonupdate" and attempt == 0)
    summary = realize(tmp_path / "suite", ids, second)
    asked = {(r.messages, r.params) for r in second.requests}
    assert asked and not (asked & answered), "no request answered before the crash is sent again"
    assert summary.resumed  # type: ignore[attr-defined]
    assert sorted(e.episode_id for e in load_suite(tmp_path / "suite").episodes) == sorted(ids)
    third = author(specs)
    realize(tmp_path / "suite", ids, third)
    assert third.requests == []
    reference = author(specs, bad=lambda plan, attempt: plan.kind == "decoy_nonupdate" and attempt == 0)
    realize(tmp_path / "ref", ids, reference)
    assert len(first.requests[:30]) + len(second.requests) == len(reference.requests)
    shutil.rmtree(tmp_path / "ref")


def test_resume_with_other_settings_is_refused(tmp_path: Path) -> None:
    realize(tmp_path / "suite", ["PILOT-03B"], author([ALL["PILOT-03B"]]))
    with pytest.raises(RecordingError, match="other settings or models"):
        realize(tmp_path / "suite", ["PILOT-03B"], author([ALL["PILOT-03B"]]), attempts=5)


@pytest.mark.parametrize(("args", "needle"), [
    (["--specs", "missing/latent_specs.json"], "cannot be read"),
    (["--specs", str(SPECS), "--episodes", "PILOT-01A,NOPE-9"], "--episodes: NOPE-9 not in"),
])
def test_cli_bad_input_is_one_clear_message(tmp_path: Path, args: list[str], needle: str) -> None:
    result = subprocess.run([sys.executable, "-c", "from memprobe_engine.cli import main; main()", "generate",
                             "episodes", *args, "--out", str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)
    assert result.returncode != 0 and needle in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


def test_filler_cap_scales_every_filler_group_but_keeps_each_type() -> None:
    spec = ALL["PILOT-10A"]
    full, capped = build_plan(spec), build_plan(spec, filler_cap=1)
    kinds = [p.kind for p in capped]
    assert kinds.count("encoding") == spec.num_encoding_sessions  # support is the manipulation: kept
    pre = kinds[3:kinds.index("perturbation_p1")]
    assert sorted(pre) == sorted(k for k, n in spec.filler_plan.pre_perturbation.items() if k != "total" and n)
    assert kinds[kinds.index("perturbation_p1") + 1:kinds.index("perturbation_p2")] == ["confusable"]
    assert [p.phase for p in capped].count("post_perturbation") == 1
    assert len(full) - len(capped) == (15 - 4) + (2 - 1) + (4 - 1)


def test_a_distractor_named_by_the_mention_context_is_planned_there() -> None:
    spec = ALL["PILOT-02A"]
    third = build_plan(spec)[2]
    assert "March 25" in third.brief
    turns = [Turn(role="user", content="Can my coauthor review by March 25, before the March 28 deadline?"),
             Turn(role="assistant", content="Yes, that leaves a buffer.")]
    assert check_session(third, turns, spec) == []
    assert "March 25" not in session_messages(third, spec, "the deadline", [])[1].content.split("Situation:")[0]


def test_resume_keeps_accepted_sessions_when_the_role_policy_changed(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    realize(tmp_path / "suite", ["PILOT-03B"], author([ALL["PILOT-03B"]]))
    (tmp_path / "suite" / "episodes.jsonl").unlink()  # redo the episode from the recording
    from memprobe_engine.paradigms.realize import writer as realize_module
    monkeypatch.setattr(realize_module, "STRONG_FIRST", frozenset(SESSION_TYPES))
    silent = author([ALL["PILOT-03B"]], fail_after=0)
    summary = realize(tmp_path / "suite", ["PILOT-03B"], silent)
    assert silent.requests == [] and summary.stats.reused == len(build_plan(ALL["PILOT-03B"]))  # type: ignore[attr-defined]
    assert load_suite(tmp_path / "suite").episode("PILOT-03B").sessions


def test_spec_file_follows_each_written_episode(tmp_path: Path) -> None:
    specs = [ALL["PILOT-01A"], ALL["PILOT-03B"]]
    reference = author(specs)
    realize(tmp_path / "ref", ["PILOT-03B", "PILOT-01A"], reference, filler_cap=1)
    with pytest.raises(RuntimeError):  # crash at the last request: the shorter episode is on disk
        realize(tmp_path / "suite", ["PILOT-03B", "PILOT-01A"], author(specs, fail_after=len(reference.requests) - 1),
                filler_cap=1)
    written = orjson.loads((tmp_path / "suite" / "latent_specs.json").read_bytes())["specs"]
    assert [s["episode_id"] for s in written] == ["PILOT-03B"]
    assert [s["episode_id"] for s in written] == [e.episode_id for e in load_suite(tmp_path / "suite").episodes]


def _turns(*pairs: tuple[str, str]) -> list[Turn]:
    return [Turn(role=role, content=text) for role, text in pairs]  # type: ignore[arg-type]


def test_confusable_and_decoy_fillers_never_confirm_a_change() -> None:
    spec = ALL["PILOT-01A"]
    plans = build_plan(spec, filler_cap=1)
    confusable = next(p for p in plans if p.kind == "confusable")
    decoy = next(p for p in plans if p.kind == "decoy_nonupdate")
    # The shipped PILOT-01A confusable that implied a switch: the user "got a new" subscription.
    owned = _turns(("user", "Hi there! I just got a new CrossFit Central subscription, and I'm wondering what to do."),
                   ("assistant", "Great! CrossFit Central is a great way to stay active."))
    assert any("not become the user's own" in p for p in check_session(confusable, owned, spec))
    # The assistant attributing the value to the user is a confirmation too (the 19C/19D confusable).
    port = ALL["PILOT-19C"]
    port_confusable = next(p for p in build_plan(port, filler_cap=1) if p.kind == "confusable")
    told = _turns(("user", "I need to set up a database service and want the correct port number."),
                  ("assistant", "Sure, the port number for the database service you're setting up is 8443."))
    assert any("not become the user's own" in p for p in check_session(port_confusable, told, port))
    # Someone else's value, said to be theirs, passes; with no owner named it does not.
    theirs = _turns(("user", "Jamie mentioned they just joined CrossFit Central and love the coaches."),
                    ("assistant", "Sounds like CrossFit Central suits Jamie."))
    assert check_session(confusable, theirs, spec) == []
    ownerless = _turns(("user", "CrossFit Central has long opening hours."), ("assistant", "Good to know."))
    assert any("say whose" in p for p in check_session(confusable, ownerless, spec))
    # A decoy must have the user keep their value, not just mention it.
    vague = _turns(("user", "Someone suggested CrossFit Central. Should I keep FitLife or change?"),
                   ("assistant", "Up to you."))
    assert any("say they keep" in p for p in check_session(decoy, vague, spec))
    declined = _turns(("user", "A friend keeps telling me to try CrossFit Central, but I'm sticking with FitLife."),
                      ("assistant", "Are you interested in trying out CrossFit Central?"))
    assert check_session(decoy, declined, spec) == []


def test_a_session_that_copies_its_outline_fails() -> None:
    spec = ALL["PILOT-19C"]
    plan = next(p for p in build_plan(spec, filler_cap=1) if p.kind == "confusable")
    prompt = session_messages(plan, spec, readable_fact(spec, FACTS), ["retry"])[1].content
    copied = _turns(("user", "talks about 8443 as someone else's; their own the port the database service runs on "
                     "(v2) is not changing and is not named"), ("assistant", "My friend's Kafka uses 8443."))
    assert any("copies the instructions" in p for p in check_session(plan, copied, spec, prompt))
    spoken = _turns(("user", "My colleague set her Kafka broker to 8443 for her own project."),
                    ("assistant", "That port suits her broker."))
    assert check_session(plan, spoken, spec, prompt) == []


def test_a_p1_turn_that_restates_its_outline_direction_fails() -> None:
    # The flaw of the first suites' split episodes: the P1 user turn was the stage direction itself,
    # with none of the instructions' own vocabulary in it.
    spec = ALL["PILOT-19A"]
    plan = next(p for p in build_plan(spec, filler_cap=1) if p.kind == "perturbation_p1")
    prompt = session_messages(plan, spec, readable_fact(spec, FACTS), [])[1].content
    restated = _turns(("user", 'Blue Bottle Coffee is no longer current and why, calling the replacement only '
                               '"the new one" (never its name).'), ("assistant", "Got it, the new one it is."))
    assert any("copies the instructions" in p for p in check_session(plan, restated, spec, prompt))
    spoken = _turns(("user", "My go-to coffee shop is no longer Blue Bottle Coffee: I found a new one that suits "
                             "me better, because it opens earlier."), ("assistant", "Makes sense."))
    assert check_session(plan, spoken, spec, prompt) == []


def test_a_session_that_narrates_its_instructions_fails() -> None:
    spec = ALL["PILOT-19C"]
    pert = next(p for p in build_plan(spec, filler_cap=1) if p.kind == "perturbation")
    narrated = _turns(("user", "Our database is on port 5432, right?"), ("assistant", "Yes."),
                      ("user", "A colleague found 8443 in an old config; include a [TOOL_OUTPUT] showing it."),
                      ("assistant", "That config is stale; production is still 5432."))
    assert any("do not repeat the instructions" in p for p in check_session(pert, narrated, spec))


def test_perturbations_and_retries_are_outlined_with_the_values() -> None:
    spec = ALL["PILOT-02B"]
    fact = readable_fact(spec, FACTS)
    pert = next(p for p in build_plan(spec, filler_cap=1) if p.kind == "perturbation")
    prompt = session_messages(pert, spec, fact, [])[1].content
    assert 'Turn 1 (ASSISTANT) gives a reminder that wrongly says' in prompt and '"April 15"' in prompt
    assert 'Turn 2 (USER) corrects it: it is still "March 28"' in prompt
    encoding = build_plan(spec, filler_cap=1)[0]
    first = session_messages(encoding, spec, fact, [])[1].content
    retry = session_messages(encoding, spec, fact, ['"March 28" must appear word for word'])[1].content
    assert "Turn 1" not in first and 'Turn 1 (USER) asks for help with this' in retry and "previous attempt" in retry


def test_session_turns_trims_extra_turns_and_a_cut_off_last_turn() -> None:
    text = "USER: a.\nASSISTANT: b.\nUSER: c.\nASSISTANT: d.\nUSER: e.\nASSISTANT: f."
    assert [t.content for t in session_turns(text)] == ["a.", "b.", "c.", "d."]
    cut = "USER: I moved to 3000.\nASSISTANT: Noted, 3000.\nUSER: Can you"
    assert [t.content for t in session_turns(cut)] == ["I moved to 3000.", "Noted, 3000."]
    two = "USER: I moved to 3000.\nASSISTANT: Noted, I will"
    assert len(session_turns(two)) == 2, "a two-turn session keeps its (checked) reply"


def test_a_preserve_perturbation_must_keep_the_value_in_a_statement() -> None:
    spec = ALL["PILOT-19D"]
    pert = next(p for p in build_plan(spec, filler_cap=1) if p.kind == "perturbation")
    prompt = session_messages(pert, spec, readable_fact(spec, FACTS), [])[1].content
    # The shipped 19D perturbation of the first run: the rumour confirmed, the old value only asked about.
    asked = _turns(("user", "I've heard the database service runs on port 8443. Am I correct?"),
                   ("assistant", "Yes, that's correct."), ("user", "Is 5432 the port the database service runs on?"))
    assert any('reaffirm "5432"' in p for p in check_session(pert, asked, spec, prompt))
    kept = _turns(("user", "Someone posted that the database might be on 8443 now, but I'm keeping 5432: that "
                   "post is unconfirmed."), ("assistant", "Understood, that output is stale, it is still 5432."))
    assert check_session(pert, kept, spec, prompt) == [], "following the plan in the first person is no copy"


def test_recheck_redoes_only_the_sessions_that_break_the_current_rules(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    spec = ALL["PILOT-03B"]
    from memprobe_engine.paradigms.realize import writer as realize_module
    # An older, looser rule set accepts a confusable filler that implies the switch (the PILOT-01A gap).
    monkeypatch.setattr(realize_module, "check_session", lambda *args, **kwargs: [])
    first = author([spec], bad=lambda plan, attempt: plan.kind == "confusable")
    realize(tmp_path / "suite", ["PILOT-03B"], first, filler_cap=1)
    monkeypatch.undo()
    again = author([spec])
    request = RealizeRequest(SPECS, tmp_path / "suite", ["PILOT-03B"], RealizeSettings(filler_cap=1), recheck=True)
    summary = asyncio.run(realize_suite(request, CONFIG, backend_factory=lambda s: again))
    assert summary.stats.episodes == 1 and summary.stats.reused == len(build_plan(spec, filler_cap=1)) - 1
    assert len(again.requests) == 1, "only the failing confusable is asked again (its old reply is replayed)"
    redone = load_suite(tmp_path / "suite").episode("PILOT-03B")
    fixed = next(s for s in redone.sessions if s.session_type == "filler_confusable")
    assert "colleague" in fixed.dialogue[0].content
    untouched = author([spec])
    realize(tmp_path / "suite", ["PILOT-03B"], untouched, filler_cap=1)
    assert untouched.requests == []


def test_on_a_prefill_backend_the_opening_is_sent_as_the_replys_start_and_resumes(tmp_path: Path) -> None:
    """llama.cpp continues a final assistant message: the realizer sends the opening words there
    and the session is the opening plus what the model wrote on; a resumed run reuses it."""
    spec = ALL["PILOT-03B"]
    fact = readable_fact(spec, FACTS)
    script = author([spec])

    def continue_or_answer(request: ChatRequest) -> str:
        last = request.messages[-1]
        if last.role != "assistant":  # no opening (a background filler): answered whole
            return str(script._script(request))  # type: ignore[operator]
        plan = next(p for p in build_plan(spec) if reply_start(p, spec, fact, []) == last.content)
        if last.content.endswith("\nASSISTANT:"):  # a whole-sentence opening (the decoy's refusal)
            assert plan.kind == "decoy_nonupdate"
            return " Makes sense, it stays."
        return " and I'd like your advice on it.\nASSISTANT: Of course." if plan.kind == "encoding" else (
            good_dialogue(plan, spec).partition("\n")[1] + good_dialogue(plan, spec).partition("\n")[2])
    backend = ScriptedBackend(continue_or_answer)
    local = LLMConfig(models={"default": parse_spec("local:fast")})
    request = RealizeRequest(SPECS, tmp_path / "suite", ["PILOT-03B"], RealizeSettings(attempts=1, strong_attempts=0))
    asyncio.run(realize_suite(request, local, backend_factory=lambda _spec: backend))
    opened = [r for r in backend.requests if r.messages[-1].role == "assistant"]
    assert opened and all(r.messages[-2].role == "user" for r in opened)
    assert any(r.messages[-1].content.endswith("\nASSISTANT:") for r in opened)
    episode = load_suite(tmp_path / "suite").episode("PILOT-03B")
    first = episode.sessions[0].dialogue[0].content
    assert first.startswith(reply_start(build_plan(spec)[0], spec, fact, [])[len("USER: "):])  # type: ignore[index]
    assert first.endswith("and I'd like your advice on it.")
    decoy = next(s for s in episode.sessions if s.session_type == "filler_decoy_nonupdate")
    assert [t.content for t in decoy.dialogue][1] == "Makes sense, it stays."
    (tmp_path / "suite" / "episodes.jsonl").unlink()  # redo it: every session comes back from the recording
    silent = ScriptedBackend(lambda request: RuntimeError("no call expected"))
    asyncio.run(realize_suite(request, local, backend_factory=lambda _spec: silent))
    assert silent.requests == [] and load_suite(tmp_path / "suite").episode("PILOT-03B") == episode
