"""Protocol A's own commands: ``judge check`` / ``judge train``, ``rescore``, ``generate users`` and
``import release-a``. :meth:`RecoverySpec.register_commands
<memprobe_engine.recovery.spec.RecoverySpec.register_commands>` adds them to the ``memprobe`` command tree."""
