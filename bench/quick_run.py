"""The README's quick run as a benchmark: switched off vs as shipped, on the embedded model.

    python bench/quick_run.py [--keep DIR] [--only off|shipped] [--reduced] [--no-ceiling] [--no-replay]
    python bench/quick_run.py --from DIR [--rates P,G]   # the figures of a --keep DIR run, again

Runs ``make demo``'s run command (its arguments come from ``make -s quick-args``, so the two cannot
drift apart) twice, each as a child process with no persistent response cache:

- **off**: one slot, llama.cpp's prompt cache off, no draft model, one unit at a time
  (``MEMPROBE_LOCAL_SLOTS=1 MEMPROBE_LOCAL_PROMPT_CACHE=0 MEMPROBE_LOCAL_DRAFT=none --concurrency 1``);
- **shipped**: the defaults, exactly as ``make demo`` runs.

For each it prints the wall time, the calls by role (both runs must do the same protocol work; a
difference is printed), prompt tokens evaluated vs served from the server's prefix cache, generated
tokens, aggregate tokens per second, where the time goes by role, and at the end the speed-up. A reference line gives raw llama.cpp
single-stream throughput on the same model (one request, the server's own timings), the ceiling a
strictly sequential pipeline could reach. Answers are sampled and batching changes floating-point sums, so
the two runs can take different branches (one more turn, an "unknown" that needs no judge); besides the
wall-time ratio the benchmark therefore prices each run's own requests at the ceiling's rates with nothing
reused, and prints the speed-up per unit of that work. Last, a **reuse bound** per run: what its
requests would cost if every prompt evaluated only the text no earlier prompt of the run shares — the
most any prefix cache could save on that job, since on two cores neither batching nor the draft model
adds throughput.

Then it replays the shipped run (every role on ``replay:`` that recording, so a request it does not
hold fails) and checks that the replay made no model call and that ``memprobe report`` prints the same
tables (CSV, byte for byte) for both: batching, slots and prompt reuse leave recorded answers exact.

``--reduced`` runs one dimension with a 2-turn cap instead (the same job otherwise) for a machine
where the full switched-off run would take too long: the simulator alone reads a ~4,000-token
persona and bank on every call, about two minutes each on two cores without the prompt cache.

The full job takes one to two hours switched off on an idle 2-core machine (a simulator reply cut by its
cap costs three full re-reads of the persona); run it on a quiet machine, its figures are wall times.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memprobe_engine.events.reader import open_recording  # noqa: E402
from memprobe_engine.llm.backends.slots import prompt_text  # noqa: E402
from memprobe_engine.llm.types import ChatMessage  # noqa: E402

MEMPROBE = Path(sys.executable).with_name("memprobe")
OFF_ENV = {"MEMPROBE_LOCAL_SLOTS": "1", "MEMPROBE_LOCAL_PROMPT_CACHE": "0", "MEMPROBE_LOCAL_DRAFT": "none"}
SERVING_ENV = (*OFF_ENV, "MEMPROBE_LOCAL_THREADS")


@dataclass
class RunFigures:
    """What one run of the quick job cost, read back from its recording."""

    name: str
    wall_s: float
    calls_by_role: Counter[str] = field(default_factory=Counter)
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    call_seconds: float = 0.0
    status: str | None = None
    by_role: dict[str, "RoleFigures"] = field(default_factory=dict)
    unshared_prompt_tokens: float = 0.0  # what no earlier prompt of the run shares: the most reuse can save

    @property
    def evaluated(self) -> int:
        return self.prompt_tokens - self.cached_prompt_tokens

    def lines(self) -> list[str]:
        calls = sum(self.calls_by_role.values())
        return [
            f"{self.name}: {self.wall_s:.0f} s wall, run_end {self.status}",
            f"  calls {calls} ({', '.join(f'{role} {n}' for role, n in sorted(self.calls_by_role.items()))})",
            f"  prompt tokens {self.prompt_tokens:,}: evaluated {self.evaluated:,}, served from the prefix cache "
            f"{self.cached_prompt_tokens:,} ({self.cached_prompt_tokens / max(1, self.prompt_tokens):.0%})",
            f"  generated tokens {self.completion_tokens:,}",
            f"  aggregate: {(self.evaluated + self.completion_tokens) / self.wall_s:.1f} tok/s processed "
            f"({self.evaluated / self.wall_s:.1f} prompt + {self.completion_tokens / self.wall_s:.1f} generated), "
            f"sum of call latencies {self.call_seconds:.0f} s = {self.call_seconds / self.wall_s:.1f}× the wall",
        ]


@dataclass
class RoleFigures:
    """One role's share of a run: where the wall time of the quick job goes."""

    calls: int = 0
    evaluated: int = 0
    cached: int = 0
    generated: int = 0
    seconds: float = 0.0


def role_lines(figures: RunFigures) -> list[str]:
    """Per role: calls, prompt tokens evaluated / reused, generated tokens, summed latency."""
    rows = sorted(figures.by_role.items(), key=lambda item: -item[1].seconds)
    total = sum(role.seconds for _, role in rows) or 1.0
    lines = [f"  where {figures.name}'s time goes (sum of call latencies by role; calls overlap, so it exceeds the wall):"]
    for name, role in rows:
        lines.append(f"    {name:<18} {role.calls:>3} calls  {role.seconds:>6.0f} s ({role.seconds / total:>4.0%})  "
                     f"prompt {role.evaluated:>6,} evaluated + {role.cached:>6,} reused  generated {role.generated:>5,}")
    return lines


def work_seconds(figures: RunFigures, prompt_rate: float, gen_rate: float) -> float:
    """The run's requested work priced at single-stream speed with nothing reused: every prompt token
    evaluated, every token generated. Two runs whose sampled answers differ (and so ask for different
    calls) are compared on this, not only on wall time."""
    return figures.prompt_tokens / prompt_rate + figures.completion_tokens / gen_rate


REDUCED_ARGS = ["--dims", "reply_layout", "--max-turns", "2"]  # a later flag overrides the Makefile's
_reduced = False
#: Which Makefile job: ``fixed`` (make demo: the paper user's fixed dialogues) or ``live`` (make demo-live).
_job = "fixed"


def quick_args() -> list[str]:
    """``make demo``'s run arguments, from the Makefile itself (then ``--reduced``'s overrides)."""
    target = "quick-args" if _job == "fixed" else "live-args"
    out = subprocess.run(["make", "-s", "--no-print-directory", target], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    return shlex.split(out.strip()) + (REDUCED_ARGS if _reduced and _job == "live" else [])


def score_lines(record: Path) -> list[str]:
    """Per-system B (both modes), every case's fill beside its ground truth, and for a live run how
    many simulator replies were in the user's voice and how many tasks disclosed their dimension."""
    from memprobe_engine.recovery.inputs import load_users
    from memprobe_engine.recovery.read.frames import load_frames
    from memprobe_engine.recovery.read.tables import table2
    from memprobe_engine.recovery.simulator_voice import out_of_role_reason

    frames = load_frames([record])
    lines = ["per-system B (full store / top-k): " + "; ".join(
        f"{r.system} {r.B_full_mean:.3f} / {r.B_topk_mean:.3f}" for r in table2(frames).itertuples())]
    with open_recording(record) as reader:
        config = reader.header.config
        fills = {(e.system, e.dimension, e.mode): e.label for e in reader.iter_events(kinds=["slot_fill"])}
        replies = [e.content for e in reader.iter_events(kinds=["message"]) if e.role == "user" and (e.turn or 0) > 0]
        unusable = sum(1 for e in reader.iter_events(kinds=["error"]) if e.error_type == "SimulatorReplyUnusable")
        stage1 = {(e.system, e.dimension): e.verdict for e in reader.iter_events(kinds=["attribution_stage"])
                  if e.stage == 1}
        episodes = sum(1 for _ in reader.iter_events(kinds=["episode_end"]))
    truth = {e.dimension: e.short for u in load_users(Path(config["sessions"]), config.get("users"))
             for e in u.bank.entries}
    lines.append(f"{'system':13} {'mode':9} {'dimension':24} {'score':>5}  fill  ⟷  ground truth")
    for r in frames.scores.itertuples():
        lines.append(f"{r.system:13} {r.mode:9} {r.dimension:24} {r.score:5.2f}  "
                     f"{fills.get((r.system, r.dimension, r.mode))!r}  ⟷  {truth.get(r.dimension)!r}")
    if "dialogues" not in config:
        in_voice = sum(1 for t in replies if out_of_role_reason(t) is None)
        lines.append(f"simulator replies in the user's voice: {in_voice} of {len(replies)} recorded"
                     f" ({unusable} unusable replies recorded)")
        disclosed = sum(1 for v in stage1.values() if v == "disclosed")
        lines.append(f"disclosure (attribution stage 1 'disclosed', per system × task judged): {disclosed} of "
                     f"{len(stage1)} judged; {episodes} episodes")
    return lines


def run_quick(name: str, record: Path, extra_env: dict[str, str], extra_args: list[str]) -> RunFigures:
    env = {key: value for key, value in os.environ.items() if key not in SERVING_ENV}
    env.update(extra_env)
    command = [str(MEMPROBE), "run", "--record", str(record), *quick_args(), "--no-cache", *extra_args]
    print(f"[{name}] {' '.join(f'{k}={v}' for k, v in extra_env.items())} {shlex.join(command[1:])}", flush=True)
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"[{name}] memprobe run failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return read_figures(name, record, wall)


def read_figures(name: str, record: Path, wall: float) -> RunFigures:
    figures = RunFigures(name=name, wall_s=wall)
    earlier: list[str] = []
    with open_recording(record) as reader:
        for _, data in reader.iter_dicts(["llm_call", "run_end"]):
            if data["kind"] == "run_end":
                figures.status = str(data.get("status"))
                continue
            if data.get("cache_hit") is True:
                continue  # shared with an identical request in flight: not protocol work of its own
            figures.calls_by_role[str(data.get("role"))] += 1
            usage = data.get("usage") or {}
            figures.prompt_tokens += int(usage.get("prompt_tokens", 0))
            figures.cached_prompt_tokens += int(usage.get("cached_prompt_tokens", 0))
            figures.completion_tokens += int(usage.get("completion_tokens", 0))
            figures.call_seconds += float(data.get("latency_s", 0.0))
            role = figures.by_role.setdefault(str(data.get("role")), RoleFigures())
            role.calls += 1
            role.cached += int(usage.get("cached_prompt_tokens", 0))
            role.evaluated += int(usage.get("prompt_tokens", 0)) - int(usage.get("cached_prompt_tokens", 0))
            role.generated += int(usage.get("completion_tokens", 0))
            role.seconds += float(data.get("latency_s", 0.0))
            text = prompt_text([ChatMessage(role=m["role"], content=str(
                m["content"] if m.get("content") is not None else reader.payload(m["content_ref"])))
                for m in data.get("messages") or []])
            shared = max((len(os.path.commonprefix((text, other))) for other in earlier), default=0)
            figures.unshared_prompt_tokens += (len(text) - shared) / max(1, len(text)) * int(usage.get("prompt_tokens", 0))
            earlier.append(text)
    return figures


def recorded_wall(record: Path) -> float:
    """The summed run_start → run_end segments of a kept recording (``--from``): a resumed run counts
    each process's run, not the pause between them; process start-up is not included."""
    total, started, segments = 0.0, None, 0
    with open_recording(record) as reader:
        for _, data in reader.iter_dicts(["run_start", "run_end"]):
            if data["kind"] == "run_start":
                started = float(data["time"])
            elif started is not None:
                total += float(data["time"]) - started
                started, segments = None, segments + 1
    if segments == 0:
        raise SystemExit(f"{record}: no finished run in this recording (no run_end); run the benchmark again")
    return total


@dataclass
class Ceiling:
    """Single-stream throughput of the embedded server with nothing reused (llama.cpp's own timings)."""

    tier: str
    prompt_rate: float
    gen_rate: float
    prompt_tokens: int
    gen_tokens: int

    def line(self) -> str:
        return (f"ceiling (raw llama.cpp, local:{self.tier}, one stream): {self.prompt_rate:.1f} prompt tok/s, "
                f"{self.gen_rate:.1f} generated tok/s ({self.prompt_tokens} + {self.gen_tokens} tokens)")


async def ceiling(tier: str) -> Ceiling:
    """Raw single-stream throughput of the embedded server, from llama.cpp's own timings."""
    from memprobe_engine.llm.backends.local import LocalBackend
    from memprobe_engine.llm.spec import ModelSpec
    from memprobe_engine.llm.types import ChatMessage, ChatRequest, SamplingParams

    backend = LocalBackend(ModelSpec(backend="local", model=tier, slots=1, prompt_cache=False, draft="none"))
    try:
        before = await backend.counters()
        text = " ".join(f"Note {i}: the user mentioned item {i} while planning a trip." for i in range(40))
        request = ChatRequest(model=tier, messages=(ChatMessage(role="user", content=text + "\nSummarize the notes."),),
                              params=SamplingParams(temperature=0.0, max_tokens=96))
        await backend.complete(request)
        after = await backend.counters()
    finally:
        await backend.aclose()
    prompt = (after.prompt_tokens - before.prompt_tokens) / max(1e-9, after.prompt_seconds - before.prompt_seconds)
    gen = (after.predicted_tokens - before.predicted_tokens) / max(1e-9,
                                                                 after.predicted_seconds - before.predicted_seconds)
    return Ceiling(tier=tier, prompt_rate=prompt, gen_rate=gen, prompt_tokens=after.prompt_tokens - before.prompt_tokens,
                   gen_tokens=after.predicted_tokens - before.predicted_tokens)


REPLAY_ROLES = ("default", "slot_filler", "recovery_judge", "attribution_judge")  # every role quick.toml sets


def verify_replay(shipped: Path, work: Path) -> str:
    """Re-run the quick job answered from ``shipped``; compare the report tables of both."""
    record = work / "replay"
    shutil.rmtree(record, ignore_errors=True)
    overrides = [arg for role in REPLAY_ROLES for arg in ("--model", f"{role}=replay:{shipped}")]
    command = [str(MEMPROBE), "run", "--record", str(record), *quick_args(), "--no-cache", *overrides]
    done = subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        return f"replay: FAILED (exit {done.returncode}): {done.stderr.strip().splitlines()[-1:]}"
    with open_recording(record) as reader:
        backends = Counter(str(data.get("backend")) for _, data in reader.iter_dicts(["llm_call"]))
    tables = {}
    for name, folder in (("shipped", shipped), ("replay", record)):
        out = work / f"report-{name}"
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run([str(MEMPROBE), "report", str(folder), "--csv", str(out)], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Rows name the recording they come from; that column is the one expected difference.
        tables[name] = {path.name: path.read_bytes().replace(str(folder).encode(), b"RECORDING")
                        for path in sorted(out.glob("*.csv"))}
    same = tables["shipped"] == tables["replay"] and bool(tables["shipped"])
    live = sum(n for backend, n in backends.items() if backend != "replay")
    return (f"replay of the shipped run: {sum(backends.values())} calls, {live} sent to a live model; report tables "
            f"{'identical' if same else 'DIFFERENT'} ({len(tables['shipped'])} CSV files)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="write the two recordings here (default: a temporary folder)")
    parser.add_argument("--from", dest="source", type=Path,
                        help="print the figures of the off/ and shipped/ recordings a --keep run left in this folder "
                             "(wall = first run_start to last run_end), running nothing but the ceiling")
    parser.add_argument("--rates", help="with --from: PROMPT,GENERATED tok/s to price work with instead of "
                                         "measuring the ceiling (e.g. 35.9,11.4)")
    parser.add_argument("--only", choices=("off", "shipped"), help="run one configuration only")
    parser.add_argument("--no-ceiling", action="store_true", help="skip the raw-throughput reference")
    parser.add_argument("--no-replay", action="store_true", help="skip replaying the shipped run")
    parser.add_argument("--reduced", action="store_true",
                        help=f"live job: append {' '.join(REDUCED_ARGS)} to it")
    parser.add_argument("--job", choices=("fixed", "live"), default="fixed",
                        help="fixed: make demo's fixed-dialogue job (default); live: make demo-live's on-policy job")
    args = parser.parse_args()
    global _reduced, _job
    _reduced, _job = args.reduced, args.job
    results: dict[str, RunFigures] = {}
    reference: Ceiling | None = None
    if args.source is not None:
        for name in ("off", "shipped"):
            if (args.source / name / "header.json").is_file():
                results[name] = read_figures(name, args.source / name, recorded_wall(args.source / name))
                print("\n".join(results[name].lines() + role_lines(results[name])
                                + score_lines(args.source / name)), flush=True)
        if args.rates:
            prompt_rate, gen_rate = (float(x) for x in args.rates.split(","))
            reference = Ceiling(tier="1.5b", prompt_rate=prompt_rate, gen_rate=gen_rate, prompt_tokens=0, gen_tokens=0)
        elif not args.no_ceiling:
            reference = asyncio.run(ceiling("1.5b"))
            print(reference.line(), flush=True)
        compare(results, reference)
        if len(results) == 1 and reference is not None:
            print_reuse_bound(results, reference)
        return
    work = args.keep or Path(tempfile.mkdtemp(prefix="memprobe-quick-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        if args.only in (None, "off"):
            shutil.rmtree(work / "off", ignore_errors=True)
            results["off"] = run_quick("off", work / "off", OFF_ENV, ["--concurrency", "1"])
            print("\n".join(results["off"].lines() + role_lines(results["off"]) + score_lines(work / "off")),
                  flush=True)
        if args.only in (None, "shipped"):
            shutil.rmtree(work / "shipped", ignore_errors=True)
            results["shipped"] = run_quick("shipped", work / "shipped", {}, [])
            print("\n".join(results["shipped"].lines() + role_lines(results["shipped"])
                            + score_lines(work / "shipped")), flush=True)
            if not args.no_replay:
                print(verify_replay(work / "shipped", work), flush=True)
        if not args.no_ceiling:
            reference = asyncio.run(ceiling("1.5b"))
            print(reference.line(), flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    compare(results, reference)


def compare(results: dict[str, RunFigures], reference: Ceiling | None) -> None:
    """The speed-up, on wall time and, where the sampled answers led to other calls, on priced work."""
    if len(results) != 2:
        return
    off, shipped = results["off"], results["shipped"]
    same = off.calls_by_role == shipped.calls_by_role
    print(f"same protocol work (calls by role): {'yes' if same else 'NO'}")
    if not same:
        roles = sorted(set(off.calls_by_role) | set(shipped.calls_by_role))
        print("  " + ", ".join(f"{r} {off.calls_by_role[r]}→{shipped.calls_by_role[r]}" for r in roles))
    print(f"speed-up of shipped over off: {off.wall_s / shipped.wall_s:.2f}× "
          f"({off.wall_s:.0f} s → {shipped.wall_s:.0f} s)")
    if reference is not None:
        # Answers are sampled (temperature 0.7, fixed seed), and batching changes the floating-point sums,
        # so the two runs may take different branches (a longer reply, an "unknown" needing no judge).
        # Pricing each run's own requests at the ceiling's rates compares them per unit of work asked.
        off_work = work_seconds(off, reference.prompt_rate, reference.gen_rate)
        shipped_work = work_seconds(shipped, reference.prompt_rate, reference.gen_rate)
        ratio = (shipped_work / shipped.wall_s) / (off_work / off.wall_s)
        print(f"work asked, priced at the ceiling with nothing reused: off {off_work:.0f} s, shipped "
              f"{shipped_work:.0f} s; speed-up per unit of work: {ratio:.2f}×")
    if reference is not None:
        print_reuse_bound(results, reference)


def print_reuse_bound(results: dict[str, RunFigures], reference: Ceiling) -> None:
    """The most prefix reuse could give on a run's own requests: every prompt evaluates only what no
    earlier prompt of the run shares, generation stays as it was, nothing else costs time."""
    for figures in results.values():
        nothing_reused = work_seconds(figures, reference.prompt_rate, reference.gen_rate)
        all_reused = (figures.unshared_prompt_tokens / reference.prompt_rate
                      + figures.completion_tokens / reference.gen_rate)
        print(f"reuse bound on {figures.name}'s requests: {figures.unshared_prompt_tokens:,.0f} of "
              f"{figures.prompt_tokens:,} prompt tokens are shared with no earlier prompt; at the ceiling's rates "
              f"{nothing_reused:.0f} s with nothing reused vs {all_reused:.0f} s with everything reused: at most "
              f"{nothing_reused / max(1e-9, all_reused):.2f}× from prefix reuse")


if __name__ == "__main__":
    main()
