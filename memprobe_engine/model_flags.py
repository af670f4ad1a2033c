"""``--model ROLE=SPEC`` flags as the commands that assign models to roles take them.

A bare spec (``--model local:fast``) used to be taken silently as ``default=local:fast``; on a
command with many roles that hides which role was meant, so these commands ask for the role and
say the form. (``memprobe llm ask --model SPEC`` and ``memprobe proxy`` name their role another way
and keep bare specs.)
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memprobe_engine.errors import ConfigError
from memprobe_engine.llm.spec import redact_userinfo

_ROLE_PREFIX = re.compile(r"^\s*[A-Za-z_][A-Za-z0-9_-]*\s*=")


def role_specs(values: Iterable[str] | None, flag: str = "--model") -> list[str]:
    """The flags' values, each checked to be ``ROLE=SPEC``; a bare spec is a ConfigError naming the fix."""
    out = list(values or [])
    for value in out:
        if not _ROLE_PREFIX.match(value):
            raise ConfigError(redact_userinfo(
                f"{flag} {value}: say which role it is for, as ROLE=SPEC — e.g. {flag} default={value.strip()} "
                f"(every role), or agent=…, simulator=…, slot_filler=…, recovery_judge=…, attribution_judge=… "
                f"(`memprobe run --help` lists the flags)."))
    return out
