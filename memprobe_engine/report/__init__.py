"""What every protocol's report and ``memprobe compare`` share: number formatting and file exports
(``output``), PNG figures (``figures``), comparison inputs, statistics and rendering (``compare_*``).

A protocol's own frames, tables and renderers live in its package (``recovery/read``, ``paradigms/read``).
"""
