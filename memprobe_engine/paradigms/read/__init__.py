"""Protocol B's read side: the episodes, sessions and probes of a paradigm recording as replay queries,
the report's probe frame, tables and figures, the reader-ablation table and run-against-run comparison."""
