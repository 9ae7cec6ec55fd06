"""Upgrades rehearsed as second deploys into the sandbox (issue 18, point 13; README, Upgrading).

One platform (``ftlup``) is deployed single-team in direct mode, then upgraded with one
``cdk deploy --all`` per step, as an operator would: to two teams, then one team added and one
removed in the same deploy, then to queue mode. The sandbox updates stacks as CloudFormation
does (``sandbox/cfn_updates.py``): it refuses to remove or change an export that another stack
imports, which is what stopped these upgrades before the training roles' ARNs reached the
launcher stack through SSM parameters instead of exports.

After each step the deployed trigger starts a job through the new door and the job runs as
the right training role, which must exist: the hand-over really carried the new ARN.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from sandbox.batch_api import configure_from_template
from sandbox.deploy import ACCOUNT, REGION, deploy
from sandbox.shell import SANDBOX_CALLER

PLATFORM = "ftlup"
PRICES = json.dumps({REGION: {"ml.g5.xlarge": 1.5}})


def team(name: str) -> dict[str, Any]:
    principal = SANDBOX_CALLER if name == "nlp" else f"arn:aws:iam::{ACCOUNT}:role/{name}-*"
    return {"name": name, "principals": [principal]}


STEPS: dict[str, dict[str, str]] = {
    "single": {"ftl:platformName": PLATFORM, "ftl:prices": PRICES},
    "teams": {
        "ftl:platformName": PLATFORM,
        "ftl:prices": PRICES,
        "ftl:teams": json.dumps([team("nlp"), team("vision")]),
    },
    "team added and removed": {
        "ftl:platformName": PLATFORM,
        "ftl:prices": PRICES,
        "ftl:teams": json.dumps([team("nlp"), team("audio")]),
    },
    "queue": {
        "ftl:platformName": PLATFORM,
        "ftl:prices": PRICES,
        "ftl:teams": json.dumps([team("nlp"), team("audio")]),
        "ftl:scheduler": "queue",
    },
}


class Rehearsal:
    """Deploys the steps in order, each once, and keeps each step's outputs."""

    def __init__(self, deployed: Any) -> None:
        self.deployed = deployed
        self.outputs: dict[str, dict[str, str]] = {}
        self.failed: str | None = None
        self.queues: dict[str, str] = {}  # the Batch stand-in's queues (name -> ARN)

    def upto(self, step: str) -> dict[str, str]:
        for name, context in STEPS.items():
            if name not in self.outputs:
                if self.failed:
                    pytest.fail(f"an earlier upgrade step failed: {self.failed}")
                templates: dict[str, dict[str, Any]] = {}
                try:
                    stacks = deploy(self.deployed.endpoint, context=context, synthesized=templates)
                except RuntimeError as exc:
                    self.failed = f"{name}: {str(exc)[-600:]}"
                    raise
                for template in templates.values():
                    self.queues.update(
                        configure_from_template(self.deployed.sandbox.batch, template)
                    )
                self.outputs[name] = {k: v for o in stacks.values() for k, v in o.items()}
            if name == step:
                return self.outputs[name]
        raise KeyError(step)

    def invoke(self, target: str, event: dict[str, Any]) -> dict[str, Any]:
        reply = self.deployed.client("lambda").invoke(
            FunctionName=target, Payload=json.dumps(event).encode()
        )
        body = json.loads(reply["Payload"].read())
        assert "FunctionError" not in reply, body
        return body

    def role_of(self, job_name: str) -> str:
        """The role a started job's training job runs as (in queue mode, the training job
        the Batch stand-in started for it)."""
        sm = self.deployed.client("sagemaker")
        started = [
            j.training_arn.rsplit("/", 1)[1]
            for j in self.deployed.sandbox.batch.jobs.values()
            if j.name == job_name and j.training_arn
        ]
        name = started[0] if started else job_name
        return sm.describe_training_job(TrainingJobName=name)["RoleArn"]

    def role_exists(self, arn: str) -> bool:
        iam = self.deployed.client("iam")
        try:
            iam.get_role(RoleName=arn.rsplit("/", 1)[1])
        except iam.exceptions.NoSuchEntityException:
            return False
        return True

    def parameter_names(self) -> set[str]:
        ssm = self.deployed.client("ssm")
        pages = ssm.get_paginator("describe_parameters").paginate()
        names = {p["Name"] for page in pages for p in page["Parameters"]}
        return {n for n in names if n.startswith(f"/fine-tuning/{PLATFORM}/")}


@pytest.fixture(scope="module")
def rehearsal(deployed):
    # Deployed functions load with os.environ.update(their environment): put back what was
    # here, so later modules' functions never see this platform's settings.
    saved = dict(os.environ)
    yield Rehearsal(deployed)
    os.environ.clear()
    os.environ.update(saved)


def small(name: str) -> dict[str, Any]:
    return {"template": "distilbert-spot", "job_name": name}


def test_single_team_direct_mode_is_the_starting_point(rehearsal):
    out = rehearsal.upto("single")
    job = rehearsal.invoke(out["TriggerFunctionName"], small("up-single"))
    assert job["status"] in ("InProgress", "Completed"), job
    assert rehearsal.role_of(job["job_name"]) == out["TrainingRoleArn"]
    assert rehearsal.parameter_names() == {f"/fine-tuning/{PLATFORM}/training-role-arn"}


def test_single_team_to_teams_deploys_once_and_jobs_run_as_the_team_role(rehearsal):
    single = rehearsal.upto("single")
    out = rehearsal.upto("teams")
    assert "TrainingRoleArn" not in out and not rehearsal.role_exists(single["TrainingRoleArn"])
    job = rehearsal.invoke(out["TeamNlpInvokeArn"], small("nlp-up"))
    assert job["team"] == "nlp", job
    assert rehearsal.role_of(job["job_name"]) == out["TeamNlpTrainingRoleArn"]
    assert rehearsal.role_exists(out["TeamNlpTrainingRoleArn"])
    assert rehearsal.parameter_names() == {
        f"/fine-tuning/{PLATFORM}/teams/{t}/training-role-arn" for t in ("nlp", "vision")
    }


def test_adding_and_removing_a_team_deploys_once(rehearsal):
    before = rehearsal.upto("teams")
    out = rehearsal.upto("team added and removed")
    assert "TeamVisionInvokeArn" not in out
    assert not rehearsal.role_exists(before["TeamVisionTrainingRoleArn"])
    job = rehearsal.invoke(out["TeamAudioInvokeArn"], {**small("audio-up"), "dry_run": True})
    assert job["dry_run"] is True and job["team"] == "audio", job
    job = rehearsal.invoke(out["TeamNlpInvokeArn"], small("nlp-up2"))
    assert rehearsal.role_of(job["job_name"]) == out["TeamNlpTrainingRoleArn"]
    assert rehearsal.parameter_names() == {
        f"/fine-tuning/{PLATFORM}/teams/{t}/training-role-arn" for t in ("nlp", "audio")
    }


def test_direct_to_queue_mode_deploys_once_and_queues_jobs(rehearsal):
    rehearsal.upto("team added and removed")
    out = rehearsal.upto("queue")
    assert out["JobQueueArn"] in rehearsal.queues.values(), (out["JobQueueArn"], rehearsal.queues)
    job = rehearsal.invoke(out["TeamNlpInvokeArn"], small("nlp-upq"))
    assert job.get("queue") or job["status"] in ("Queued", "InProgress"), job
    assert rehearsal.role_of(job["job_name"]) == out["TeamNlpTrainingRoleArn"]
