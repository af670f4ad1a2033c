"""Importers of a protocol-A public release ("release A"): sessions and one recording per released run.

``import_release_a`` converts a protocol-A public release (personas, banks, tasks, transcripts,
final stores, recovery scores and attribution) into a sessions tree and one recording per released
run, collecting every problem of a messy release in an import report instead of aborting.
"""

from memprobe_engine.recovery.release.importer import REPORT_FILE, ImportResult, import_release_a

__all__ = ["ImportResult", "REPORT_FILE", "import_release_a"]
