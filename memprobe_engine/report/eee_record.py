"""MemProbe's typed model of an Every Eval Ever 0.3.0 record, and what a protocol hands the writer.

Every Eval Ever stores an evaluation as two kinds of JSON record: one *aggregate* record per evaluated
model (who ran what, on which model, with which scores) and, in a JSON Lines file beside it, one
*instance* record per scored sample. The classes below describe both as pydantic models. Field names,
types, the allowed values of the enumerations and the rules that tie fields together (a continuous
metric states its range, a single-turn instance has an output and no transcript, the samples file sits
at a fixed place under ``data/``) follow version 0.3.0 of the format; the descriptions are ours.

Building a record *is* validating it: a wrong type, an unknown key or a broken rule raises pydantic's
``ValidationError`` before anything is written. The models are stricter than the format in two ways
that cost MemProbe nothing: no coercion (a score given as a string is refused, not converted), and no
keys beyond the modelled ones (the format tolerates unknown keys in most nested objects; MemProbe
writes none). Parts of the format MemProbe never writes (an evaluation's ``generation_config``, tool
calls inside a transcript) are left out, so a record cannot carry them by accident.

``tests/functional/test_export_eee.py`` checks this model against the format's own JSON Schema, taken
from the ``every-eval-ever`` 0.3.0 wheel on PyPI: every export of a shipped recording validates there,
and records the schema refuses are refused here too.

The second half of the module is the hand-over from a protocol
(:meth:`~memprobe_engine.protocol_spec.ProtocolSpec.eee_results`): per memory system its aggregate
results (:class:`EvaluationResult`, built with :func:`metric_result`) and its scored instances
(:class:`EeeInstance`); ``eee.py`` adds the run's metadata and lays the files out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from memprobe_engine.events.header import RecordingHeader
from memprobe_engine.events.header_config import HeaderConfig

#: The version of the format these models describe (every record states it).
SCHEMA_VERSION = "0.3.0"
#: Where the samples file of an aggregate record must sit, relative to the datastore's root.
SAMPLES_PATH = (r"^data/[^/]+/[^/]+/[^/]+/[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-4[0-9A-Fa-f]{3}-[89ABab][0-9A-Fa-f]{3}-"
                r"[0-9A-Fa-f]{12}_samples\.jsonl$")

#: Free-form extra facts: the format allows only strings as their values.
Details = dict[str, str]
#: A bound of a metric's range: a number, or the strings the format uses for an unbounded side.
Bound = float | Literal["Infinity", "-Infinity"]


class _Record(BaseModel):
    """Every part of a record: no coercion, no unknown keys, immutable once checked."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


# --- the aggregate record -----------------------------------------------------------------------------


class SourceMetadata(_Record):
    """Where the numbers come from, and how the party that produced them relates to the model."""

    source_name: str | None = None
    #: ``evaluation_run`` when per-sample outputs exist (MemProbe's case), ``documentation`` for
    #: numbers copied from a report.
    source_type: Literal["documentation", "evaluation_run"]
    source_organization_name: str
    source_organization_url: str | None = None
    source_organization_logo_url: str | None = None
    evaluator_relationship: Literal["first_party", "third_party", "collaborative", "other"]
    additional_details: Details | None = None


class EvalLibrary(_Record):
    """The harness that ran the evaluation, and its version (``unknown`` when it is not known)."""

    name: str
    version: str
    additional_details: Details | None = None


class ModelDetails(BaseModel):
    """A model's extra facts: how it was deployed and whether its weights are open (both required),
    then any other string-valued facts (for MemProbe: the memory system and its role models)."""

    model_config = ConfigDict(strict=True, extra="allow", frozen=True)
    __pydantic_extra__: dict[str, str] = Field(init=False)

    deployment_type: Literal["self_deployed", "externally_managed", "unknown"]
    model_availability: Literal["open_weights", "closed_weights", "unknown"]


class InferenceEngine(_Record):
    """The serving engine a self-hosted model ran on."""

    name: str | None = None
    version: str | None = None


class ModelInfo(_Record):
    """The evaluated model (for MemProbe: a memory system with its role models), or a judge."""

    name: str
    #: In the ``organisation/model`` form of the Hugging Face hub; the datastore folder is its prefix.
    id: str
    developer: str | None = None
    inference_platform: str | None = None
    inference_engine: InferenceEngine | None = None
    additional_details: ModelDetails


class UrlSource(_Record):
    """Evaluation data published at one or more URLs."""

    dataset_name: str
    source_type: Literal["url"]
    url: Annotated[list[str], Field(min_length=1)]
    additional_details: Details | None = None


class HubSource(_Record):
    """Evaluation data from a Hugging Face dataset."""

    dataset_name: str
    source_type: Literal["hf_dataset"]
    hf_repo: str | None = None
    hf_split: str | None = None
    samples_number: int | None = None
    sample_ids: list[str] | None = None
    additional_details: Details | None = None


class OtherSource(_Record):
    """Evaluation data that is neither at a URL nor on the hub (MemProbe's sessions and suites)."""

    dataset_name: str
    source_type: Literal["other"]
    additional_details: Details | None = None


SourceData = Annotated[UrlSource | HubSource | OtherSource, Field(discriminator="source_type")]


class JudgeConfig(_Record):
    """One model that scored the outputs (one of a jury when there are several)."""

    model_info: ModelInfo
    temperature: float | None = None
    weight: float | None = None
    additional_details: Details | None = None


class LlmScoring(_Record):
    """How a model judge scored: the judge(s) and the prompt they were given."""

    judges: Annotated[list[JudgeConfig], Field(min_length=1)]
    input_prompt: str
    aggregation_method: Literal["majority_vote", "average", "weighted_average", "median"] | None = None
    expert_baseline: float | None = None
    additional_details: Details | None = None


class MetricConfig(_Record):
    """What a score measures and how to read it. A continuous score states its range; a score on
    named levels names them and says whether -1 means an unknown level."""

    evaluation_description: str | None = None
    metric_id: str | None = None
    metric_name: str | None = None
    metric_kind: str | None = None
    metric_unit: str | None = None
    metric_parameters: dict[str, str | float | bool | None] | None = None
    lower_is_better: bool
    score_type: Literal["binary", "continuous", "levels"] | None = None
    level_names: list[str] | None = None
    level_metadata: list[str] | None = None
    has_unknown_level: bool | None = None
    min_score: Bound | None = None
    max_score: Bound | None = None
    llm_scoring: LlmScoring | None = None
    additional_details: Details | None = None

    @model_validator(mode="after")
    def _range_or_levels(self) -> MetricConfig:
        if self.score_type == "continuous" and (self.min_score is None or self.max_score is None):
            raise ValueError("a continuous metric states min_score and max_score")
        if self.score_type == "levels" and (self.level_names is None or self.has_unknown_level is None):
            raise ValueError("a metric on levels states level_names and has_unknown_level")
        return self


class StandardError(_Record):
    value: float
    method: str | None = None


class ConfidenceInterval(_Record):
    """The interval's bounds, at ``confidence_level`` (a share between 0 and 1), and how it was found."""

    lower: float
    upper: float
    confidence_level: Annotated[float, Field(ge=0, le=1)] | None = None
    method: str | None = None


class Uncertainty(_Record):
    """How sure the score is: spread of the per-sample scores, standard error, an interval."""

    standard_deviation: float | None = None
    num_samples: int | None = None
    standard_error: StandardError | None = None
    confidence_interval: ConfidenceInterval | None = None
    num_bootstrap_samples: int | None = None


class ScoreDetails(_Record):
    score: float
    details: Details | None = None
    uncertainty: Uncertainty | None = None


class EvaluationResult(_Record):
    """One score of the aggregate record; instance records point at it by ``evaluation_result_id``."""

    evaluation_result_id: str | None = None
    evaluation_name: str
    source_data: SourceData
    evaluation_timestamp: str | None = None
    metric_config: MetricConfig
    score_details: ScoreDetails


class DetailedResults(_Record):
    """Where the instance records are (a JSON Lines file under ``data/``), with its checksum."""

    format: Literal["jsonl"]
    file_path: Annotated[str, Field(pattern=SAMPLES_PATH)]
    hash_algorithm: Literal["sha256", "md5"] | None = None
    checksum: str | None = None
    total_rows: int | None = None
    additional_details: Details | None = None


class EvaluationLog(_Record):
    """The aggregate record: one evaluated model's scores in one evaluation run."""

    schema_version: str
    #: ``benchmark/model id/retrieved timestamp`` by the format's convention.
    evaluation_id: str
    evaluation_timestamp: str | None = None
    retrieved_timestamp: str
    source_metadata: SourceMetadata
    eval_library: EvalLibrary
    model_info: ModelInfo
    evaluation_results: list[EvaluationResult]
    detailed_evaluation_results: DetailedResults | None = None


# --- the instance record ------------------------------------------------------------------------------


class InstanceInput(_Record):
    """What the sample asked, and the reference answer(s) it was scored against."""

    raw: str
    formatted: str | None = None
    reference: list[str]
    choices: list[str] | None = None


class InstanceOutput(_Record):
    """A single-turn sample's answer(s) as the model gave them."""

    raw: list[str]
    reasoning_trace: list[str] | None = None


class Message(_Record):
    """One turn of a multi-turn or agentic sample's transcript (MemProbe writes single-turn samples)."""

    turn_idx: Annotated[int, Field(ge=0)]
    role: str
    content: str | None = None
    reasoning_trace: str | None = None
    tool_call_id: list[str] | None = None


class AnswerAttribution(_Record):
    """Where the scored answer was taken from and how it was extracted."""

    turn_idx: Annotated[int, Field(ge=0)]
    source: str
    extracted_value: str
    extraction_method: str
    is_terminal: bool


class InstanceEvaluation(_Record):
    score: float
    is_correct: bool
    num_turns: Annotated[int, Field(ge=1)] | None = None
    tool_calls_count: Annotated[int, Field(ge=0)] | None = None


class TokenUsage(_Record):
    input_tokens: Annotated[int, Field(ge=0)]
    output_tokens: Annotated[int, Field(ge=0)]
    total_tokens: Annotated[int, Field(ge=0)]
    input_tokens_cache_write: Annotated[int, Field(ge=0)] | None = None
    input_tokens_cache_read: Annotated[int, Field(ge=0)] | None = None
    reasoning_tokens: Annotated[int, Field(ge=0)] | None = None


class Performance(_Record):
    latency_ms: Annotated[float, Field(ge=0)] | None = None
    time_to_first_token_ms: Annotated[float, Field(ge=0)] | None = None
    generation_time_ms: Annotated[float, Field(ge=0)] | None = None
    additional_details: Details | None = None


class InstanceRecord(_Record):
    """One scored sample, tied to its aggregate record by ``evaluation_id`` (and preferably by
    ``evaluation_result_id``). A single-turn sample has an ``output`` and no ``messages``; a
    multi-turn or agentic one the reverse."""

    schema_version: str
    evaluation_id: str
    model_id: str
    evaluation_name: str
    evaluation_result_id: str | None = None
    sample_id: str
    sample_hash: str | None = None
    interaction_type: Literal["single_turn", "multi_turn", "agentic"]
    input: InstanceInput
    output: InstanceOutput | None = None
    messages: list[Message] | None = None
    answer_attribution: list[AnswerAttribution]
    evaluation: InstanceEvaluation
    token_usage: TokenUsage | None = None
    performance: Performance | None = None
    error: str | None = None
    metadata: Details | None = None

    @model_validator(mode="after")
    def _output_or_transcript(self) -> InstanceRecord:
        if self.interaction_type == "single_turn" and (self.output is None or self.messages is not None):
            raise ValueError("a single_turn instance has an output and no messages")
        if self.interaction_type != "single_turn" and (self.messages is None or self.output is not None):
            raise ValueError(f"a {self.interaction_type} instance has messages and no output")
        return self

    @model_serializer(mode="wrap")
    def _explicit_transcript(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        """``messages`` is written even when null (a single-turn sample says it has no transcript)."""
        data: dict[str, object] = handler(self)
        if "messages" in data:
            return data
        return {name: data.get(name) for name in type(self).model_fields if name in data or name == "messages"}


def dump(record: BaseModel) -> dict[str, object]:
    """A record as JSON-ready data: absent parts left out, not written as null."""
    data: dict[str, object] = record.model_dump(mode="json", exclude_none=True)
    return data


# --- what a protocol hands the writer ----------------------------------------------------------------


@dataclass(frozen=True)
class EeeInstance:
    """One scored sample before it becomes an :class:`InstanceRecord`."""

    #: The ``evaluation_result_id`` of the aggregate score it counts towards.
    result_id: str
    sample_id: str
    question: str
    reference: list[str]
    answer: str
    score: float
    correct: bool
    metadata: dict[str, str]
    #: How the score was reached from the answer (``llm_judge``, ``rule_scorer``…).
    extraction_method: str


@dataclass
class EeeSystem:
    """One memory system's aggregate results, its instances, and extra facts for its model info."""

    system: str
    results: list[EvaluationResult]
    instances: list[EeeInstance]
    details: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class EeeResults:
    """A recording's results as its protocol reports them: the benchmark's name in the datastore
    (``memprobe-recovery``) and one :class:`EeeSystem` per memory system."""

    benchmark: str
    systems: list[EeeSystem]


def number(value: object) -> float | None:
    """``value`` as a float, None when it is missing, not a number or NaN."""
    try:
        found = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if math.isnan(found) else found


def metric_result(result_id: str, name: str, description: str, score: float, dataset: str, *,
                  unit: str = "proportion", low: float = 0.0, high: float = 1.0, std: float | None = None,
                  samples: int | None = None, ci: tuple[float | None, float | None] | None = None,
                  judge: LlmScoring | None = None) -> EvaluationResult:
    """One continuous score (higher is better) of the aggregate record, with what is known of its
    uncertainty; ``ci`` is a 95 % episode-bootstrap interval of 2,000 resamples."""
    low_ci, high_ci = ci if ci is not None else (None, None)
    interval = (ConfidenceInterval(lower=low_ci, upper=high_ci, confidence_level=0.95,
                                   method="episode bootstrap, 2,000 resamples")
                if low_ci is not None and high_ci is not None else None)
    uncertainty = Uncertainty(standard_deviation=std, num_samples=samples, confidence_interval=interval,
                              num_bootstrap_samples=2000 if interval is not None else None)
    return EvaluationResult(
        evaluation_result_id=result_id, evaluation_name=name,
        source_data=OtherSource(dataset_name=dataset, source_type="other"),
        metric_config=MetricConfig(evaluation_description=description, metric_id=f"memprobe.{result_id}",
                                   metric_name=name, metric_kind="score", metric_unit=unit, lower_is_better=False,
                                   score_type="continuous", min_score=low, max_score=high, llm_scoring=judge),
        score_details=ScoreDetails(score=score, uncertainty=uncertainty if dump(uncertainty) else None))


def model_info(name: str, model_id: str, extra: dict[str, str] | None = None) -> ModelInfo:
    """The model info of ``model_id`` (``backend:model`` for a role model): a local or vLLM model is
    self-deployed, an OpenAI-compatible endpoint externally managed; weights' availability unknown."""
    backend = model_id.split(":", 1)[0] if ":" in model_id else ""
    deployment = {"local": "self_deployed", "vllm": "self_deployed", "openai": "externally_managed"}.get(
        backend, "unknown")
    return ModelInfo(name=name, id=model_id, developer="memprobe", additional_details=ModelDetails.model_validate(
        {"deployment_type": deployment, "model_availability": "unknown", **(extra or {})}))


def role_models(header: RecordingHeader) -> dict[str, str]:
    """The model spec of each role the run used (role → ``backend:model``), from its header."""
    return {role: str(entry.spec) for role, entry in HeaderConfig.of(header).models.models.items()}
