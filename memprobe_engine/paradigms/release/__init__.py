"""The importer of the upstream protocol-B results ("release B"): one recording per report and system,
re-scored by our rules beside the upstream labels (:mod:`.importer`)."""

from memprobe_engine.paradigms.release.importer import REPORT_FILE, import_release_b

__all__ = ["REPORT_FILE", "import_release_b"]
