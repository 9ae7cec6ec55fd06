"""``ftl sweep`` (issue 37): its command line, the request it sends through either door, and
what it shows for a sweep accepted, a dry run, and a sweep in ``status``, ``list`` and
``wait``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ftl_client import display
from ftl_client.args import UsageError, build_parser, sweep_range, sweep_request
from ftl_client.cli import main
from ftl_client.client import Progress, parse_time
from jobmodel.contract.routes import ACTIONS, route_for
from sandbox.http_api import LocalHttpApi
from tests.client.support import Stubbed, job
from tests.client.test_http_door import Api, http_client

NAME = "bert-lr-sweep"
BASE = ["sweep", "bert-large-qa", "--objective", "eval_loss", "--trials", "20", "--cap", "100"]


def sweep_object(**changes: Any) -> dict[str, Any]:
    sweep: dict[str, Any] = {
        "tuning_job_name": NAME,
        "strategy": "Bayesian",
        "objective": {"metric": "eval_loss", "direction": "Minimize"},
        "trials": {
            "max": 20,
            "parallel": 4,
            "completed": 12,
            "running": 3,
            "stopped_early": 2,
            "failed": 0,
            "stopped": 0,
        },
        "best": {
            "trial": f"{NAME}-007-3f2a",
            "objective": 0.3124,
            "hyperparameters": {"learning_rate": 3e-05, "per_device_train_batch_size": 16},
        },
        "spend_usd": 41.2,
        "cap_usd": 100.0,
        "worst_case_usd": 80.0,
    }
    sweep.update(changes)
    return sweep


def sweep_job(**fields: Any) -> dict[str, Any]:
    base = job(NAME, template="bert-large-qa", kind="sweep", sweep=sweep_object())
    base.pop("secondary_status")
    base.update(fields)
    return base


def accepted(**fields: Any) -> dict[str, Any]:
    """The answer to an accepted sweep: the job object, its sweep, worst case and cap."""
    fresh = sweep_object(
        trials={"max": 20, "parallel": 4, "completed": 0, "running": 0, "stopped_early": 0,
                "failed": 0, "stopped": 0},
        best=None,
        spend_usd=0.0,
    )  # fmt: skip
    return sweep_job(sweep=fresh, worst_case_usd=80.0, cap_usd=100.0, **fields)


DRY_RUN = {
    "dry_run": True,
    "template": "bert-large-qa",
    "worst_case_usd": 80.0,
    "per_trial_max_usd": 4.0,
    "cap_usd": 100.0,
    "trials": 20,
    "parallel": 4,
    "request": {"HyperParameterTuningJobName": NAME},
    "not_carried": ["capacity_chain: a tuner runs each trial on one instance type"],
}


def parsed(*extra: str) -> dict[str, Any]:
    return sweep_request(build_parser().parse_args([*BASE, *extra]))


# ----------------------------------------------------------------- the command line
@pytest.mark.parametrize(
    ("text", "spec"),
    [
        ("warmup_steps=0:500", {"min": 0, "max": 500, "scale": "Auto"}),
        ("learning_rate=1e-5:1e-3:log", {"min": 1e-5, "max": 1e-3, "scale": "Logarithmic"}),
        ("learning_rate=1e-5:1e-3:LOG", {"min": 1e-5, "max": 1e-3, "scale": "Logarithmic"}),
        ("momentum=0.9:0.999:reverse-log", {"min": 0.9, "max": 0.999,
                                            "scale": "ReverseLogarithmic"}),
        ("dropout=0:0.5:Linear", {"min": 0, "max": 0.5, "scale": "Linear"}),
        ("dropout=-0.5:0.5:auto", {"min": -0.5, "max": 0.5, "scale": "Auto"}),
        ("lr=1e-5:1e-3:logarithmic", {"min": 1e-5, "max": 1e-3, "scale": "Logarithmic"}),
        ("batch_size=8,16,32", {"values": [8, 16, 32]}),
        ("optimizer=adamw, sgd", {"values": ["adamw", "sgd"]}),
        ("fp16=true,false", {"values": [True, False]}),
        ("mix=0.5,none,\"8\"", {"values": [0.5, "none", "8"]}),
        ("schedule=cosine,step:10", {"values": ["cosine", "step:10"]}),
        ('modules=["all-linear", "q_proj,v_proj"]', {"values": ["all-linear", "q_proj,v_proj"]}),
        ("bs=[8, 16]", {"values": [8, 16]}),
    ],
)  # fmt: skip
def test_each_range_form_becomes_the_api_object(text, spec):
    name, value = sweep_range(text)
    assert name == text.split("=")[0] and value == spec
    for key in ("min", "max"):  # integers stay integers, for an int hyperparameter
        if key in spec:
            assert type(value[key]) is type(spec[key])
    if "values" in spec:
        assert [type(v) for v in value["values"]] == [type(v) for v in spec["values"]]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("learning_rate", "expected NAME=MIN:MAX[:SCALE] or NAME=V1,V2,..., got 'learning_rate'"),
        ("=1:2", "expected NAME=MIN:MAX[:SCALE] or NAME=V1,V2,..., got '=1:2'"),
        ("lr=1e-5", "lr: expected MIN:MAX[:SCALE] or two or more values V1,V2,..., got '1e-5' "
                    "(to fix one value, use --set lr=VALUE)"),
        ("lr=", "lr: expected MIN:MAX[:SCALE] or two or more values"),
        ("lr=low:1", "lr: MIN must be a number, got 'low'"),
        ("lr=1:", "lr: MAX must be a number, got ''"),
        ("lr=nan:1", "lr: MIN must be a number, got 'nan'"),
        ("lr=0:inf", "lr: MAX must be a number, got 'inf'"),
        ("lr=1e-3:1e-5", "lr: MIN must be below MAX, got '1e-3:1e-5'"),
        ("lr=1:1", "lr: MIN must be below MAX, got '1:1'"),
        ("lr=1:2:cubic", "lr: SCALE must be one of linear, log, reverse-log, auto, got 'cubic'"),
        ("lr=1:2:log:4", "lr: expected MIN:MAX[:SCALE], got '1:2:log:4'"),
        ("opt=adamw,,sgd", "opt: an empty value in 'adamw,,sgd'"),
        ("opt=adamw,", "opt: an empty value in 'adamw,'"),
        ("bs=8,16,8", "bs: value 8 is given twice"),
        ("opt=adamw,\"adamw\"", 'opt: value "adamw" is given twice'),
        ('m=["a", "a"]', 'm: value "a" is given twice'),
        ('m=["a"]', "m: expected a JSON list of two or more strings, numbers or booleans, "
                    "got '[\"a\"]'"),
        ('m=["a", {"b": 1}]', "m: expected a JSON list of two or more"),
        ("m=[a, b]", "m: expected a JSON list of two or more"),
    ],
)  # fmt: skip
def test_each_bad_range_is_a_usage_error_naming_the_option_and_the_rule(text, message, capsys):
    assert main([*BASE, "--range", text]) == 2
    out, err = capsys.readouterr()
    first, hint = err.splitlines()
    assert out == ""
    assert first.startswith(f"error: ftl sweep: argument --range: {message}"), first
    assert hint == "  see: ftl sweep --help"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--range", "lr=1:2", "--range", "lr=3:4"],
         "argument --range: lr has a range already; give it one --range"),
        (["--range", "lr=1:2", "--cap", "0"], "argument --cap: expected a positive amount in USD"),
        (["--range", "lr=1:2", "--cap", "-5"], "argument --cap: expected a positive amount"),
        (["--range", "lr=1:2", "--cap", "lots"], "argument --cap: expected a positive amount"),
        (["--range", "lr=1:2", "--trials", "0"],
         "argument --trials: expected a whole number of 1 or more, got '0'"),
        (["--range", "lr=1:2", "--parallel", "1.5"], "argument --parallel: expected a whole"),
        (["--range", "lr=1:2", "--strategy", "exhaustive"],
         "argument --strategy: expected one of bayesian, random, hyperband, grid, got "
         "'exhaustive'"),
        (["--range", "lr=1:2", "--target", "high"], "argument --target: expected a number"),
        (["--range", "lr=1:2", "--maximize", "--minimize"],
         "argument --minimize: not allowed with argument --maximize"),
        ([], "the following arguments are required: --range"),
        (["--range", "lr=1:2", "--set", "lr=3e-5"],
         "argument --set: lr also has a --range; fix it or sweep it, not both"),
    ],
)  # fmt: skip
def test_bad_options_are_usage_errors(argv, message, capsys):
    assert main([*BASE, *argv]) == 2
    first, hint = capsys.readouterr().err.splitlines()
    assert first.startswith(f"error: ftl sweep: {message}"), first
    assert hint == "  see: ftl sweep --help"


@pytest.mark.parametrize("missing", ["--objective", "--trials", "--cap"])
def test_objective_trials_and_cap_are_required(missing, capsys):
    argv = [*BASE, "--range", "lr=1:2"]
    at = argv.index(missing)
    del argv[at : at + 2]
    assert main(argv) == 2
    assert f"the following arguments are required: {missing}" in capsys.readouterr().err


def test_a_mistake_after_parsing_is_a_json_error_with_json(capsys):
    assert main([*BASE, "--range", "lr=1:2", "--set", "lr=3", "--json"]) == 2
    out, err = capsys.readouterr()
    body = json.loads(out)
    assert err == "" and body["exit_status"] == 2
    assert body["error"]["type"] == "UsageError" and body["error"]["help"] == "ftl sweep --help"


def test_options_become_the_sweep_fields():
    fields = parsed(
        "--range", "learning_rate=1e-5:1e-3:log",
        "--range", "per_device_train_batch_size=8,16",
        "--maximize", "--strategy", "RANDOM", "--parallel", "4", "--early-stopping",
        "--target", "0.9", "--name", NAME, "--cap", "$250.50",
        "--set", "num_train_epochs=2", "--instance-type", "ml.g5.2xlarge", "--instances", "2",
        "--max-runtime", "2h", "--tag", "project=squad", "--token", "sweep-1",
    )  # fmt: skip
    assert fields == {
        "job_name": NAME,
        "ranges": {
            "learning_rate": {"min": 1e-5, "max": 1e-3, "scale": "Logarithmic"},
            "per_device_train_batch_size": {"values": [8, 16]},
        },
        "objective": "eval_loss",
        "direction": "Maximize",
        "strategy": "Random",
        "max_trials": 20,
        "max_parallel": 4,
        "early_stopping": "Auto",
        "cap_usd": 250.5,
        "target": 0.9,
        "hyperparameters": {"num_train_epochs": 2},
        "instance_type": "ml.g5.2xlarge",
        "instance_count": 2,
        "max_runtime_seconds": 7200,
        "tags": {"project": "squad"},
        "client_token": "sweep-1",
        "dry_run": None,
    }


def test_options_left_out_are_left_to_the_launcher():
    fields = parsed("--range", "lr=1:2")
    assert {k for k, v in fields.items() if v is not None} == {
        "ranges", "objective", "max_trials", "cap_usd",
    }  # fmt: skip
    assert parsed("--range", "lr=1:2", "--minimize")["direction"] == "Minimize"


def test_a_sweep_takes_no_submit_option_a_tuner_does_not():
    for option in (["--spot"], ["--input", "train=s3://b/p/"], ["--priority", "5"],
                   ["--capacity", "spot"], ["--max-wait", "1h"], ["--tracking"]):  # fmt: skip
        with pytest.raises(UsageError, match="unrecognized arguments"):
            build_parser().parse_args([*BASE, "--range", "lr=1:2", *option])


# ------------------------------------------------------------------- the request
def test_the_request_sent_is_the_sweep_action_with_a_client_token(capsys):
    with Stubbed() as s:
        s.answer(accepted())
        argv = [*BASE, "--range", "lr=1e-5:1e-3:log", "--range", "bs=8,16", "--parallel", "4"]
        assert main([*argv, "--set", "epochs=2"], client=s.client) == 0
    (event,) = s.events
    token = event.pop("client_token")
    assert token.startswith("ftl-") and len(token) <= 64
    assert event == {
        "action": "sweep",
        "template": "bert-large-qa",
        "ranges": {
            "lr": {"min": 1e-5, "max": 1e-3, "scale": "Logarithmic"},
            "bs": {"values": [8, 16]},
        },
        "objective": "eval_loss",
        "max_trials": 20,
        "max_parallel": 4,
        "cap_usd": 100.0,
        "hyperparameters": {"epochs": 2},
    }
    assert capsys.readouterr().out.startswith(f"started sweep {NAME}\n")


def test_a_dry_run_sends_no_token_and_a_given_token_is_kept(capsys):
    with Stubbed() as s:
        s.answer(DRY_RUN)
        s.answer(accepted())
        main([*BASE, "--range", "lr=1:2", "--dry-run"], client=s.client)
        main([*BASE, "--range", "lr=1:2", "--token", "sweep-7"], client=s.client)
    dry, real = s.events
    assert dry["dry_run"] is True and "client_token" not in dry
    assert real["client_token"] == "sweep-7" and "dry_run" not in real


def test_the_http_door_posts_the_sweep_to_its_route():
    route = route_for("sweep")
    assert (route.method, route.path, route.params) == ("POST", "/sweeps", "body")
    assert ACTIONS[ACTIONS.index("submit") + 1] == "sweep"
    assert route.body({"template": "t", "max_trials": 2}) == {"template": "t", "max_trials": 2}
    with LocalHttpApi("http://localhost:9", "fn") as local:
        api = Api(local)
        api.answer(201, accepted())
        answer = http_client(api).sweep("bert-large-qa", ranges={"lr": {"values": [1, 2]}},
                                        max_trials=2, cap_usd=10, strategy=None)  # fmt: skip
    assert answer["kind"] == "sweep"
    (event,) = api.events
    assert event["routeKey"] == "POST /sweeps"
    body = json.loads(event["body"])
    assert "action" not in body and "strategy" not in body
    assert body["ranges"] == {"lr": {"values": [1, 2]}} and body["template"] == "bert-large-qa"


def test_a_refused_sweep_is_the_usual_error_line(capsys):
    refusal = {
        "error": {
            "type": "ValidationError",
            "message": "worst case 160.00 USD exceeds the sweep's cap_usd (100.00 USD)",
            "field": "cap_usd",
        }
    }
    with Stubbed() as s:
        s.answer(refusal)
        assert main([*BASE, "--range", "lr=1:2", "--trials", "40"], client=s.client) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == (
        "error: ValidationError: worst case 160.00 USD exceeds the sweep's cap_usd (100.00 USD) "
        "(field: cap_usd)\n"
    )


# -------------------------------------------------------------------- what is shown
def test_an_accepted_sweep_says_what_started_and_how_to_follow_it(capsys):
    with Stubbed() as s:
        s.answer(accepted())
        main([*BASE, "--range", "lr=1:2"], client=s.client)
    assert capsys.readouterr().out.splitlines() == [
        f"started sweep {NAME}",
        "  template: bert-large-qa, each trial 1 x ml.g5.xlarge",
        "  objective: minimize eval_loss, Bayesian",
        "  trials: up to 20, 4 at a time",
        "  worst case: $80.00 (cap $100.00)",
        "  status: InProgress",
        f"  console: https://console/{NAME}",
        f"  watch: ftl wait {NAME}    stop: ftl stop {NAME}",
    ]


def test_a_replayed_sweep_says_nothing_new_started():
    text = display.sweep_started(accepted(replayed=True))
    assert text.startswith(f"already started sweep {NAME} (its client_token was used before")
    assert "nothing new was started" in text.splitlines()[0]


def test_json_prints_the_answer_as_is(capsys):
    with Stubbed() as s:
        s.answer(accepted())
        s.answer(DRY_RUN)
        main([*BASE, "--range", "lr=1:2", "--json"], client=s.client)
        first = json.loads(capsys.readouterr().out)
        main([*BASE, "--range", "lr=1:2", "--json", "--dry-run"], client=s.client)
        second = json.loads(capsys.readouterr().out)
    assert first == accepted() and second == DRY_RUN


def test_a_dry_run_shows_the_worst_case_against_the_cap_and_what_is_dropped(capsys):
    with Stubbed() as s:
        s.answer(DRY_RUN)
        assert main([*BASE, "--range", "lr=1:2", "--dry-run"], client=s.client) == 0
    assert capsys.readouterr().out.splitlines() == [
        "dry run: a sweep of bert-large-qa would start (nothing was started or recorded)",
        "  trials: 20, 4 at a time",
        "  worst case: $80.00 = 20 trials x $4.00 per-trial max; cap $100.00",
        "  not carried by the tuner (the sweep drops these template settings):",
        "    - capacity_chain: a tuner runs each trial on one instance type",
        "  --json prints the CreateHyperParameterTuningJob request",
    ]
    over = display.sweep_dry_run({**DRY_RUN, "worst_case_usd": 120.0, "not_carried": []})
    assert "  over the cap: the sweep would be refused" in over.splitlines()
    assert "not carried" not in over


def test_the_progress_line():
    assert display.sweep_line(sweep_object()) == (
        f"trials 12/20 done, 3 running, 2 stopped early, 0 failed; best eval_loss 0.3124 "
        f"(trial {NAME}-007-3f2a); spend $41.20 of $100.00"
    )
    early = sweep_object(best=None, spend_usd=None, trials={"max": 20, "running": 1})
    assert display.sweep_line(early) == (
        "trials ?/20 done, 1 running, ? stopped early, ? failed; no best trial yet; "
        "spend - of $100.00"
    )
    stopped = sweep_object(trials={**sweep_object()["trials"], "stopped": 3})
    assert "0 failed, 3 stopped; best" in display.sweep_line(stopped)


def test_status_of_a_sweep_shows_its_progress_and_best_trial(capsys):
    with Stubbed() as s:
        s.answer(sweep_job())
        assert main(["status", NAME], client=s.client) == 0
    lines = capsys.readouterr().out.splitlines()
    progress = display.sweep_line(sweep_object())
    assert any(line.startswith("sweep ") and line.endswith(progress) for line in lines)
    assert lines[-7:] == [
        "sweep:",
        f"  tuning job: {NAME}",
        "  objective: minimize eval_loss, Bayesian",
        "  trials: up to 20, 4 at a time",
        f"  best: trial {NAME}-007-3f2a, eval_loss 0.3124",
        "    learning_rate=3e-05, per_device_train_batch_size=16",
        "  spend: $41.20 of cap $100.00 (worst case $80.00)",
    ]


def test_list_shows_a_sweep_with_its_progress_under_its_row():
    text = display.jobs_table([job("plain-1"), sweep_job(), job("plain-2")])
    lines = text.splitlines()
    assert lines[0].startswith("JOB") and lines[1].startswith("plain-1")
    assert lines[2].startswith(NAME) and "bert-large-qa (sweep)" in lines[2]
    assert lines[2].endswith("$41.20")  # its spend until the launcher gives a cost
    assert lines[3] == f"  {display.sweep_line(sweep_object())}"
    assert lines[4].startswith("plain-2") and len(lines) == 5


def test_watching_a_sweep_prints_a_line_per_finished_trial_and_its_outcome(capsys):
    def at(completed: int, status: str = "InProgress") -> dict[str, Any]:
        trials = {**sweep_object()["trials"], "completed": completed}
        return sweep_job(status=status, sweep=sweep_object(trials=trials))

    p = Progress(job=at(12), started_at=parse_time(job()["created_at"]))
    p.observe(at(12))
    p.observe(at(12))
    assert not p.changed
    p.observe(at(13))
    assert p.changed and p.history == [("InProgress", None)]
    assert display.progress_line(p).endswith(f"spend $41.20 of $100.00  {NAME}")
    assert "spot interruptions" not in display.progress_line(p)
    with Stubbed() as s:
        s.answer(accepted())
        s.answer(at(20, "Completed"))
        assert main([*BASE, "--range", "lr=1:2", "--wait"], client=s.client) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"started sweep {NAME}" and not any("watch:" in line for line in out)
    end = out.index(f"Completed: {NAME}")
    assert out[end + 1].startswith("  trials 20/20 done, 3 running")
    assert "    learning_rate=3e-05, per_device_train_batch_size=16" in out[end:]


def test_stopping_a_sweep_says_its_trials_stop(capsys):
    with Stubbed() as s:
        s.answer(sweep_job())
        s.answer(sweep_job(status="Stopping"))
        assert main(["stop", NAME], client=s.client) == 0
    assert capsys.readouterr().out == (
        f"{NAME}: stopping the sweep (its running trials stop; no new trial starts)\n"
    )
