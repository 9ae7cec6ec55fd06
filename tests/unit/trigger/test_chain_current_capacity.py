"""A chained job's top-level ``spot`` and ``capacity`` are its current attempt's (docs/API.md,
"Capacity"), in describe, list and stop, as its ``instance_type`` and ``training_job_name``."""

from __future__ import annotations

from tests.unit.trigger.test_capacity_chain import _call, _submit, chain  # noqa: F401


def _listed(launcher, name):
    return next(j for j in _call(launcher, "GET", "/jobs")["jobs"] if j["job_name"] == name)


def test_spot_and_capacity_follow_the_current_attempt(chain):  # noqa: F811
    launcher, standin = chain
    job = _submit(launcher)
    name = job["job_name"]
    assert (job["capacity"], job["spot"]) == ("spot", True)
    assert (_listed(launcher, name)["capacity"], _listed(launcher, name)["spot"]) == ("spot", True)

    standin.expire_waits()  # no spot: attempt 2 runs on-demand
    job = _call(launcher, "GET", f"/jobs/{name}")
    assert job["attempt"] == 2
    assert (job["capacity"], job["spot"]) == ("on-demand", False)
    # the console link follows the attempt's training job, as job_arn does
    assert job["console_url"].endswith(f"#/jobs/{name}-a2")
    assert job["job_arn"].endswith(f"training-job/{name}-a2")
    listed = _listed(launcher, name)
    assert (listed["capacity"], listed["spot"]) == ("on-demand", False)

    standin.finish(
        f"{name}-a2", "Failed", billable=60, reason="CapacityError: Insufficient capacity"
    )
    job = _call(launcher, "GET", f"/jobs/{name}")
    assert job["attempt"] == 3
    assert (job["capacity"], job["spot"]) == ("training-plan", False)
    stopped = _call(launcher, "POST", f"/jobs/{name}/stop")
    assert (stopped["capacity"], stopped["spot"]) == ("training-plan", False)
    # the attempts keep each one's kind
    assert [a["capacity"] for a in job["attempts"]] == ["spot", "on-demand", "training-plan"]


def test_an_unchained_job_has_no_capacity_field(chain):  # noqa: F811
    launcher, _ = chain
    job = _call(launcher, "POST", "/jobs", {"template": "distilbert-spot"})
    assert job["spot"] is True and "capacity" not in job
