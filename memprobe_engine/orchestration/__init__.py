"""How any run runs, whatever its protocol.

- ``protocol.py``: the small :class:`BenchmarkProtocol` interface a protocol implements (its
  configuration, an extra resume refusal, what the run needs, its units, how a unit's span names it,
  one unit's work) and the typed :class:`RunServices` a unit gets (recorder, chat client, embedder);
- ``run.py``: the one run skeleton (:func:`run_protocol`);
- ``resume.py``: fingerprint, resume check, recorded responses served back, the one-pass resume read;
- ``units.py``: unit selection per shard, shard folders, per-unit seeds, bounded concurrent units;
- ``lifecycle.py``: the recorded-run lifecycle every writing command shares (status, SIGTERM);
- ``progress.py``: the progress display and the progress hook's shape.

Protocol A (``recovery/``) and protocol B (``paradigms/``) sit side by side above this package and
import each other never (import-linter contracts in ``pyproject.toml``); nothing here imports either.
"""
