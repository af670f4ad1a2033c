"""``memprobe export eee``: a run's results in the Every Eval Ever format, version 0.3.0.

Every Eval Ever keeps one aggregate file per evaluated model and a companion ``_samples.jsonl``
with one record per instance, laid out as ``data/<benchmark>/<developer>/<model>/<uuid>.json``.
What MemProbe evaluates is a memory system (with the models of its roles), so each system of the
recording is one "model": ``memprobe/<system>``, its role models in ``additional_details``.

What is scored, and how, is the protocol's: the recording's protocol hands over its results through
:meth:`~memprobe_engine.protocol_spec.ProtocolSpec.eee_results` (protocol A:
``recovery/read/eee.py``, protocol B: ``paradigms/read/eee.py``); a protocol without them refuses the
export in one line. This module adds the run's metadata, builds the records and writes them.

The records are built as MemProbe's pydantic model of the format (``eee_record.py``), so every one
is validated before anything is written. Ids are derived from the run id (uuid4-shaped) and
timestamps are the run's, so a re-export gives the same files.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from pathlib import Path

import orjson
from pydantic import ValidationError

from memprobe_engine.errors import ConfigError
from memprobe_engine.events.header import read_header
from memprobe_engine.report.eee_record import (SCHEMA_VERSION, AnswerAttribution, DetailedResults, EeeInstance,
                                                EvalLibrary, EvaluationLog, InstanceEvaluation, InstanceInput,
                                                InstanceOutput, InstanceRecord, SourceMetadata, dump, model_info,
                                                role_models)
from memprobe_engine.exports.files import write_file
from memprobe_engine.exports.job import ExportJob, ExportResult, default_out
from memprobe_engine.report.output import output_folder

Json = dict[str, object]
#: (repository path of the aggregate file, the aggregate record, its instance records) of one system.
Document = tuple[str, EvaluationLog, list[InstanceRecord]]


def _uuid(*parts: str) -> str:
    digest = hashlib.sha256("/".join(parts).encode()).digest()[:16]
    return str(uuid.UUID(bytes=digest, version=4))


def _component(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip(".- ") or "system"


def _instance_record(item: EeeInstance, evaluation_id: str, model_id: str) -> InstanceRecord:
    return InstanceRecord(
        schema_version=SCHEMA_VERSION, evaluation_id=evaluation_id, model_id=model_id, evaluation_name=item.result_id,
        evaluation_result_id=item.result_id, sample_id=item.sample_id, interaction_type="single_turn",
        input=InstanceInput(raw=item.question, reference=item.reference), output=InstanceOutput(raw=[item.answer]),
        answer_attribution=[AnswerAttribution(turn_idx=0, source="output.raw", extracted_value=item.answer,
                                              extraction_method=item.extraction_method, is_terminal=True)],
        evaluation=InstanceEvaluation(score=item.score, is_correct=item.correct), metadata=item.metadata)


def _lines(records: list[InstanceRecord]) -> bytes:
    return b"".join(orjson.dumps(dump(r)) + b"\n" for r in records)


def eee_documents(path: Path) -> list[Document]:
    """The recording's records, one :data:`Document` per system; ConfigError when its protocol has no
    results to give, or (a bug) when a record does not fit the format."""
    from memprobe_engine import __version__
    from memprobe_engine.protocols import spec_of

    header = read_header(path)
    try:
        found = spec_of(header).eee_results(path, header)
        stamp = str(header.created)
        specs = role_models(header)
        out = []
        for system in found.systems:
            model_id = f"memprobe/{system.system}"
            evaluation_id = f"{found.benchmark}/{model_id}/{stamp}"
            name = _uuid(header.run_id, system.system, found.benchmark)
            folder = f"data/{found.benchmark}/memprobe/{_component(system.system)}"
            records = [_instance_record(i, evaluation_id, model_id) for i in system.instances]
            extra = {"memory_system": system.system,
                     **{f"model.{role}": spec for role, spec in sorted(specs.items())}, **system.details}
            aggregate = EvaluationLog(
                schema_version=SCHEMA_VERSION, evaluation_id=evaluation_id, evaluation_timestamp=stamp,
                retrieved_timestamp=stamp,
                source_metadata=SourceMetadata(source_name="MemProbe", source_type="evaluation_run",
                                               source_organization_name="MemProbe",
                                               evaluator_relationship="third_party",
                                               additional_details={"run_id": header.run_id, "suite": header.suite,
                                                                   "recording": path.name}),
                eval_library=EvalLibrary(name="memprobe",
                                         version=str(header.packages.get("memprobe") or __version__)),
                model_info=model_info(f"{system.system} (memory system)", model_id, extra),
                evaluation_results=system.results,
                detailed_evaluation_results=DetailedResults(
                    format="jsonl", file_path=f"{folder}/{name}_samples.jsonl", hash_algorithm="sha256",
                    checksum=hashlib.sha256(_lines(records)).hexdigest(), total_rows=len(records)))
            out.append((f"{folder}/{name}.json", aggregate, records))
    except ValidationError as err:
        first = err.errors()[0]
        at = "/".join(map(str, first["loc"])) or "(top)"
        raise ConfigError(f"{path}: the Every Eval Ever export does not fit the format {SCHEMA_VERSION} "
                          f"({err.error_count()} error(s) in a {err.title} record; first at {at}: "
                          f"{first['msg'][:200]}). This is a bug in MemProbe's export: please report it with the "
                          f"recording.") from None
    return out


def export_eee(job: ExportJob) -> ExportResult:
    """The registry's ``eee`` writer: build (and so validate) every record, then write the datastore
    layout under --out."""
    if len(job.recordings) != 1:
        raise ConfigError("export eee takes one recording.")
    documents = eee_documents(Path(job.recordings[0]))
    out = output_folder(job.out if job.out is not None else default_out(job, "-eee"))
    result = ExportResult()
    for repo_path, aggregate, records in documents:
        result.written.append(write_file(out / repo_path, orjson.dumps(dump(aggregate), option=orjson.OPT_INDENT_2)
                                         + b"\n"))
        samples = aggregate.detailed_evaluation_results
        assert samples is not None
        result.written.append(write_file(out / samples.file_path, _lines(records)))
    rows = sum(len(r) for _, _, r in documents)
    result.lines.append(f"wrote {len(documents)} evaluation(s) with {rows} instance(s) to {out}, each record "
                        f"validated against the Every Eval Ever {SCHEMA_VERSION} format")
    return result
