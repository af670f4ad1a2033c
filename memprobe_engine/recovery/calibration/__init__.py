"""The quick run's judge, calibrated on the paper's own judgments, and the measurement of any judge.

The recovery release holds every slot-fill its strong judge scored, with the score and the reason.
This package turns those judgments into:

* ``cases`` — judged cases read from a release folder or a recording (one shape for both);
* ``agreement`` — how far a candidate judge agrees with a reference (exact, within one level,
  linear-weighted kappa, the 5×5 confusion table, the mean difference per system);
* ``cross_judge`` — a small cross-encoder (the packaged MiniLM with low-rank adapters and a score
  head, trained on the release's judgments) that scores a fill against the hidden value on CPU,
  offline and deterministically, at a fraction of one model call;
* ``train`` — how those adapters are fitted (``memprobe judge train``), so the shipped weights can
  be rebuilt from the release.
"""
