"""The cost table ``memprobe run --dry-run`` and ``memprobe report`` print: calls and tokens per role
(estimated as low–high with the expected value; actual after a run), cost at the given prices, and
for roles on the embedded model the wall time at this machine's measured rates."""

from __future__ import annotations

import time
from pathlib import Path

from rich import box
from rich.console import Console
from rich.table import Table

from memprobe_engine.llm.config import DEFAULT_ROLE, LLMConfig, normalize_role
from memprobe_engine.llm.pricing import Price, price_of
from memprobe_engine.llm.rates import load_rates
from memprobe_engine.llm.usage_estimate import CostEstimate, RoleEstimate, Span3

#: Actual use per role: (calls, prompt tokens, completion tokens).
Actual = dict[str, tuple[int, int, int]]


def _n(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1e6:.1f}M"
    return f"{value / 1000:.1f}k" if value >= 10_000 else f"{value:,.0f}"


def _span(span: Span3) -> str:
    return f"~{_n(span.expected)} ({_n(span.low)}–{_n(span.high)})"


def _money(value: float | None) -> str:
    return "-" if value is None else "0" if value == 0 else f"{value:.3g}"


def print_estimate(estimate: CostEstimate, llm_config: LLMConfig, prices: dict[str, Price],
                   console: Console, actual: Actual | None = None) -> None:
    """One row per role; with ``actual``, the run's own use beside the estimate."""
    title = ("tokens (prompt+completion) per role: the estimate beside the run's actual use" if actual is not None
             else "cost estimate per role: ~expected (low–high); models as above")
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    columns = ("role", "calls", "prompt tokens", "completion", "cost") if actual is None else \
        ("role", "calls est.", "calls", "tokens est.", "tokens", "cost est.", "cost")
    for name in columns:
        table.add_column(name, no_wrap=name == "role")
    total = Span3()
    total_cost = Span3()
    seconds = Span3()
    local_missing: set[str] = set()
    used_rates: dict[str, str] = {}
    roles = list(estimate.roles)
    roles += [r for r in (actual or {}) if r not in roles]
    for role in roles:
        # A recording whose header names no model for a role (an import re-scored later) still prints.
        spec = llm_config.models.get(normalize_role(role)) or llm_config.models.get(DEFAULT_ROLE)
        guess = estimate.roles.get(role) or RoleEstimate(role)
        price = price_of(prices, role)
        total.add(guess.prompt_tokens.low + guess.completion_tokens.low,
                  guess.prompt_tokens.expected + guess.completion_tokens.expected,
                  guess.prompt_tokens.high + guess.completion_tokens.high)
        cost = None
        if price is not None:
            cost = Span3(price.cost(guess.prompt_tokens.low, guess.completion_tokens.low),
                         price.cost(guess.prompt_tokens.expected, guess.completion_tokens.expected),
                         price.cost(guess.prompt_tokens.high, guess.completion_tokens.high))
            total_cost.add(cost.low, cost.expected, cost.high)
        if spec is not None and spec.backend == "local":
            rates = load_rates(spec.model)
            if rates is None:
                local_missing.add(spec.model)
            else:
                when = time.strftime("%Y-%m-%d %H:%M", time.localtime(rates.measured))
                used_rates[rates.tier] = f"{rates.tier}: {rates.prompt_tok_s:.1f} prompt / {rates.gen_tok_s:.1f} " \
                                         f"generated tok/s, measured {when}"
                seconds.add(rates.seconds(guess.prompt_tokens.low, guess.completion_tokens.low),
                            rates.seconds(guess.prompt_tokens.expected, guess.completion_tokens.expected),
                            rates.seconds(guess.prompt_tokens.high, guess.completion_tokens.high))
        if actual is None:
            table.add_row(role, _span(guess.calls), _span(guess.prompt_tokens), _span(guess.completion_tokens),
                          "-" if cost is None else f"~{_money(cost.expected)} ({_money(cost.low)}–{_money(cost.high)})")
            continue
        calls, prompt, completion = actual.get(role, (0, 0, 0))
        table.add_row(role, f"~{_n(guess.calls.expected)}", f"{calls:,}",
                      f"~{_n(guess.prompt_tokens.expected)}+{_n(guess.completion_tokens.expected)}",
                      f"{prompt:,}+{completion:,}", "-" if cost is None else f"~{_money(cost.expected)}",
                      _money(price.cost(prompt, completion)) if price is not None else "-")
    console.print(table)
    console.print(f"tokens in all: {total.low:,.0f}–{total.high:,.0f} (~{total.expected:,.0f})"
                  + (f"; cost {_money(total_cost.low)}–{_money(total_cost.high)} (~{_money(total_cost.expected)})"
                     if prices else "; no prices given (--price ROLE=IN/OUT per million tokens, or \\[prices] in "
                                    "the config)"))
    if actual is not None:
        used = sum(p + c for _, p, c in actual.values())
        console.print(f"actual tokens in all: {used:,} ({used / total.expected:.0%} of the expected estimate)"
                      if total.expected else f"actual tokens in all: {used:,}")
    if seconds.expected:
        console.print(f"embedded model at this machine's measured rates ({'; '.join(used_rates.values())} by "
                      f"memprobe doctor; one stream, no prefix reuse, so an upper figure for the cache-friendly "
                      f"embedded framing): {seconds.low / 60:,.1f}–{seconds.high / 60:,.1f} min "
                      f"(~{seconds.expected / 60:,.1f})"
                      + (f"; not counted: {', '.join(sorted(local_missing))} (no measured rates; `memprobe doctor` "
                         f"measures the default tier)" if local_missing else ""))
    elif local_missing:
        console.print("embedded model: no measured rates on this machine yet; `memprobe doctor` measures them "
                      "(then the dry run gives the wall time)")
    for note in estimate.notes:
        console.print(f"note: {note}")


def actual_use(recording: Path) -> Actual:
    """Calls and tokens per role the recording's ``llm_call`` events report (answers served from the
    cache included: their tokens are what the run asked for), each call once however many sessions
    the run took (a resume's replay of an interrupted unit is not counted again: ``events.run_use``)."""
    from memprobe_engine.events.run_use import run_calls

    found: dict[str, list[int]] = {}
    for event in run_calls(recording):
        row = found.setdefault(event.role, [0, 0, 0])
        row[0] += 1
        if event.usage is not None:
            row[1] += event.usage.prompt_tokens or 0
            row[2] += event.usage.completion_tokens or 0
    return {role: (calls, prompt, completion) for role, (calls, prompt, completion) in found.items()}


def print_recording_cost(recording: Path, prices: dict[str, Price], console: Console) -> None:
    """The estimate a run's header describes (protocol A or B), beside what the run used."""
    from memprobe_engine.errors import MemProbeError
    from memprobe_engine.events.header import read_header
    from memprobe_engine.events.header_config import HeaderConfig
    from memprobe_engine.llm.config import LLMConfig
    from memprobe_engine.llm.spec import parse_spec

    header = read_header(recording)
    actual = actual_use(recording)
    try:
        from memprobe_engine.protocols import spec_of

        estimate = spec_of(header).estimate_of(recording, header)
    except MemProbeError as err:
        estimate = CostEstimate(roles={}, notes=[f"{recording}: no estimate ({err})"])
    if estimate is None:
        if not actual:
            return
        estimate = CostEstimate(roles={}, notes=[f"{recording}: no estimate (an imported run, or its sessions "
                                                 f"folder is not here)"])
    specs = {role: parse_spec(spec) for role, spec in HeaderConfig.of(header).models.specs().items() if spec}
    console.print(f"[bold]{recording}[/]: tokens and cost per role")
    print_estimate(estimate, LLMConfig(models=specs), prices, console, actual=actual)
    if HeaderConfig.of(header).merged_from:  # shards that shared no cache paid twice for some requests
        from memprobe_engine.events.merged import asked_twice

        line = asked_twice(recording).line()
        if line:
            console.print(line, soft_wrap=True)
