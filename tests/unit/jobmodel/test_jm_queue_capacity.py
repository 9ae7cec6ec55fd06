"""A job needing more instances than the job queue's capacity is refused at submit and dry
run, naming the capacity (issue 18, point 8): before, it waited ``Queued`` until the
head-of-queue time limit failed it."""

from __future__ import annotations

import pytest

import jobmodel as jm
from jobmodel.capacity.scheduler import SchedulerConfig

QUEUE = "arn:aws:batch:us-east-1:123456789012:job-queue/q"


def submit(catalog, platform, count, capacity, scheduler="queue"):
    payload = {"template": "bert-large-qa", "instance_count": count}
    return jm.validate_submit(
        payload, catalog, platform, scheduler=scheduler, queue_capacity=capacity
    )


@pytest.mark.parametrize("dry_run", [False, True])
def test_more_than_the_capacity_is_refused_naming_it(catalog, platform, dry_run):
    payload = {"template": "bert-large-qa", "instance_count": 8, "dry_run": dry_run}
    with pytest.raises(jm.ValidationError) as caught:
        jm.validate_submit(payload, catalog, platform, scheduler="queue", queue_capacity=4)
    assert caught.value.field == "instance_count"
    assert "instance_count 8 is more than the job queue's capacity of 4 instances" in str(
        caught.value
    )
    assert "ftl:queueCapacityInstances" in str(caught.value)


def test_the_template_default_counts_too(catalog, platform):
    with pytest.raises(jm.ValidationError, match="instance_count 2 is more than .* of 1 "):
        jm.validate_submit(
            {"template": "bert-large-qa"}, catalog, platform, scheduler="queue", queue_capacity=1
        )


def test_up_to_the_capacity_is_fine(catalog, platform):
    assert submit(catalog, platform, 4, 4).instance_count == 4


def test_direct_mode_and_an_unknown_capacity_are_not_checked(catalog, platform):
    assert submit(catalog, platform, 8, 4, scheduler="direct").instance_count == 8
    assert submit(catalog, platform, 8, None).instance_count == 8


def test_the_capacity_travels_in_the_environment():
    config = SchedulerConfig(scheduler="queue", job_queue_arn=QUEUE, capacity_instances=16)
    env = config.to_env()
    assert env["FTL_QUEUE_CAPACITY"] == "16"
    assert SchedulerConfig.from_env(env) == config
    older = {k: v for k, v in env.items() if k != "FTL_QUEUE_CAPACITY"}
    assert SchedulerConfig.from_env(older).capacity_instances is None


@pytest.mark.parametrize("raw", ["0", "-1", "four", "1.5"])
def test_a_bad_capacity_variable_is_named(raw):
    env = {"FTL_SCHEDULER": "queue", "FTL_JOB_QUEUE": QUEUE, "FTL_QUEUE_CAPACITY": raw}
    with pytest.raises(ValueError, match="FTL_QUEUE_CAPACITY must be a whole number of 1"):
        SchedulerConfig.from_env(env)
