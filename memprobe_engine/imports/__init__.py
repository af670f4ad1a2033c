"""What every importer of a published benchmark release shares: the problem log an import collects
instead of raising (:mod:`.problems`) and the dict-level event emitter it writes with (:mod:`.emitter`).

Each protocol's importer lives in its own package: protocol A's release in
:mod:`memprobe_engine.recovery.release`, protocol B's upstream results in
:mod:`memprobe_engine.paradigms.release`; each declares its ``memprobe import`` command through its spec.
"""

from memprobe_engine.imports.problems import ImportProblem

__all__ = ["ImportProblem"]
