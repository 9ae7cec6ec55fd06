"""Template rule ``evaluation`` (issue 36): a policy that fits the template it is in.

The policy's own shape is ``evaluation_policy``'s. Here: the held-out and task-file channels
are the template's input channels (not ``train``), task metrics exist for the template's
task, lm-eval tasks and golden sets are for causal LMs, the instance type is known, and every
gated metric is one the policy produces. A team's additions go through the same
:func:`check_policy` once merged (``jobmodel.evaluation.additions``).
"""

from __future__ import annotations

from collections.abc import Collection

from ..contract.errors import TemplateError
from ..instances import INSTANCE_TYPES
from .evaluation_policy import CAUSAL_TASKS, TASK_METRICS, EvaluationPolicy, PolicyError
from .spec import TemplateSpec

__all__ = ["TRAIN_CHANNEL", "check_policy", "check_template"]

TRAIN_CHANNEL = "train"


def _channel(name: str, key: str, channels: Collection[str]) -> None:
    if name not in channels:
        raise PolicyError(
            key, f"must be one of the template's input channels {sorted(channels)}", name
        )
    if name == TRAIN_CHANNEL:
        raise PolicyError(key, "must be held out: not the train channel", name)


def check_policy(policy: EvaluationPolicy, *, task: str | None, channels: Collection[str]) -> None:
    """Raise ``PolicyError`` (its key inside the policy) where ``policy`` does not fit a
    template of ``task`` with input ``channels``."""
    if policy.task_metrics_channel is not None:
        _channel(policy.task_metrics_channel, "task_metrics.channel", channels)
        if task not in TASK_METRICS:
            raise PolicyError(
                "task_metrics",
                f"the template's task has no task metrics (tasks with them: "
                f"{', '.join(TASK_METRICS)})",
                task,
            )
    causal = task in CAUSAL_TASKS
    if policy.lm_eval is not None:
        if not causal:
            raise PolicyError("lm_eval", "lm-eval tasks are for causal LMs (task clm or sft)", task)
        if policy.lm_eval.task_channel is not None:
            _channel(policy.lm_eval.task_channel, "lm_eval.task_channel", channels)
    if policy.golden_sets and not causal:
        raise PolicyError("golden_sets", "golden sets are for causal LMs (task clm or sft)", task)
    if policy.instance_type is not None and policy.instance_type not in INSTANCE_TYPES:
        raise PolicyError("instance_type", "must be a known instance type", policy.instance_type)
    exact, prefixes = policy.metric_names(task)
    for i, gated in enumerate(policy.gate):
        name = gated.metric
        if name in exact or any(name.startswith(p) and len(name) > len(p) for p in prefixes):
            continue
        produced = sorted(exact) + [f"{p}<metric>" for p in prefixes]
        raise PolicyError(
            f"gate[{i}].metric",
            f"is not a metric this policy produces ({', '.join(produced)})",
            name,
        )


def check_template(spec: TemplateSpec) -> None:
    """Template rule ``evaluation``: the template's policy (if any) fits it."""
    if spec.evaluation is None:
        return
    task = spec.hyperparameters.get("task")
    try:
        check_policy(
            spec.evaluation,
            task=task if isinstance(task, str) else None,
            channels=[c.name for c in spec.inputs],
        )
    except PolicyError as exc:
        raise TemplateError(spec.name, "evaluation", f"evaluation.{exc}") from None
