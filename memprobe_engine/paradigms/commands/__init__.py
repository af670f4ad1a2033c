"""Protocol B's own commands: ``reader-ablation``, ``generate episodes`` and ``import release-b``.
:meth:`ParadigmSpec.register_commands <memprobe_engine.paradigms.spec.ParadigmSpec.register_commands>` adds
them to the ``memprobe`` command tree."""
