"""Sweeps (issue 37) in the constraints check: every ``CreateHyperParameterTuningJob`` the
trigger renders meets botocore's full model (max, min, pattern: what botocore's client-side
validation skips) and the tuner's documented rules (testsupport/constraints/rules_tuner.py),
and so does the first trial the tuner starts from it, checked as the ``CreateTrainingJob`` it
is. 0 findings.

The requests are the trigger's own: its dry run (``dry_run``, through the deployed trigger of
the ``default`` and ``teams`` configurations against the sandbox), whose ``request`` is what the
sweep sends (tests/authz/test_sweep_authorization.py shows it equal to the recorded create).
Property-based: any template (a capacity chain's is refused on ``template``), any of its types
and counts at their bounds, its overridable hyperparameters ranged at their bounds (numbers
from min to max on every scale, every choice, free text at the 256-character limit), every
strategy, limits at theirs, tags and names as a submit draws them.
"""

from __future__ import annotations

import contextlib
import io
import json
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jobmodel as jm
from jobmodel.contract.errors import ValidationError
from tests.authz.conftest import deployment
from tests.authz.harness import CONFIGURATIONS, sweep_event, trigger
from tests.authz.test_constraints import CATALOG, CHECK, NOW, PLATFORM, TAG_TEXT, TEAM, _report
from tests.lambda_support import FakeContext
from testsupport.constraints.rules import TUNER

STRATEGIES = ("Bayesian", "Random", "Hyperband", "Grid")
SCALES = ("Auto", "Linear", "Logarithmic", "ReverseLogarithmic")
TARGETS = (None, -1e308, 0.0, 0.25, 1e308)


def _catalog(name: str) -> list[dict[str, Any]]:
    return list(json.loads(deployment(name).trigger_catalog().read_text())["templates"])


# Names and tag keys a submit accepts, beside the submits' own draws (which it often refuses).
NAMES = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9 ._-]{0,127}", fullmatch=True)
TAG_KEYS = st.text(st.sampled_from("aZ9_.:/=+-@ é\U0001d400"), min_size=1, max_size=64)


def _scales(rule: dict[str, Any]) -> list[str]:
    """The scales a range from the rule's min to its max may take."""
    out = ["Auto", "Linear"]
    if rule["min"] > 0:
        out.append("Logarithmic")
    if rule["type"] == "float" and 0 <= rule["min"] and rule["max"] < 1:
        out.append("ReverseLogarithmic")
    return out


def _value_text() -> st.SearchStrategy[str]:
    """Free text whose JSON (as the tuner's categorical values are written) is at most 256
    characters, often at it."""
    return st.one_of(
        st.text(max_size=40),
        st.text(st.characters(codec="ascii", exclude_characters='"\\'), min_size=254, max_size=254),
        st.text(st.sampled_from("é\U0001d400"), min_size=42, max_size=42),  # 6-char escapes
    )


@st.composite
def sweeps(draw: Any, templates: list[dict[str, Any]], doors: list[str]) -> tuple[Any, ...]:
    template = draw(st.sampled_from(templates))
    rules = template["overridable"]
    strategy = draw(st.sampled_from(STRATEGIES))
    names = draw(st.lists(st.sampled_from(sorted(rules)), min_size=1, max_size=30, unique=True))
    ranges: dict[str, Any] = {}
    for name in names:
        rule = rules[name]
        numeric = rule["type"] in ("int", "float") and not rule.get("choices")
        if rule.get("choices"):
            values = draw(st.lists(st.sampled_from(rule["choices"]), min_size=1, unique=True))
        elif rule["type"] == "bool":
            values = draw(st.lists(st.booleans(), min_size=1, max_size=2, unique=True))
        elif not numeric:
            values = draw(st.lists(_value_text(), min_size=1, max_size=30, unique=True))
        elif strategy == "Grid":  # a grid's numbers are categorical: its bounds
            values = [rule["min"], rule["max"]]
        else:  # mostly a scale the bounds allow (the others are refused)
            scale = draw(st.one_of(st.sampled_from(_scales(rule)), st.sampled_from(SCALES)))
            ranges[name] = {"min": rule["min"], "max": rule["max"], "scale": scale}
            continue
        ranges[name] = {"values": values}
    event = sweep_event(template, draw(st.one_of(st.text(min_size=1, max_size=128), NAMES)))
    event.update(
        ranges=ranges,
        strategy=strategy,
        instance_type=draw(st.sampled_from(template["instance_types"])),
        instance_count=draw(st.sampled_from(sorted({1, template["max_instance_count"]}))),
        max_runtime_seconds=draw(st.sampled_from([60, template["max_runtime_seconds"]])),
        objective=draw(st.sampled_from(template["metrics"])),
        direction=draw(st.sampled_from(["Minimize", "Maximize"])),
        early_stopping="Off" if strategy == "Hyperband" else draw(st.sampled_from(["Off", "Auto"])),
        tags=draw(st.dictionaries(st.one_of(TAG_TEXT, TAG_KEYS), TAG_TEXT, max_size=50)),
        cap_usd=1e15,
        dry_run=True,
    )
    target = draw(st.sampled_from(TARGETS))
    if target is not None:
        event["target"] = target
    if strategy == "Grid":
        del event["max_trials"]
    else:
        trials = draw(st.sampled_from([1, 2, 750]))
        event["max_trials"] = trials
        event["max_parallel"] = min(trials, draw(st.sampled_from([1, 100])))
    if template["spot"] and draw(st.booleans()):
        event["spot"] = False
    return template, event, draw(st.sampled_from(doors))


@pytest.mark.parametrize("name", ["default", "teams"])
def test_every_sweep_the_trigger_accepts_renders_a_request_aws_accepts(
    name, trigger_run, authz_sandbox
):
    """Whatever the trigger's sweep accepts renders, at the bounds, a tuning job request (and
    a first trial) with 0 findings; what it refuses is a ValidationError, and a capacity
    chain's template is never swept."""
    d, _ = deployment(name), trigger_run(name)  # the run stores the prices a sweep needs
    templates = _catalog(name)
    doors = [door for door in CONFIGURATIONS[name][1] if door != "admin"]
    seen = {"accepted": 0, "refused": 0, "chains": 0}
    with (
        pytest.MonkeyPatch.context() as mp,
        contextlib.redirect_stdout(io.StringIO()),
        trigger(d, authz_sandbox, mp) as module,
    ):

        @settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
        @given(sweeps(templates, doors))
        def check(case: tuple[Any, ...]) -> None:
            template, event, door = case
            answer = module.handler({"action": "sweep", **event}, FakeContext(alias=door or None))
            if "error" in answer:
                assert answer["error"]["type"] == "ValidationError", answer
                seen["refused"] += 1
                seen["chains"] += template["capacity_chain"] != []
                return
            assert not template["capacity_chain"], (template["name"], answer)
            assert answer["dry_run"] and len(answer["job_name"]) <= 32, answer
            findings = CHECK.all(
                [("sagemaker", "CreateHyperParameterTuningJob", answer["request"])]
            )
            assert not findings, _report(findings)
            seen["accepted"] += 1

        check()
    assert seen["accepted"] >= 50, seen  # the property is not vacuous


@pytest.mark.parametrize("name", ["default", "teams"])
def test_a_template_that_cannot_be_swept_is_refused_on_template(name, trigger_run, authz_sandbox):
    """A capacity chain's template: the dry run and the sweep are refused on ``template``,
    the rest of the request as good as the sweepable templates' (tests/authz/harness.py)."""
    d, _ = deployment(name), trigger_run(name)
    chains = [t for t in _catalog(name) if t["capacity_chain"]]
    assert chains
    door = CONFIGURATIONS[name][1][0]
    with (
        pytest.MonkeyPatch.context() as mp,
        contextlib.redirect_stdout(io.StringIO()),
        trigger(d, authz_sandbox, mp) as module,
    ):
        for template in chains:
            for dry in (True, False):
                event = {"action": "sweep", **sweep_event(template, "chain"), "dry_run": dry}
                answer = module.handler(event, FakeContext(alias=door or None))
                assert answer["error"]["type"] == "ValidationError", answer
                assert answer["error"]["field"] == "template", answer


# What the tuner's definition has no field for (jobmodel/sweeps/render.py): a template asking
# for any of these cannot be swept, whatever its request otherwise is.
UNSWEPT = {
    "a Debugger hook": lambda t: t.update(DebugHookConfig={"S3OutputPath": "s3://b/debug/"}),
    "the profiler": lambda t: t.update(ProfilerConfig={"S3OutputPath": "s3://b/profile/"}),
    "instance preferences": lambda t: t["ResourceConfig"].update(
        InstancePreferences=[{"InstanceType": t["ResourceConfig"].pop("InstanceType")}]
    ),
    "a training plan": lambda t: t["ResourceConfig"].update(
        TrainingPlanArn="arn:aws:sagemaker:us-east-1:123456789012:training-plan/p"
    ),
}


@pytest.mark.parametrize("what", list(UNSWEPT))
def test_a_trial_the_tuner_cannot_carry_is_refused_on_template(what):
    from jobmodel.sweeps.render import render_tuning_job

    sweep, trial = _sweep_and_trial()
    rendered = render_tuning_job(sweep, trial, name="s")
    assert not CHECK.all([("sagemaker", "CreateHyperParameterTuningJob", rendered)])
    UNSWEPT[what](trial)
    with pytest.raises(ValidationError) as refused:
        render_tuning_job(sweep, trial, name="s")
    assert refused.value.field == "template", refused.value


def _sweep_and_trial(team: Any = None) -> tuple[Any, dict[str, Any]]:
    """A sweep of distilbert-spot and its trial's request, rendered as the trigger renders
    them (``jobmodel.admission.attempt_request``; no tracking)."""
    from jobmodel.admission import attempt_request
    from jobmodel.after_training.tracking import TrackingConfig
    from jobmodel.sweeps import SWEEP_FIELDS, parse_sweep

    spec = CATALOG["distilbert-spot"]
    payload = sweep_event(
        {"name": spec.name, "metrics": list(spec.metrics), "overridable": _rules(spec)}, "s"
    )
    base = {k: v for k, v in payload.items() if k not in SWEEP_FIELDS}
    req = jm.validate_submit(base, CATALOG, PLATFORM, team=team, scheduler="direct")
    sweep = parse_sweep(
        spec, {**payload, "instance_type": req.instance_type, "instance_count": req.instance_count}
    )
    team_name = team.name if team else None
    name = jm.make_job_name("s", now=NOW, rand_hex="abcd", team=team_name, reserve=31)
    settings_ = SimpleNamespace(
        catalog=CATALOG,
        platform=PLATFORM,
        team_roles={TEAM.name: "arn:aws:iam::123456789012:role/team-a-train"},
        tracking=TrackingConfig(),
    )
    trial = attempt_request(
        settings_, req, None, job_name=name, attempt=1, team=team_name,
        requested_by="arn:aws:sts::123456789012:assumed-role/team-a-x/alice", estimate=None,
    )  # fmt: skip
    return sweep, trial


def _rules(spec: Any) -> dict[str, Any]:
    return json.loads(json.dumps(spec.to_dict()["overridable"]))


def good_tuning_request() -> dict[str, Any]:
    """A sweep's request that keeps every rule (the rules' planted-violation test's base)."""
    from jobmodel.sweeps.render import render_tuning_job

    sweep, trial = _sweep_and_trial(TEAM)
    return render_tuning_job(sweep, trial, name=trial["TrainingJobName"])


def test_a_tuning_jobs_trial_is_checked_as_the_training_job_the_tuner_starts():
    """The tuner adds each ranged hyperparameter and the objective's name to a trial's
    static ones: 95 static hyperparameters pass the tuning request's model (100 at most) but
    make a trial's CreateTrainingJob carry more than its 100."""
    good = good_tuning_request()
    assert not CHECK.all([("sagemaker", "CreateHyperParameterTuningJob", good)])
    static = good["TrainingJobDefinition"]["StaticHyperParameters"]
    static.update({f"planted_{i}": "1" for i in range(95 - len(static))})
    findings = CHECK.all([("sagemaker", "CreateHyperParameterTuningJob", good)])
    assert findings and all(f.where == f"{TUNER} trial" for f in findings), _report(findings)
    assert {f.rule for f in findings} == {"hyperparameter limits", "max"}, _report(findings)
