"""``memprobe doctor``: check that this machine can run benchmarks, and measure how fast.

Each check says what it found and, when it failed, what to do. The checks go from cheap to
expensive: Python and package versions; the embedded model file (assembled if needed, then fully
re-hashed, because a corrupted 1 GB file otherwise shows up only as nonsense scores); one real
schema-constrained call to the embedded model through :class:`LocalBackend`, measuring prompt and
generation throughput from llama.cpp's own counters; the embedding model; and any configured
OpenAI-compatible endpoints (``GET <base_url>/models``, no key sent, so none can leak).
A failed check never stops the later ones, except those that need what failed.
"""

from __future__ import annotations

import asyncio
import json
import platform
import sys
import time
import urllib.error
import urllib.request
from importlib import metadata
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel
from rich.table import Table
from rich.text import Text

from memprobe_engine.errors import MemProbeError
from memprobe_engine.llm.model_assets import DEFAULT_TIER, INSTALL_HINT, REINSTALL_HINT, ensure_model, resolve_tier
from memprobe_engine.llm.types import ChatMessage, ChatRequest, SamplingParams

MIN_PYTHON = (3, 11)
ENDPOINT_TIMEOUT_S = 5.0
#: Required packages, then the ``local`` extra's, with the pins the design relies on.
CORE_PACKAGES = ("textual", "pydantic", "orjson", "openai", "pandas", "typer")
LOCAL_PACKAGES: dict[str, str | None] = {"xllamacpp": "2026.10.11549", "torch": "2.13.0",
                                         "sentence-transformers": None}

_JUDGE_SCHEMA = {
    "type": "object",
    "properties": {"reason": {"type": "string", "maxLength": 160},
                   "score": {"type": "integer", "minimum": 1, "maximum": 5}},
    "required": ["reason", "score"],
    "additionalProperties": False,
}
_JUDGE_PROMPT = (
    "You grade how well an assistant remembered a user's preference.\n"
    "Preference stated earlier: the user is vegetarian and dislikes mushrooms.\n"
    "Assistant's later suggestion: a lentil curry with spinach, no mushrooms.\n"
    "First give a one-sentence reason, then a score from 1 (forgot) to 5 (fully respected).")


class DoctorCheck(BaseModel):
    """One line of the report. ``fix`` is empty when ``ok``."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


class DoctorReport(BaseModel):
    """All checks, plus the raw figures (seconds, tokens/s, MB) for scripts and bug reports."""

    checks: list[DoctorCheck]
    measurements: dict[str, float] = {}

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)


def run_doctor(check_endpoints: list[tuple[str, str]] | None = None, tier: str = DEFAULT_TIER) -> DoctorReport:
    """Run every check from synchronous code (the CLI). ``check_endpoints``: (label, base_url) pairs."""
    from memprobe_engine.orchestration.prompt_exit import run_interruptible

    # SIGTERM ends it as Ctrl-C does (one line, exit 143), without waiting for a model check's thread.
    return run_interruptible(run_doctor_async(check_endpoints, tier))


async def run_doctor_async(check_endpoints: list[tuple[str, str]] | None = None,
                           tier: str = DEFAULT_TIER) -> DoctorReport:
    """Run every check from async code (the TUI's worker)."""
    measurements: dict[str, float] = {}
    checks = [_check_python(), *_check_packages()]
    model_check = await asyncio.to_thread(_check_model, tier, measurements)
    checks.append(model_check)
    if model_check.ok:
        checks.append(await _check_round_trip(tier, measurements))
    else:
        checks.append(DoctorCheck(name=f"embedded model {tier} round trip", ok=False,
                                  detail="skipped: the model file is not available", fix=model_check.fix))
    checks.append(await _check_embeddings(measurements))
    if check_endpoints:
        checks.extend(await asyncio.gather(*(asyncio.to_thread(_check_endpoint, label, url)
                                             for label, url in check_endpoints)))
    return DoctorReport(checks=checks, measurements=measurements)


def render_doctor(report: DoctorReport) -> Table:
    """A rich Table of the report; readable without colour (status is a word, not only a colour)."""
    failed = sum(1 for check in report.checks if not check.ok)
    table = Table(title="memprobe doctor", show_lines=False, expand=False)
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("detail", overflow="fold")
    if failed:  # an empty column would only squeeze the details in an 80-column terminal
        table.add_column("fix", overflow="fold")
    for check in report.checks:
        status = Text("ok", style="green") if check.ok else Text("FAIL", style="bold red")
        cells = [Text(check.name), status, Text(check.detail)]  # Text: details are never parsed as markup
        if failed:
            cells.append(Text(check.fix))
        table.add_row(*cells)
    table.caption = "all checks passed" if failed == 0 else f"{failed} check(s) failed: see the fix column"
    return table


def _check_python() -> DoctorCheck:
    version = platform.python_version()
    ok = sys.version_info[:2] >= MIN_PYTHON
    return DoctorCheck(name="python", ok=ok, detail=f"{version} ({sys.executable})",
                       fix="" if ok else f"Use Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer in a fresh venv.")


def _check_packages() -> list[DoctorCheck]:
    checks: list[DoctorCheck] = []
    for name in CORE_PACKAGES:
        version = _version(name)
        checks.append(DoctorCheck(
            name=f"package {name}", ok=version is not None, detail=version or "not installed",
            fix="" if version else f"Reinstall MemProbe with its dependencies: pip install --force-reinstall memprobe "
                                   f"(or `pip install {name}`)."))
    for name, pin in LOCAL_PACKAGES.items():
        version = _version(name)
        if version is None:
            checks.append(DoctorCheck(name=f"package {name}", ok=False, detail="not installed (local extra)",
                                      fix=f"Install the embedded offline stack: {INSTALL_HINT}"))
            continue
        matches = pin is None or version.split("+")[0] == pin
        checks.append(DoctorCheck(
            name=f"package {name}", ok=matches, detail=version if matches else f"{version}, expected {pin}",
            fix="" if matches else f"Install the pinned version: {INSTALL_HINT} (it pins {name}=={pin})."))
    return checks


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _check_model(tier: str, measurements: dict[str, float]) -> DoctorCheck:
    """Assemble if needed, then hash every byte (blocking; runs in a worker thread)."""
    name = f"embedded model {tier}"
    try:
        spec = resolve_tier(tier)
        result = ensure_model(spec.name, verify_full=True)
    except MemProbeError as err:
        return DoctorCheck(name=name, ok=False, detail=str(err), fix=REINSTALL_HINT)
    measurements["model_verify_s"] = round(result.seconds, 2)
    how = "assembled from the part packages and verified" if result.assembled else "sha256 verified"
    return DoctorCheck(name=name, ok=True,
                       detail=f"{spec.description}, {result.size / 1e9:.2f} GB at {result.path}; {how} in "
                              f"{result.seconds:.1f} s")


async def _check_round_trip(tier: str, measurements: dict[str, float]) -> DoctorCheck:
    """Start the server, make one schema-constrained call, and measure prompt/generation speed."""
    name = f"embedded model {tier} round trip"
    from memprobe_engine.llm.backends.local import LocalBackend
    from memprobe_engine.llm.spec import parse_spec

    request = ChatRequest(model=tier, messages=(ChatMessage(role="user", content=_JUDGE_PROMPT),),
                          params=SamplingParams(temperature=0.0, max_tokens=96), response_schema=_JUDGE_SCHEMA)
    backend: LocalBackend | None = None
    try:
        backend = LocalBackend(parse_spec(f"local:{tier}", origin="memprobe doctor"))
        started = time.monotonic()
        await backend.start()
        start_s = time.monotonic() - started
        before = await backend.counters()
        started = time.monotonic()
        result = await backend.complete(request)
        wall_s = time.monotonic() - started
        after = await backend.counters()
        # The same prompt again, one token only: with the prompt cache on, the server should evaluate
        # almost none of it (a full second answer would only add generation time to every doctor run).
        repeat = await backend.complete(request.model_copy(update={"params": SamplingParams(temperature=0.0,
                                                                                          max_tokens=1)}))
        serving, server = backend.serving, backend.server
        rss = _rss_mb()
    except MemProbeError as err:
        return DoctorCheck(name=name, ok=False, detail=str(err),
                           fix=f"Follow the message; if it persists, reinstall: {REINSTALL_HINT}")
    finally:
        if backend is not None:
            await backend.aclose()
    prompt_n = after.prompt_tokens - before.prompt_tokens
    gen_n = after.predicted_tokens - before.predicted_tokens
    prompt_s = after.prompt_seconds - before.prompt_seconds
    gen_s = after.predicted_seconds - before.predicted_seconds
    if prompt_s > 0 and gen_s > 0:
        prompt_rate, gen_rate, source = prompt_n / prompt_s, gen_n / gen_s, "llama.cpp timings"
    else:  # counters did not move (e.g. an older runtime): estimate from usage over wall time
        prompt_n, gen_n = result.usage.prompt_tokens, result.usage.completion_tokens
        prompt_rate, gen_rate, source = prompt_n / wall_s, gen_n / wall_s, "usage over wall time (rough)"
    measurements.update(server_start_s=round(start_s, 2), prompt_tok_s=round(prompt_rate, 1),
                        gen_tok_s=round(gen_rate, 1), round_trip_s=round(wall_s, 2))
    if source == "llama.cpp timings":  # kept for `memprobe run --dry-run`'s wall-time estimate
        from memprobe_engine.llm.rates import save_rates

        save_rates(resolve_tier(tier).name, prompt_rate, gen_rate)
    if rss is not None:
        measurements["rss_mb"] = round(rss)
    reused = repeat.usage.cached_prompt_tokens
    measurements.update(slots=serving.slots, context_per_slot=server.n_ctx if server is not None else 0,
                        prompt_cache_reuse=round(reused / max(1, repeat.usage.prompt_tokens), 3))
    speed = (f"server ready in {start_s:.1f} s; prompt {prompt_rate:.0f} tok/s ({prompt_n} tok), generation "
             f"{gen_rate:.1f} tok/s ({gen_n} tok) from {source}; call {wall_s:.1f} s"
             + (f"; process RSS {rss / 1024:.1f} GB" if rss is not None else "")
             + f"; serving {serving.slots} slot(s) × {server.n_ctx if server is not None else '?'} tokens of context, "
               f"prompt cache {'on' if serving.prompt_cache else 'off'} (the same prompt again: {reused} of "
               f"{repeat.usage.prompt_tokens} tokens reused), draft {serving.draft or 'none'}")
    try:
        parsed = json.loads(result.text)
        valid = isinstance(parsed, dict) and set(parsed) == {"reason", "score"} and 1 <= int(parsed["score"]) <= 5
    except (ValueError, TypeError):
        valid = False
    if not valid:
        return DoctorCheck(name=name, ok=False, detail=f"{speed}; the answer broke the JSON schema: {result.text[:120]!r}",
                           fix=f"The runtime does not enforce response_format; reinstall the pinned runtime: {INSTALL_HINT}")
    return DoctorCheck(name=name, ok=True, detail=f"{speed}; JSON schema enforced")


async def _check_embeddings(measurements: dict[str, float]) -> DoctorCheck:
    name = "embeddings (st:minilm)"
    from memprobe_engine.llm.embeddings import Embedder, SentenceTransformerBackend

    embedder = Embedder(SentenceTransformerBackend(), use_cache=False)
    started = time.monotonic()
    try:
        vectors = await embedder.embed(["The user prefers window seats on long flights."])
    except MemProbeError as err:
        return DoctorCheck(name=name, ok=False, detail=str(err), fix=f"Install the local extra: {INSTALL_HINT}")
    finally:
        await embedder.aclose()
    seconds = time.monotonic() - started
    measurements["embed_load_s"] = round(seconds, 2)
    return DoctorCheck(name=name, ok=True, detail=f"{embedder.backend.model}, {vectors.shape[1]}-d; loaded and "
                                                  f"embedded one text in {seconds:.1f} s")


def _check_endpoint(label: str, base_url: str) -> DoctorCheck:
    """GET ``<base_url>/models`` without credentials (blocking; runs in a worker thread)."""
    shown = _redact_url(base_url)
    name = f"endpoint {label}"
    where = f"the URL of {label} (--model, MEMPROBE_MODEL*, or the config file's [models] table)"
    started = time.monotonic()
    try:
        with urllib.request.urlopen(_models_url(base_url), timeout=ENDPOINT_TIMEOUT_S) as response:
            body = response.read(1 << 20)
    except urllib.error.HTTPError as err:
        if err.code in (401, 403):
            return DoctorCheck(name=name, ok=True, detail=f"{shown} reachable; it requires an API key "
                                                           f"(HTTP {err.code}; doctor sends none)")
        hint = " A base URL usually ends in /v1." if err.code == 404 else ""
        return DoctorCheck(name=name, ok=False, detail=f"{shown}/models answered HTTP {err.code}",
                           fix=f"Check {where}.{hint}")
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        return DoctorCheck(name=name, ok=False, detail=f"{shown} unreachable ({reason})",
                           fix=f"Start the server, or fix {where}.")
    seconds = time.monotonic() - started
    return DoctorCheck(name=name, ok=True, detail=f"{shown} reachable in {seconds:.2f} s{_model_list(body)}")


def _models_url(base_url: str) -> str:
    """``<base_url>/models`` with any user:password removed (doctor sends no credentials)."""
    parts = urlsplit(base_url)
    netloc = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    if ":" in (parts.hostname or ""):  # an IPv6 literal needs its brackets back
        netloc = f"[{parts.hostname}]" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/") + "/models", parts.query, ""))


def _model_list(body: bytes) -> str:
    """``; serves: a, b, c`` from an OpenAI /models body, or nothing when it is not one."""
    try:
        data = json.loads(body)
        ids = [str(item["id"]) for item in data["data"]]
    except (ValueError, KeyError, TypeError):
        return ""
    more = f" (+{len(ids) - 5} more)" if len(ids) > 5 else ""
    return f"; serves: {', '.join(ids[:5])}{more}" if ids else "; serves no models"


def _redact_url(url: str) -> str:
    """The URL without user:password or query, so a credential written into a URL is never shown."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "<invalid URL>"
    netloc = parts.netloc
    if parts.username is not None or parts.password is not None:
        netloc = f"***@{parts.hostname or ''}" + (f":{port}" if port else "")
    query = "***" if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def _rss_mb() -> float | None:
    """This process's resident memory in MB (Linux), which includes the in-process model."""
    status = Path("/proc/self/status")
    if not status.exists():
        return None
    for line in status.read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return None
