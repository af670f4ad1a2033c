"""Upgrade-on-read for the header's ``config``: a config an older MemProbe wrote, in today's keys.

The one module that reads a header config by raw key (``config.get("…")``); everything else reads the
typed models of :mod:`memprobe_engine.events.header_config` and the protocols' ``config_model``. As
with events (:mod:`memprobe_engine.events.upgrade`), ``header.json`` on disk is never rewritten, and
the run's ``fingerprint`` stays computed over the config as written.

What older configs lack or spell otherwise, and what they are read as:

- ``models`` flat (role → spec, before roles were nested under ``{"models": …}``) is nested; a role
  whose entry is no resolved spec (a bare string) is dropped: it names no backend to show.
- Values of the wrong shape where a reader always took "not recorded" (a non-list ``users``,
  ``episodes`` or ``paradigms``, a non-dict ``dialogues`` or ``input_protocols``, a null list) are
  dropped, so the model's default applies; a ``shard`` written as a number is read as its text.
- Protocol A (``recovery``): ``policy`` absent — an imported release run (``source`` ``release-a``)
  is ``paper``, the release's own; a run of ours from before policies existed behaved as ``audit``.
  ``framing``, ``recovery_judge`` and ``modes`` absent or empty take the defaults the runner leaves
  out of the header (``release``, ``model``, both modes): the model's field defaults.
"""

from __future__ import annotations

from collections.abc import Mapping

#: The protocol-A suite and the import source whose recordings used the release's exclusion policy.
_RECOVERY = "recovery"
_RELEASE_A = "release-a"
#: How a protocol-A run of ours recorded before the ``policy`` key existed behaved.
_POLICY_BEFORE_POLICIES = "audit"
_RELEASE_POLICY = "paper"

#: Keys that hold a list of names where a non-list value was always read as absent.
_LISTS = ("systems", "users", "dimensions", "modes", "episodes", "paradigms", "merged_from", "missing_shards")
#: Keys that hold a mapping where a non-mapping value was always read as absent.
_MAPPINGS = ("dialogues", "input_protocols", "episode_digests", "settings")
#: Keys whose empty value (``""``, ``[]``, null) means "the default" to every reader.
_EMPTY_IS_DEFAULT = ("framing", "recovery_judge", "policy", "modes", "systems", "input_protocols")


def _resolved_roles(roles: Mapping[object, object]) -> dict[str, object]:
    return {str(role): spec for role, spec in roles.items() if isinstance(spec, Mapping)}


def config_suite(config: Mapping[str, object], header_suite: str | None) -> str | None:
    """The suite a config's upgrades follow: its own ``suite`` (an import may name it only there), else
    the header's (a config's ``suite`` is left as written: readers tell a run's config by it)."""
    named = config.get("suite")
    return named if isinstance(named, str) else header_suite


def upgrade_config(config: Mapping[str, object], header_suite: str | None = None) -> dict[str, object]:
    """``config`` (as a header holds it) in today's keys, for a typed model to validate (see the module
    docstring); ``header_suite`` is the header's ``suite``, used when the config names none."""
    out = dict(config)
    suite = config_suite(config, header_suite)
    models = out.get("models")
    if isinstance(models, Mapping):
        nested = models.get("models")
        if isinstance(nested, Mapping):  # today's shape: other keys beside the roles are kept
            out["models"] = {**models, "models": _resolved_roles(nested)}
        else:  # flat: the roles themselves
            out["models"] = {"models": _resolved_roles(models)}
    elif "models" in out:
        del out["models"]
    for key in _LISTS:
        if key in out and not isinstance(out[key], list):
            del out[key]
    for key in _MAPPINGS:
        if key in out and not isinstance(out[key], Mapping):
            del out[key]
    for key in _EMPTY_IS_DEFAULT:
        if key in out and not out[key]:
            del out[key]
    shard = out.get("shard")
    if shard is not None and not isinstance(shard, str):
        out["shard"] = str(shard)
    if suite == _RECOVERY and "policy" not in out:
        out["policy"] = _RELEASE_POLICY if config.get("source") == _RELEASE_A else _POLICY_BEFORE_POLICIES
    return out
