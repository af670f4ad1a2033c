"""Protocol B: stability–plasticity paradigms (interference, misinformation, consolidation,
reconsolidation) run incrementally against memory systems and scored by rules.

Module map: ``suite`` (models and loading), ``validate`` (the paper's E.1 checks), ``normalize`` and
``scoring`` (the rule scorer), ``metrics`` (accuracy, behavioural profiles, bootstrap intervals).
The run side (protocol, reader, baselines, runner) and the realizer live in sibling modules.
"""
