"""Every request: the full model (:mod:`.model`), then the cross-field rules (:mod:`.rules`);
a ``SubmitServiceJob``'s payload is checked as the ``CreateTrainingJob`` Batch will send, and a
``CreateHyperParameterTuningJob``'s first trial as the ``CreateTrainingJob`` the tuner starts
(:func:`.rules_tuner.trials`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from .model import Finding, ModelCheck
from .rules import BATCH, RULES, SM, TUNER
from .rules_tuner import trials


class ConstraintsCheck(ModelCheck):
    def request(self, service: str, operation: str, params: Mapping[str, Any]) -> list[Finding]:
        out = self.check(service, operation, params)
        where = f"{service} {operation}"
        out += [
            Finding(where, rule.name, problem)
            for rule in RULES
            if rule.applies_to == where and (problem := rule.problem(params)) is not None
        ]
        if where == BATCH and "serviceRequestPayload" in params:
            payload = json.loads(params["serviceRequestPayload"])
            out += self.request("sagemaker", "CreateTrainingJob", payload)
        if where == TUNER:
            for trial in trials(params):
                found = self.request("sagemaker", "CreateTrainingJob", trial)
                out += [Finding(f"{where} trial", f.rule, f"{f.where}: {f.detail}") for f in found]
        return out

    def all(self, requests: Iterable[tuple[str, str, Mapping[str, Any]]]) -> list[Finding]:
        return [f for service, op, params in requests for f in self.request(service, op, params)]


__all__ = ["BATCH", "SM", "TUNER", "ConstraintsCheck", "Finding"]
