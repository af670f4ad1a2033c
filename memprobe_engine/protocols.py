"""The registry of benchmark protocols: one line per built-in protocol, plus any a package registers.

A shared command asks :func:`spec_for` (by ``--suite`` name) or :func:`spec_of` (by a recording's
header) and dispatches through the :class:`~memprobe_engine.protocol_spec.ProtocolSpec` it gets. A
protocol outside MemProbe registers itself with an entry point in the ``memprobe.protocols`` group
naming its spec object (``mypkg.spec:SPEC``), the same way memory systems plug in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from importlib import metadata
from pathlib import Path

from memprobe_engine.errors import ConfigError, MemProbeError, RecordingError
from memprobe_engine.events.header import RecordingHeader, read_header
from memprobe_engine.events.header_config import TOOL_CONFIGS, HeaderConfig
from memprobe_engine.events.reader import DamageReport
from memprobe_engine.paradigms.spec import SPEC as PARADIGMS
from memprobe_engine.protocol_spec import ProtocolSpec
from memprobe_engine.recovery.spec import SPEC as RECOVERY
from memprobe_engine.replay.session import ReplaySession

#: The built-in protocols, by ``--suite`` name.
BUILT_IN: Mapping[str, ProtocolSpec] = {RECOVERY.name: RECOVERY, PARADIGMS.name: PARADIGMS}
#: The entry-point group a package registers a protocol in.
ENTRY_POINT_GROUP = "memprobe.protocols"
#: The protocol whose inputs a sessions path is read as when no protocol recognises it (``memprobe
#: sessions validate``), as ``memprobe run`` runs it without ``--suite``.
DEFAULT_SUITE = RECOVERY.name


@cache
def protocols() -> dict[str, ProtocolSpec]:
    """Every protocol: the built-in ones, then those registered by installed packages."""
    found = dict(BUILT_IN)
    for point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            spec = point.load()
        except Exception as err:  # a broken plug-in: name it, never hide it
            raise ConfigError(f"the protocol plug-in {point.name!r} ({point.value}) does not load: "
                              f"{type(err).__name__}: {err}. Fix or uninstall the package that registers it.") from None
        if not isinstance(spec, ProtocolSpec):
            raise ConfigError(f"the protocol plug-in {point.name!r} ({point.value}) is a {type(spec).__name__}, not a "
                              f"ProtocolSpec; point the entry point at the spec object.")
        if spec.name in found and found[spec.name] is not spec:
            raise ConfigError(f"the protocol plug-in {point.name!r} ({point.value}) reuses the name {spec.name!r}; "
                              f"a protocol's name must be its own.")
        found[spec.name] = spec
    return found


def spec_for(name: str) -> ProtocolSpec:
    """The protocol ``memprobe run --suite NAME`` runs."""
    found = protocols().get(name)
    if found is None:
        raise ConfigError(f"--suite {name!r}: use {_choices()}.")
    return found


def inputs_spec(path: Path) -> ProtocolSpec:
    """The protocol whose benchmark inputs ``path`` holds: the first that recognises them, else the default."""
    for spec in protocols().values():
        if spec.reads_inputs(path):
            return spec
    return spec_for(DEFAULT_SUITE)


def spec_of(header: RecordingHeader) -> ProtocolSpec:
    """The protocol that wrote a recording, from its header."""
    for spec in protocols().values():
        if spec.owns(header):
            return spec
    raise RecordingError(f"{header.run_id}: a {header.suite!r} recording, which no installed protocol reads "
                         f"(this MemProbe reads {_choices()}); install the package that ran it.")


def typed_config(header: RecordingHeader) -> HeaderConfig:
    """The header's config as its protocol's model (``spec.config_model``); a recording no protocol
    writes (``llm ask``, ``proxy``, ``generate``) as its tool's model, else as the shared base."""
    for spec in protocols().values():
        if spec.owns(header):
            return spec.config_of(header)
    return TOOL_CONFIGS.get(HeaderConfig.of(header).suite or header.suite, HeaderConfig).of(header)


def spec_of_recording(path: Path) -> ProtocolSpec:
    """The protocol of the recording folder ``path`` (its header is read and checked)."""
    return spec_of(read_header(path))


def one_protocol(recordings: Sequence[Path]) -> ProtocolSpec:
    """The one protocol every recording in ``recordings`` belongs to; a mix is refused, by name."""
    specs = {str(path): spec_of_recording(Path(path)) for path in recordings}
    names = {spec.name for spec in specs.values()}
    if len(names) > 1:
        groups = "; ".join(f"{name}: {', '.join(p for p, s in specs.items() if s.name == name)}"
                           for name in sorted(names))
        raise ConfigError(f"these recordings mix protocols ({groups}); give recordings of one protocol at a time.")
    return next(iter(specs.values()))


def open_session(path: Path | str) -> ReplaySession:
    """A recording opened for replay with its protocol's index folds, so the first pass feeds them."""
    try:
        folds = spec_of(read_header(Path(path))).index_folds()
    except RecordingError:
        folds = {}  # not a recording (open says so next), or a foreign suite: it still replays without folds
    return ReplaySession.open(path, folds)


def headline(path: Path) -> dict[str, float | None]:
    """A recording's headline numbers, as its protocol computes them (one index pass; run it in a worker)."""
    return headline_and_damage(path)[0]


def headline_and_damage(path: Path) -> tuple[dict[str, float | None], DamageReport | None]:
    """The headline numbers and the recording's integrity check (the same one ``recording verify`` and the
    replay banner run), from one open; ``({}, None)`` when the recording does not open."""
    try:
        session = open_session(path)
        spec = spec_of(session.header)
    except MemProbeError:
        return {}, None
    try:
        session.build_index()
        return spec.headline(session), session.integrity
    finally:
        session.close()


def headline_text(path: Path, values: dict[str, float | None]) -> str:
    """:func:`headline`'s numbers as the recording's protocol writes them in a browser cell."""
    try:
        return spec_of_recording(path).headline_text(values)
    except MemProbeError:
        return "—"


def _choices() -> str:
    return ", ".join(f"{name} ({spec.title})" for name, spec in protocols().items())
