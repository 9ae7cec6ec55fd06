"""The ``evaluate`` end effect (issue 36): a Completed job's evaluation job, claimed and started.

A job whose record names an evaluation policy (``evaluation_policy``, written at its claim:
the template's policy with its team's additions, when it runs something) owes ``evaluate``
once it ends ``Completed`` (``jobmodel.jobs.effects``). Only the trigger performs it: it holds
``CreateTrainingJob``, the team roles' ``iam:PassRole`` and the queue. The job-events function
leaves it owed and asks the trigger's ``chain`` alias (action ``evaluate``) to look at the job;
describe, list and the scheduled sweep do it too, as they do every owed effect.

:meth:`EvaluationFlow.perform` claims the evaluation job the way a submit claims a job: one
ledger item (kind ``evaluation``, naming the evaluated job and the policy), priced from the
policy's instance type and time limit, within the team's limits (instances, concurrent jobs,
per-job cap, month budget: the same check and the same conditional claim of the team's
usage), then started by the backend of this deployment (direct: ``CreateTrainingJob``; queue
mode: the Batch queue, as a job is). Its name is fixed by the evaluated job's
(``jobmodel.evaluation.launch.evaluation_job_name``), and the claim is conditional on it, so a
repeated, late or concurrent perform finds the one claimed and starts nothing more: exactly
one evaluation per Completed job. A refusal (a limit, an unknown price under a cost limit)
is recorded on the evaluated job's ``evaluation`` (status ``Refused``, with the contract's
error) and the effect is done: its version stays pending for a person. A start that fails
after the claim leaves the evaluation job ``Submitting`` for the care flow, as a submit's does.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ftl_ledger.job_codec import from_record, to_record
from ftl_ledger.ledger import LimitRace, NameTaken
from ftl_trigger.backends import Backends
from ftl_trigger.records import Clock, Records, ledger_call
from jobmodel import PlatformConfig, TemplateSpec, request_hash
from jobmodel.contract import names
from jobmodel.contract.errors import JobModelError, Throttled
from jobmodel.contract.statuses import Status
from jobmodel.evaluation.launch import evaluation_job_name, evaluation_request, policy_of
from jobmodel.jobs.job import Job
from jobmodel.money import limits as Q
from jobmodel.money.pricing import estimate_max_cost_usd
from jobmodel.requests.submit import SubmitRequest
from jobmodel.teams import Team, TeamsConfig
from jobmodel.templates.evaluation_policy import EvaluationPolicy

if TYPE_CHECKING:  # pragma: no cover - typing only
    from ftl_ledger.ledger import Ledger
    from ftl_ledger.usage import TeamUsage

LOG = logging.getLogger("ftl.trigger")
REFUSED = "Refused"
MAX_RACES = 5


class EvaluationSettings(Protocol):
    platform: PlatformConfig
    catalog: Mapping[str, TemplateSpec]
    teams: TeamsConfig
    prices: Any  # ``hourly(region, instance_type)``


class EvaluationFlow:
    def __init__(
        self,
        *,
        settings: EvaluationSettings,
        ledger: Ledger,
        records: Records,
        usage: TeamUsage,
        clock: Clock,
        backends: Backends,
    ) -> None:
        self.settings = settings
        self.ledger = ledger
        self.records = records
        self.usage = usage
        self.clock = clock
        self.backends = backends

    # ------------------------------------------------------------- the action
    def look(self, name: str) -> dict[str, Any]:
        """The ``evaluate`` action (door ``chain``, the job-events function): do what the
        job still owes, its evaluation included (``records.Effects``)."""
        job = self.records.get(name)
        if job is None:
            return {"job_name": name, "evaluation": None}
        after = self.records.effects.complete(job)
        return {"job_name": name, "evaluation": after.get(names.EVALUATION)}

    # ----------------------------------------------------------- the performer
    def perform(self, job: Mapping[str, Any], dedup: str) -> dict[str, Any] | None:
        """The ``evaluate`` performer: the attributes to record on the evaluated job
        (``evaluation``: the evaluation job's name and status), or None when it is not
        evaluated. Raises the contract's error when AWS or the ledger failed (left owed)."""
        evaluated = from_record(job)
        policy = policy_of(evaluated)
        if evaluated.status != Status.COMPLETED or policy is None:
            return None
        name = evaluation_job_name(evaluated.job_name)
        existing = ledger_call(self.ledger.get_job, name)
        if existing is not None:
            return _shown(existing)
        try:
            claimed, rendered = self._claim(evaluated, policy, name)
        except NameTaken:  # another holder of the record claimed it first
            again = ledger_call(self.ledger.get_job, name)
            return _shown(again) if again is not None else None
        except JobModelError as err:
            if err.type in ("UpstreamError", "Throttled"):
                raise
            LOG.warning("job %s: evaluation refused: %s", evaluated.job_name, err.message)
            refused = {"job_name": name, "status": REFUSED, **err.to_dict()}
            return {names.EVALUATION: refused}
        try:
            started = self.backends.of(claimed).start(claimed, rendered)
        except JobModelError as err:  # claimed: the care flow ends it if it never started
            LOG.warning("job %s: evaluation %s did not start: %s", evaluated.job_name, name, err)
            started = claimed
        return _shown(started)

    def _claim(
        self, job: Job, policy: EvaluationPolicy, name: str
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The evaluation job's record and request, claimed with the team's usage."""
        rt = self.settings
        spec = rt.catalog[job.template]
        team_name = job.team
        team = rt.teams.get(team_name) if team_name and rt.teams.enabled else None
        data_prefix = f"s3://{rt.platform.data_bucket}/" + (f"{team_name}/" if team else "")
        rendered = evaluation_request(job, policy, spec, team_data_prefix=data_prefix)
        resources = rendered["ResourceConfig"]
        req = SubmitRequest(
            template=spec.name,
            job_name_prefix=name,
            hyperparameters={},
            instance_type=resources["InstanceType"],
            instance_count=1,
            spot=policy.spot,
            max_runtime_seconds=policy.max_runtime_seconds,
            max_wait_seconds=rendered["StoppingCondition"].get("MaxWaitTimeInSeconds"),
            inputs={
                c["ChannelName"]: c["DataSource"]["S3DataSource"]["S3Uri"]
                for c in rendered["InputDataConfig"]
            },
            tags={},
            priority=job.priority,
        )
        price, reason = rt.prices.hourly(rt.platform.region, req.instance_type)
        estimate = estimate_max_cost_usd(price, 1, req.max_runtime_seconds)
        claimed = dataclasses.replace(
            Job.claim(
                req,
                job_name=name,
                rendered=rendered,
                rendered_hash=request_hash(rendered),
                platform=rt.platform,
                requested_by=job.requested_by,
                team=team_name if team else None,
                now=self.clock.now(),
                price=price,
                estimate=estimate,
                price_reason=reason,
            ),
            kind=names.EVALUATION_KIND,
            evaluation_of=job.job_name,
            evaluation_policy=json.dumps(policy.to_dict(), sort_keys=True),
        )
        record = to_record(claimed)
        self.backends.chosen.check(record, rendered)
        self._claim_within_limits(claimed, record, team, estimate, reason)
        return record, rendered

    def _claim_within_limits(
        self,
        claimed: Job,
        record: dict[str, Any],
        team: Team | None,
        estimate: float | None,
        reason: str | None,
    ) -> None:
        """Write the claim, adding it to the team's usage only if its limits hold (checked
        first, as a submit's are: a refusal raises the contract's error). ``record``: the
        ledger item of ``claimed``."""
        for _ in range(MAX_RACES):
            if team is not None:
                limits = team.limits
                Q.require_price(
                    limits,
                    estimate,
                    field="evaluation.instance_type",
                    what=f"team {team.name}",
                    instance_type=str(claimed.instance_type),
                    reason=reason,
                )
                usage_now = ledger_call(self.usage.peek, team.name)
                Q.check_limits(limits, usage_now, team=team.name, count=1, estimate=estimate)
            try:
                ledger_call(self.usage.claim, record, None, team, count=1, estimate=estimate)
            except LimitRace:
                continue
            return
        raise Throttled(
            f"the team's usage kept changing; evaluation {claimed.job_name} is left owed"
        )


def _shown(job: Mapping[str, Any]) -> dict[str, Any]:
    """What the evaluated job records of its evaluation job."""
    typed = from_record(job)
    return {names.EVALUATION: {"job_name": typed.job_name, "status": str(typed.status)}}
