"""Judges measured against the paper's own judgments, and the calibrated judge trained on them.

The recovery release holds every slot-fill its strong judge scored, with the score and the reason.
This package turns those judgments into:

* ``cases`` — judged cases read from a release folder or a recording (one shape for both);
* ``agreement`` — how far a candidate judge agrees with a reference (exact, within one level,
  linear-weighted kappa, the 5×5 confusion table, the mean difference per system);
* ``check`` — a candidate judge run through the run's own judge path on those cases
  (``memprobe judge check``);
* ``train`` — how the calibrated judge's adapters (:mod:`memprobe_engine.recovery.cross_judge`)
  are fitted (``memprobe judge train``), so the shipped weights can be rebuilt from the release.

It sits above :mod:`memprobe_engine.recovery.scoring`, whose judge it measures; the judge model itself
sits below it.
"""
