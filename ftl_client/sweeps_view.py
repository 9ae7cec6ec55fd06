"""``ftl sweep`` and a sweep in ``ftl status``, ``ftl list`` and ``ftl wait`` (issue 37): what
was started or would be (a dry run), and one line of a sweep's progress, from its ``sweep``
object (docs/API.md)."""

from __future__ import annotations

from typing import Any

from ftl_client.text import money, number


def is_sweep(job: dict[str, Any]) -> bool:
    return job.get("kind") == "sweep"


def _count(value: Any) -> str:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else "?"


def _metric(sweep: dict[str, Any]) -> str:
    return str((sweep.get("objective") or {}).get("metric") or "objective")


def _score(value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return number(float(value))
    return "-"


def sweep_line(sweep: dict[str, Any]) -> str:
    """``trials 12/20 done, 3 running, 2 stopped early, 0 failed; best eval_loss 0.3124
    (trial <name>); spend $41.20 of $100.00``; trials stopped (not early) only when some were."""
    trials = sweep.get("trials") or {}
    counts = (
        f"trials {_count(trials.get('completed'))}/{_count(trials.get('max'))} done, "
        f"{_count(trials.get('running'))} running, "
        f"{_count(trials.get('stopped_early'))} stopped early, "
        f"{_count(trials.get('failed'))} failed"
    )
    if trials.get("stopped"):
        counts += f", {_count(trials['stopped'])} stopped"
    best = sweep.get("best")
    if isinstance(best, dict):
        leader = (
            f"best {_metric(sweep)} {_score(best.get('objective'))} (trial {best.get('trial')})"
        )
    else:
        leader = "no best trial yet"
    spend = f"spend {money(sweep.get('spend_usd'))} of {money(sweep.get('cap_usd'))}"
    return "; ".join((counts, leader, spend))


def _hyperparameters(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={number(v) if isinstance(v, float) else v}" for k, v in values.items())


def _plan(sweep: dict[str, Any]) -> str:
    """``maximize eval_f1, Bayesian``: the objective, its direction and the strategy."""
    objective = sweep.get("objective") or {}
    direction = str(objective.get("direction") or "-").lower()
    text = f"{direction} {_metric(sweep)}, {sweep.get('strategy') or '-'}"
    if sweep.get("early_stopping"):
        text += f", early stopping {sweep['early_stopping']}"
    return text


def sweep_detail(sweep: dict[str, Any]) -> str:
    """The rest of a sweep for ``ftl status`` (its progress is the ``sweep`` line): tuning
    job, objective, strategy, trials at a time, the best trial's hyperparameters, the cap."""
    trials = sweep.get("trials") or {}
    lines = [
        "sweep:",
        f"  tuning job: {sweep.get('tuning_job_name') or '-'}",
        f"  objective: {_plan(sweep)}",
        f"  trials: up to {_count(trials.get('max'))}, {_count(trials.get('parallel'))} at a time",
    ]
    best = sweep.get("best")
    if isinstance(best, dict):
        lines.append(
            f"  best: trial {best.get('trial')}, {_metric(sweep)} {_score(best.get('objective'))}"
        )
        if best.get("hyperparameters"):
            lines.append(f"    {_hyperparameters(best['hyperparameters'])}")
    lines.append(
        f"  spend: {money(sweep.get('spend_usd'))} of cap {money(sweep.get('cap_usd'))} "
        f"(worst case {money(sweep.get('worst_case_usd'))})"
    )
    return "\n".join(lines)


def sweep_started(answer: dict[str, Any], watch_hint: str | None = None) -> str:
    """What ``ftl sweep`` started: trials, objective, the worst case against the cap."""
    sweep = answer.get("sweep") or {}
    name = answer.get("job_name")
    if answer.get("replayed"):
        first = (
            f"already started sweep {name} (its client_token was used before: this is that "
            "sweep, nothing new was started)"
        )
    else:
        first = f"started sweep {name}"
    tuning = sweep.get("tuning_job_name")
    if tuning and tuning != name:
        first += f" (tuning job {tuning})"
    trials = sweep.get("trials") or {}
    worst = answer.get("worst_case_usd", sweep.get("worst_case_usd"))
    cap = answer.get("cap_usd", sweep.get("cap_usd"))
    lines = [
        first,
        f"  template: {answer.get('template')}, each trial {answer.get('instance_count')} x "
        f"{answer.get('instance_type')}",
        f"  objective: {_plan(sweep)}",
        f"  trials: up to {_count(trials.get('max'))}, {_count(trials.get('parallel'))} at a time",
        f"  worst case: {money(worst)} (cap {money(cap)})",
        f"  status: {answer.get('status')}",
    ]
    if answer.get("console_url"):
        lines.append(f"  console: {answer['console_url']}")
    if watch_hint:
        lines.append(f"  {watch_hint}")
    return "\n".join(lines)


def sweep_dry_run(result: dict[str, Any]) -> str:
    """What a sweep's dry run found: trials, per-trial max, worst case against the cap, and
    the template settings the tuner cannot carry."""
    trials, per_trial = result.get("trials"), result.get("per_trial_max_usd")
    worst, cap = result.get("worst_case_usd"), result.get("cap_usd")
    lines = [
        f"dry run: a sweep of {result.get('template')} would start (nothing was started or "
        "recorded)",
        f"  trials: {_count(trials)}, {_count(result.get('parallel'))} at a time",
        f"  worst case: {money(worst)} = {_count(trials)} trials x {money(per_trial)} per-trial "
        f"max; cap {money(cap)}",
    ]
    numbers = (int, float)
    if isinstance(worst, numbers) and isinstance(cap, numbers) and worst > cap:
        lines.append("  over the cap: the sweep would be refused")
    not_carried = result.get("not_carried") or []
    if not_carried:
        lines.append("  not carried by the tuner (the sweep drops these template settings):")
        lines += [f"    - {item}" for item in not_carried]
    if result.get("request"):
        lines.append("  --json prints the CreateHyperParameterTuningJob request")
    return "\n".join(lines)
