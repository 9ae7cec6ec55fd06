"""Capacity sources (training plans) and chains: config errors name the key, every step's
request validates against botocore's SageMaker model, the template's chain rules (issue 20)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import botocore.session
import pytest
from botocore.validate import validate_parameters

import jobmodel as jm
from jobmodel.capacity import chain as C
from jobmodel.capacity.plans import CapacityConfig, CapacityError
from jobmodel.render import JobIdentity, render_attempt

SHAPE = (
    botocore.session.get_session()
    .get_service_model("sagemaker")
    .operation_model("CreateTrainingJob")
    .input_shape
)
PLAN_ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/nlp-p4d"
NOW = datetime(2026, 3, 1, tzinfo=UTC)


def plan(**over: Any) -> dict[str, Any]:
    return {
        "name": "nlp-p4d",
        "arn": PLAN_ARN,
        "instanceType": "ml.p4d.24xlarge",
        "instanceCount": 4,
        "start": "2026-02-01T00:00Z",
        "end": "2026-04-01T00:00Z",
        "teams": ["nlp"],
        "templates": ["llm-sft-fsdp"],
        **over,
    }


@pytest.mark.parametrize(
    ("over", "key"),
    [
        ({"arn": "arn:aws:sagemaker:us-east-1:1:training-job/x"}, "trainingPlans[0].arn"),
        ({"instanceType": "ml.z9.huge"}, "trainingPlans[0].instanceType"),
        ({"instanceCount": 0}, "trainingPlans[0].instanceCount"),
        ({"end": "2026-01-01T00:00Z"}, "trainingPlans[0].end"),
        ({"start": "yesterday"}, "trainingPlans[0].start"),
        ({"teams": ["vision"]}, "trainingPlans[0].teams[0]"),
        ({"teams": []}, "trainingPlans[0].teams"),
        ({"templates": []}, "trainingPlans[0].templates"),
        ({"colour": "red"}, "trainingPlans[0].colour"),
    ],
)
def test_a_bad_plan_names_its_key(over: dict[str, Any], key: str) -> None:
    with pytest.raises(CapacityError) as info:
        CapacityConfig.parse([plan(**over)], teams=["nlp", "cv"])
    assert info.value.key == key


def test_a_single_team_platform_takes_no_plan_teams() -> None:
    with pytest.raises(CapacityError) as info:
        CapacityConfig.parse([plan()], teams=None)
    assert info.value.key == "trainingPlans[0].teams"
    assert CapacityConfig.parse([plan(teams=[])]).plans[0].teams == ()


def test_plans_are_checked_against_the_catalog(catalog: dict[str, jm.TemplateSpec]) -> None:
    ok = CapacityConfig.parse([plan()], teams=["nlp"])
    ok.check_catalog(catalog)
    with pytest.raises(CapacityError) as info:  # the template does not allow the type
        CapacityConfig.parse([plan(instanceType="ml.g5.xlarge")], teams=["nlp"]).check_catalog(
            catalog
        )
    assert info.value.key == "trainingPlans[0].templates[0]"
    with pytest.raises(CapacityError):  # no training-plan step in its chain
        CapacityConfig.parse([plan(templates=["bert-large-qa"])], teams=["nlp"]).check_catalog(
            catalog
        )


def test_a_plan_serves_its_teams_its_templates_inside_its_window() -> None:
    config = CapacityConfig.parse([plan()], teams=["nlp", "cv"])
    assert config.usable(team="nlp", template="llm-sft-fsdp", count=4, now=NOW) is not None
    assert config.usable(team="cv", template="llm-sft-fsdp", count=4, now=NOW) is None
    assert config.usable(team="nlp", template="llm-sft-fsdp", count=5, now=NOW) is None
    later = datetime(2026, 5, 1, tzinfo=UTC)
    assert config.usable(team="nlp", template="llm-sft-fsdp", count=2, now=later) is None
    assert CapacityConfig.from_env(config.to_env()) == config


def _steps(spec: jm.TemplateSpec, count: int = 2) -> list[C.Step]:
    usable = CapacityConfig.parse([plan()], teams=["nlp"]).plans[0]
    steps, _ = C.plan_chain(
        spec, instance_type="ml.p4d.24xlarge", count=count, chosen=None, spot=True, plan=usable
    )
    return steps


def test_every_step_of_a_multi_node_chain_validates_against_botocore(
    catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig
) -> None:
    spec = catalog["llm-sft-fsdp"]
    req = jm.validate_submit(
        {"template": spec.name, "instance_type": "ml.p4d.24xlarge", "instance_count": 2},
        catalog,
        platform,
    )
    name = jm.make_job_name(spec.name, now=NOW, rand_hex="ab12", reserve=C.ATTEMPT_SUFFIX_LEN)
    base = jm.render_create_training_job(req, spec, platform, job_name=name)
    assert base["InfraCheckConfig"] == {"EnableInfraCheck": True}  # multi-node default
    steps = _steps(spec)
    assert [s.kind for s in steps] == ["spot", "on-demand", "training-plan"]
    for attempt, step in enumerate(steps, start=1):
        job = JobIdentity(name=name, attempt=attempt)
        out = render_attempt(req, spec, platform, step, None, job=job)
        validate_parameters(out, SHAPE)
        assert len(out["TrainingJobName"]) <= 63
        assert out["CheckpointConfig"] == base["CheckpointConfig"]
        # the same container start on every attempt (issue 34)
        assert out["AlgorithmSpecification"] == base["AlgorithmSpecification"]
        assert "ContainerEntrypoint" in base["AlgorithmSpecification"]
        assert out["InfraCheckConfig"] == {"EnableInfraCheck": True}
        rc = out["ResourceConfig"]
        if step.kind == "on-demand":
            # InstancePreferences excludes InstanceType and managed spot; every type has EFA
            assert "InstanceType" not in rc and "EnableManagedSpotTraining" not in out
            types = [p["InstanceType"] for p in rc["InstancePreferences"]]
            assert types[0] == "ml.p4d.24xlarge" and len(types) <= 5
            assert all(jm.INSTANCE_TYPES[t].efa for t in types)
            # which type runs is SageMaker's choice: the toolkit reads the host's own type
            assert "sagemaker_instance_type" not in out["HyperParameters"]
        else:
            assert out["HyperParameters"]["sagemaker_instance_type"] == json.dumps(
                rc["InstanceType"]
            )
        if step.kind == "training-plan":
            assert rc["TrainingPlanArn"] == PLAN_ARN and rc["InstanceType"] == "ml.p4d.24xlarge"
        if step.kind == "spot":
            assert out["StoppingCondition"]["MaxWaitTimeInSeconds"] == (
                req.max_runtime_seconds + spec.spot_wait_seconds
            )


def test_the_worst_case_is_every_step_on_its_dearest_type(
    catalog: dict[str, jm.TemplateSpec],
) -> None:
    prices = {"ml.p4d.24xlarge": 30.0, "ml.p4de.24xlarge": 40.0, "ml.p5.48xlarge": 50.0}
    steps = _steps(catalog["llm-sft-fsdp"], count=2)
    total, reason = C.worst_case_usd(steps, lambda t: (prices.get(t), "unpriced"), 3600)
    assert total is None and reason == "unpriced"  # p5e has no price here
    prices.update({"ml.p5e.48xlarge": 60.0, "ml.p5en.48xlarge": 70.0})
    total, _ = C.worst_case_usd(steps, lambda t: (prices.get(t), None), 3600)
    assert total == 2 * (30.0 + 70.0 + 30.0)


def test_capacity_failures_are_told_from_other_ends() -> None:
    assert C.capacity_failure({"status": "Stopped", "secondary_status": "MaxWaitTimeExceeded"})
    assert C.capacity_failure(
        {
            "status": "Failed",
            "failure_reason": "CapacityError: Unable to provision requested ML compute capacity.",
        }
    )
    assert not C.capacity_failure({"status": "Failed", "failure_reason": "AlgorithmError: oom"})
    assert not C.capacity_failure({"status": "Stopped", "secondary_status": "Stopped"})
    assert not C.capacity_failure({"status": "Completed"})
    assert C.ledger_job_of_attempt("nlp-x-20260301-0000-ab12-a3") == ("nlp-x-20260301-0000-ab12", 3)
    assert C.ledger_job_of_attempt("nlp-x-20260301-0000-ab12") == ("nlp-x-20260301-0000-ab12", 1)


@pytest.mark.parametrize(
    ("over", "rule"),
    [
        ({"capacity_chain": ("spot", "reserved")}, "capacity-chain"),
        ({"capacity_chain": ("spot", "spot")}, "capacity-chain"),
        ({"capacity_chain": ("spot", "spot")}, "capacity-chain"),
        ({"instance_preferences": ("ml.g5.xlarge",)}, "instance-preferences"),
        ({"spot_wait_seconds": -1}, "spot-wait"),
        ({"infra_check": "yes"}, "infra-check"),
    ],
)
def test_chain_template_rules(
    catalog: dict[str, jm.TemplateSpec], over: dict[str, Any], rule: str
) -> None:
    spec = replace(catalog["llm-sft-fsdp"], **over)
    with pytest.raises(jm.TemplateError) as info:
        jm.validate_template(spec)
    assert info.value.rule == rule


def test_processes_per_host_holds_for_every_type_a_chain_may_land_on(
    catalog: dict[str, jm.TemplateSpec],
) -> None:
    """mpi/smp processes per host are rendered (the toolkit reads them before the entrypoint
    runs), so they must fit whichever preference SageMaker picks: preferences and plan types
    are among instance_types, each of which processes_per_host must fit."""
    base = replace(
        catalog["roberta-large-mnli-mp"],
        capacity_chain=("spot", "on-demand"),
        instance_preferences=("ml.p4de.24xlarge",),
    )
    jm.validate_template(base)  # 8 processes per host, 8 GPUs on every type
    assert base.distribution.processes_per_host == 8
    small = "ml.g4dn.12xlarge"  # EFA, 4 GPUs
    assert jm.INSTANCE_TYPES[small].accelerators == 4
    # a preference outside instance_types is refused as such
    with pytest.raises(jm.TemplateError) as info:
        jm.validate_template(replace(base, instance_preferences=(small,)))
    assert info.value.rule == "instance-preferences"
    # and once allowed, the processes-per-host rule names it
    with pytest.raises(jm.TemplateError) as info:
        jm.validate_template(
            replace(
                base,
                instance_types=(*base.instance_types, small),
                instance_preferences=(small,),
            )
        )
    assert info.value.rule == "processes-per-host" and small in str(info.value)
