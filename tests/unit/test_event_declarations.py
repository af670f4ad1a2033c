"""Facts about the recording format are declared once, on the event models, and everything else
reads them: docs/recording-format.md documents every kind and field (this test fails when one is
missing), every field holding another event's seq is declared as such, and ``memprobe merge``
renumbers exactly the declared pointers."""

from __future__ import annotations

import re
from pathlib import Path

from memprobe_engine.events.base import EventBase, pointer_fields
from memprobe_engine.events.union import MODEL_OF_KIND, POINTERS_OF_KIND

DOC = Path(__file__).resolve().parents[2] / "docs" / "recording-format.md"


def _documented() -> dict[str, set[str]]:
    """``### `kind` `` sections (and the envelope's) with the fields their tables list."""
    sections: dict[str, set[str]] = {}
    current: set[str] | None = None
    for line in DOC.read_text().splitlines():
        heading = re.match(r"^### (?:`(\w+)`|Every event)", line)
        if heading:
            current = sections.setdefault(heading.group(1) or "(envelope)", set())
        elif line.startswith("## "):
            current = None
        elif current is not None and (row := re.match(r"^\| `(\w+)` \|", line)):
            current.add(row.group(1))
    return sections


def test_every_event_kind_and_field_is_documented() -> None:
    documented = _documented()
    envelope = set(EventBase.model_fields) | {"kind"}
    assert envelope <= documented.get("(envelope)", set()), envelope - documented.get("(envelope)", set())
    missing_kinds = sorted(set(MODEL_OF_KIND) - set(documented))
    assert not missing_kinds, f"docs/recording-format.md has no section for {missing_kinds}"
    missing = {kind: sorted(set(model.model_fields) - envelope - documented[kind])
               for kind, model in MODEL_OF_KIND.items()}
    assert not any(missing.values()), {k: v for k, v in missing.items() if v}
    stale = sorted(set(documented) - set(MODEL_OF_KIND) - {"(envelope)"})
    assert not stale, f"documented kinds that do not exist: {stale}"


def test_every_seq_pointer_is_declared_on_its_model() -> None:
    for kind, model in MODEL_OF_KIND.items():
        looks_like_seq = {name for name in model.model_fields
                          if name != "seq" and (name.endswith("_seq") or name == "rescore_of")}
        declared = {name for name, target in pointer_fields(model).items() if target == "seq"}
        assert looks_like_seq == declared, (kind, looks_like_seq ^ declared)
    assert POINTERS_OF_KIND["judge_score"] == {"span_id": "span", "parent_span_id": "span", "call_seq": "seq",
                                               "rescore_of": "seq"}
    assert POINTERS_OF_KIND["probe_answer"]["llm_call_seq"] == "seq"



def _header_tables() -> dict[str, set[str]]:
    """The fields each table of the header section lists, by the table's first column heading: the
    header's (``field``), the provenance block's, then the config's shared and per-protocol keys."""
    text = DOC.read_text().split("## The header", 1)[1].split("\n## ", 1)[0]
    tables: dict[str, set[str]] = {}
    current: set[str] | None = None
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith(("| `", "| ---")):
            current = tables.setdefault(line.split("|")[1].strip(), set())
        elif current is not None and (row := re.match(r"^\| `(\w+)` \|", line)):
            current.add(row.group(1))
    return tables


def _header_documented() -> tuple[set[str], set[str]]:
    tables = _header_tables()
    return tables["field"], tables["provenance field"]


def test_every_header_and_provenance_field_is_documented() -> None:
    from memprobe_engine.events.header import Provenance, RecordingHeader

    header, provenance = _header_documented()
    assert set(RecordingHeader.model_fields) == header, set(RecordingHeader.model_fields) ^ header
    assert set(Provenance.model_fields) == provenance, set(Provenance.model_fields) ^ provenance


def test_every_header_config_key_is_documented() -> None:
    """Each typed config model's own keys are listed in its table (the shared ones once, in ``config key``)."""
    from memprobe_engine.events.header_config import HeaderConfig
    from memprobe_engine.paradigms.config import ParadigmConfig
    from memprobe_engine.recovery.config import RecoveryConfig

    tables = _header_tables()
    shared = set(HeaderConfig.model_fields)
    assert shared == tables["config key"], shared ^ tables["config key"]
    for model, table in ((RecoveryConfig, "recovery config key"), (ParadigmConfig, "paradigms config key")):
        own = {name for name in model.model_fields if name not in shared or name in tables[table]}
        assert own == tables[table], own ^ tables[table]
