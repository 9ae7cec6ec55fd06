"""Template rules on the capacity chain: its steps, the instance preferences, the spot wait.

``check_chain`` is run by ``validate_template`` (``rules``); a job's chain itself (its steps
and each attempt's request) is ``jobmodel/capacity/chain.py``'s.
"""

from __future__ import annotations

from ._shapes import fail
from .spec import CHAIN_STEPS, MAX_PREFERENCES, SPOT, TemplateSpec

__all__ = ["check_chain"]


def check_chain(spec: TemplateSpec) -> None:
    """The capacity chain: known steps, each once; preferences among the template's types."""
    chain = spec.capacity_chain
    if not isinstance(chain, tuple) or not all(isinstance(k, str) for k in chain):
        raise fail(spec, "capacity-chain", "capacity_chain must be a list of step names")
    for kind in chain:
        if kind not in CHAIN_STEPS:
            raise fail(
                spec,
                "capacity-chain",
                f"capacity_chain steps are {', '.join(CHAIN_STEPS)}; got {kind!r}",
            )
    if len(set(chain)) != len(chain):
        raise fail(spec, "capacity-chain", "capacity_chain must not repeat a step")
    if SPOT in chain and not spec.spot:
        raise fail(spec, "capacity-chain", "a spot step needs spot true")
    if len(chain) > 1 and not spec.checkpoint:
        raise fail(
            spec,
            "capacity-chain",
            "a chain of more than one step needs checkpoint true (each attempt resumes from it)",
        )
    prefs = spec.instance_preferences
    if not isinstance(prefs, tuple) or len(prefs) > MAX_PREFERENCES:
        raise fail(
            spec,
            "instance-preferences",
            f"instance_preferences must be a list of at most {MAX_PREFERENCES} instance types",
        )
    if len(set(prefs)) != len(prefs):
        raise fail(spec, "instance-preferences", "instance_preferences must not repeat a type")
    for name in prefs:
        if name not in spec.instance_types:
            # The distribution's rules (EFA for multi-node, smddp) hold for instance_types.
            raise fail(
                spec,
                "instance-preferences",
                f"instance_preferences may name only the template's instance_types; {name!r} "
                "is not one",
            )
    if (
        type(spec.spot_wait_seconds) is not int
        or not 0 <= spec.spot_wait_seconds <= spec.max_wait_seconds
    ):
        raise fail(
            spec,
            "spot-wait",
            f"spot_wait_seconds must be a whole number from 0 to max_wait_seconds "
            f"{spec.max_wait_seconds}, got {spec.spot_wait_seconds!r}",
        )
    if spec.infra_check is not None and type(spec.infra_check) is not bool:
        raise fail(
            spec,
            "infra-check",
            f"infra_check must be true, false or null, got {spec.infra_check!r}",
        )
