"""A team's additions to the templates' evaluation policies: context ``ftl:evaluation``.

``{"<team>": {"<template>": {"golden_sets": [...], "gate": [...]}}}``: a team may add golden
sets (in its own prefix of the data bucket) and gated metrics to the policy of a template that
has one. Both gates apply (a metric the template gates may get a team's check too), so a team
can only make the gate stricter; it cannot remove or loosen what the template says.
The merged policy must fit the template as the template's own does
(``templates.evaluation_rules.check_policy``). A bad value raises
:class:`EvaluationSettingsError` naming its key (``ftl:evaluation.nlp.llm-lora.gate[0].min``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from ..contract.errors import SettingsError
from ..contract.names import ENV_EVALUATION
from ..templates.evaluation_policy import (
    EvaluationPolicy,
    GatedMetric,
    GoldenSet,
    PolicyError,
    parse_gate,
    parse_golden_sets,
)
from ..templates.evaluation_rules import check_policy
from ..templates.spec import TemplateSpec

__all__ = ["CONTEXT_KEY", "Addition", "EvaluationAdditions", "EvaluationSettingsError"]

CONTEXT_KEY = "ftl:evaluation"
ADDITION_KEYS = ("golden_sets", "gate")


class EvaluationSettingsError(SettingsError):
    """A bad ``ftl:evaluation`` value; ``key`` names the entry
    (``ftl:evaluation.nlp.llm-lora.gate[0].min``), as every settings error does."""


@dataclass(frozen=True, kw_only=True)
class Addition:
    """What one team adds to one template's policy."""

    golden_sets: tuple[GoldenSet, ...] = ()
    gate: tuple[GatedMetric, ...] = ()

    def merged(self, policy: EvaluationPolicy) -> EvaluationPolicy:
        """``policy`` with these golden sets and gated metrics after its own."""
        return replace(
            policy,
            golden_sets=policy.golden_sets + self.golden_sets,
            gate=policy.gate + self.gate,
        )


@dataclass(frozen=True, kw_only=True)
class EvaluationAdditions:
    """Every team's additions: ``by_team[team][template]``."""

    by_team: Mapping[str, Mapping[str, Addition]] = field(default_factory=dict)

    def policy(self, spec: TemplateSpec, team: str | None) -> EvaluationPolicy | None:
        """The policy a job of ``team`` on ``spec`` is evaluated by (None: not evaluated: the
        template has no policy, or the policy with the team's additions runs nothing)."""
        if spec.evaluation is None:
            return None
        addition = self.by_team.get(team or "", {}).get(spec.name)
        policy = spec.evaluation if addition is None else addition.merged(spec.evaluation)
        return policy if policy.runs_something else None

    @classmethod
    def from_env(
        cls, env: Mapping[str, str], *, teams: Collection[str], catalog: Mapping[str, TemplateSpec]
    ) -> EvaluationAdditions:
        """The trigger's: ``FTL_EVALUATION`` (the context value as JSON), checked as synth
        checked it; absent or empty: no additions."""
        raw = env.get(ENV_EVALUATION)
        if not raw:
            return cls()
        try:
            value = json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"environment variable {ENV_EVALUATION} is not JSON: {exc}") from None
        return cls.parse(value, teams=teams, catalog=catalog, key=ENV_EVALUATION)

    @staticmethod
    def to_env(raw: Any) -> dict[str, str]:
        """``FTL_EVALUATION`` for the trigger from the context value (nothing when unset)."""
        if not raw:
            return {}
        return {ENV_EVALUATION: json.dumps(raw, sort_keys=True, separators=(",", ":"))}

    @classmethod
    def parse(
        cls,
        raw: Any,
        *,
        teams: Collection[str],
        catalog: Mapping[str, TemplateSpec],
        key: str = CONTEXT_KEY,
    ) -> EvaluationAdditions:
        """Validate the context value against the deployment's teams and catalog."""
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            raise EvaluationSettingsError(key, "an object of team names", type(raw).__name__)
        out: dict[str, Mapping[str, Addition]] = {}
        for team, per_template in raw.items():
            if team not in teams:
                raise EvaluationSettingsError(f"{key}.{team}", "not a team in ftl:teams")
            if not isinstance(per_template, Mapping):
                raise EvaluationSettingsError(
                    f"{key}.{team}", "an object of template names", type(per_template).__name__
                )
            out[team] = MappingProxyType(
                {
                    name: _addition(value, f"{key}.{team}.{name}", catalog.get(name))
                    for name, value in per_template.items()
                }
            )
        return cls(by_team=MappingProxyType(out))


def _addition(raw: Any, key: str, spec: TemplateSpec | None) -> Addition:
    if spec is None:
        raise EvaluationSettingsError(key, "not a template in the catalog")
    if spec.evaluation is None:
        raise EvaluationSettingsError(
            key, "the template has no evaluation policy for a team to add to"
        )
    if not isinstance(raw, Mapping):
        raise EvaluationSettingsError(key, "an object with golden_sets and/or gate", raw)
    unknown = sorted(str(k) for k in raw if k not in ADDITION_KEYS)
    if unknown:
        raise EvaluationSettingsError(
            f"{key}.{unknown[0]}", f"unknown key; allowed: {', '.join(ADDITION_KEYS)}"
        )
    try:
        addition = Addition(
            golden_sets=parse_golden_sets(raw.get("golden_sets", []), "golden_sets"),
            gate=parse_gate(raw.get("gate", []), "gate"),
        )
        _no_overlap(addition, spec.evaluation)
        _fits(addition, spec, spec.evaluation)
    except PolicyError as exc:
        raise EvaluationSettingsError(f"{key}.{exc.key}", exc.rule, exc.got) from None
    return addition


def _fits(addition: Addition, spec: TemplateSpec, policy: EvaluationPolicy) -> None:
    """The merged policy fits the template; an error names the team's own entry."""
    task = spec.hyperparameters.get("task")
    try:
        check_policy(
            addition.merged(policy),
            task=task if isinstance(task, str) else None,
            channels=[c.name for c in spec.inputs],
        )
    except PolicyError as exc:
        match = re.fullmatch(r"(gate|golden_sets)\[(\d+)\](.*)", exc.key)
        if match is None:
            raise
        own = len(policy.gate if match.group(1) == "gate" else policy.golden_sets)
        where = f"{match.group(1)}[{int(match.group(2)) - own}]{match.group(3)}"
        raise PolicyError(where, exc.rule, exc.got) from None


def _no_overlap(addition: Addition, policy: EvaluationPolicy) -> None:
    names = {g.name for g in policy.golden_sets}
    for i, s in enumerate(addition.golden_sets):
        if s.name in names:
            raise PolicyError(
                f"golden_sets[{i}].name", "the template has a golden set of this name", s.name
            )
