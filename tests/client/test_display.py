"""Tables, the progress display and the outcome, with a fixed clock."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

from ftl_client import display
from ftl_client.client import Progress, parse_time
from ftl_client.display import (
    ProgressDisplay,
    duration,
    job_detail,
    jobs_table,
    outcome,
    progress_line,
    table,
    templates_table,
)
from tests.client.support import job

CREATED = datetime(2026, 11, 22, 1, 53, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return CREATED + timedelta(seconds=seconds)


def progress_of(*states: tuple[str, str | None]) -> Progress:
    p = Progress(job=job(), started_at=parse_time(job()["created_at"]))
    for status, secondary in states:
        p.observe(job(status=status, secondary_status=secondary))
    return p


def test_duration():
    assert duration(0) == "0:00:00"
    assert duration(3725) == "1:02:05"
    assert duration(90000) == "25:00:00"
    assert duration(None) == "-"


def test_table_aligns_columns_and_spans_multi_line_cells():
    text = table(["A", "BB"], [["x", ["one", "two"]], ["long-name", "z"]])
    assert text.splitlines() == [
        "A          BB",
        "x          one",
        "           two",
        "long-name  z",
    ]


def test_templates_table_shows_instance_types_and_overridable_hyperparameters():
    template = {
        "name": "bert-large-qa",
        "distribution": "smddp",
        "instance_types": ["ml.p4d.24xlarge", "ml.p4de.24xlarge"],
        "default_instance_type": "ml.p4d.24xlarge",
        "default_instance_count": 2,
        "max_instance_count": 16,
        "spot": True,
        "max_runtime_seconds": 86400,
        "hyperparameters": {
            "overridable": {
                "learning_rate": {"type": "float", "min": 1e-6, "max": 1e-3},
                "per_device_train_batch_size": {"type": "int", "choices": [4, 8]},
            }
        },
    }
    text = templates_table([template])
    assert "bert-large-qa" in text and "2 (max 16)" in text and " 24h " in text
    assert "ml.p4d.24xlarge*" in text and "ml.p4de.24xlarge" in text
    assert "learning_rate: float 1e-06..0.001" in text
    assert "per_device_train_batch_size: int {4, 8}" in text


def test_jobs_table():
    text = jobs_table([job(billable_seconds=300, spot_savings_percent=70.0)])
    assert "sbx-20261122-0153-a1b2" in text and "1 x ml.g5.xlarge" in text
    assert "0:05:00" in text and "70.0%" in text and "2026-11-22 01:53" in text


def test_spot_interruptions_count_transitions_into_interrupted():
    p = progress_of(
        ("InProgress", "Starting"),
        ("InProgress", "Training"),
        ("InProgress", "Interrupted"),
        ("InProgress", "Interrupted"),
        ("InProgress", "Starting"),
        ("InProgress", "Training"),
        ("InProgress", "Interrupted"),
        ("InProgress", "Training"),
    )
    assert p.interruptions == 2


def test_the_launchers_count_of_interruptions_wins_over_what_polling_saw():
    p = progress_of(("InProgress", "Training"))
    # Polls every few seconds can miss an interruption; SageMaker's transitions do not.
    p.observe(job(status="Completed", secondary_status="Completed", spot_interruptions=3))
    assert p.interruptions == 3
    p.observe(job(status="Completed", secondary_status="Completed"))
    assert p.interruptions == 3  # never goes down


def test_final_metrics_come_from_describe():
    p = progress_of(("InProgress", "Training"))
    assert p.final_metrics == {}
    p.observe(job(status="Completed", final_metrics={"eval_f1": 91.2}))
    assert p.final_metrics == {"eval_f1": 91.2}


def test_progress_line():
    p = progress_of(("InProgress", "Training"))
    line = progress_line(p, at(3725))
    assert line == "[1:02:05] InProgress / Training  spot interruptions: 0  sbx-20261122-0153-a1b2"
    assert progress_line(progress_of(("Completed", "Completed")), at(5)).startswith(
        "[0:00:05] Completed  "
    )


def test_display_prints_one_line_per_change_when_not_a_terminal():
    out = io.StringIO()
    display = ProgressDisplay(out, tty=False, clock=lambda: at(60), sleeper=lambda s: None)
    p = Progress(job=job(), started_at=CREATED)
    for secondary in ("Starting", "Starting", "Training", "Training", "Interrupted"):
        p.observe(job(secondary_status=secondary))
        display.update(p)
        display.sleep(15)
    display.finish()
    lines = out.getvalue().splitlines()
    assert [line.split("  ")[0] for line in lines] == [
        "[0:01:00] InProgress / Starting",
        "[0:01:00] InProgress / Training",
        "[0:01:00] InProgress / Interrupted",
    ]
    assert "\r" not in out.getvalue() and lines[-1].endswith(
        "spot interruptions: 1  sbx-20261122-0153-a1b2"
    )


def test_display_redraws_in_place_each_second_on_a_terminal():
    out = io.StringIO()
    now = [at(10)]
    slept = []

    def sleeper(s: float) -> None:
        slept.append(s)
        now[0] += timedelta(seconds=s)

    display = ProgressDisplay(out, tty=True, clock=lambda: now[0], sleeper=sleeper)
    p = progress_of(("InProgress", "Training"))
    display.update(p)
    display.sleep(3)
    display.finish()
    text = out.getvalue()
    assert slept == [1.0, 1.0, 1.0]
    frames = text.rstrip("\n").split("\r\x1b[2K")[1:]
    assert [f.split(" ")[0] for f in frames] == ["[0:00:10]", "[0:00:11]", "[0:00:12]", "[0:00:13]"]
    assert text.endswith("\n") and text.count("\n") == 1


def test_outcome_lists_metrics_billable_time_and_savings():
    p = progress_of(
        ("Completed", "Completed"),
    )
    p.job.update(billable_seconds=300, training_seconds=1000, spot_savings_percent=70.0)
    text = outcome(p, {"eval_f1": 91.234567, "train_loss": 0.125})
    assert text.splitlines() == [
        "Completed: sbx-20261122-0153-a1b2",
        "  final metrics: eval_f1=91.2346  train_loss=0.125",
        "  billable time: 0:05:00 of 0:16:40 training",
        "  spot savings: 70.0%",
        "  spot interruptions: 0",
        "  output: s3://artifacts/sbx-20261122-0153-a1b2/",
    ]


def test_outcome_of_a_failed_job_names_the_reason():
    p = progress_of(("Failed", "Failed"))
    p.job["failure_reason"] = "AlgorithmError: CUDA out of memory"
    text = outcome(p)
    assert text.splitlines()[:2] == [
        "Failed: sbx-20261122-0153-a1b2",
        "  failure reason: AlgorithmError: CUDA out of memory",
    ]
    assert "output:" not in text


def test_status_shows_a_queued_jobs_estimated_start_and_sooner_options():
    """``ftl status`` of a Queued job: the estimate as an upper bound, the options on one
    line, and the reason when the estimate is unknown."""
    now = datetime.now(UTC)
    later = (now + timedelta(days=2)).replace(microsecond=0)
    stamp = later.isoformat().replace("+00:00", "Z")
    fewer = {"option": "fewer_instances", "request": {"instance_count": 2},
             "estimated_start_by": (now + timedelta(days=1)).isoformat()}  # fmt: skip
    text = job_detail(job("q", status="Queued", estimated_start_by=stamp, sooner=[fewer]))
    lines = dict(line.split(None, 1) for line in text.splitlines())
    assert lines["estimated_start_by"] == (
        f"{stamp} (starts by ~{later.strftime('%Y-%m-%d %H:%M')} UTC (upper bound))"
    )
    assert lines["sooner"].startswith("2 instances (starts by ~")
    reason = "the queue's capacity is not known to this launcher (FTL_QUEUE_CAPACITY)"
    text = job_detail(
        job("q", status="Queued", estimated_start_by=None, estimated_start_unknown_reason=reason,
            sooner=[])
    )  # fmt: skip
    lines = dict(line.split(None, 1) for line in text.splitlines())
    assert "estimated_start_by" not in lines and lines["estimated_start_unknown_reason"] == reason
    assert lines["sooner"] == "-"


def test_status_shows_a_chained_jobs_attempts_with_their_costs():
    job = {
        "job_name": "j",
        "status": "Completed",
        "capacity_chain": ["spot", "on-demand"],
        "attempts": [
            {
                "attempt": 1,
                "instance_type": "ml.g5.xlarge",
                "instance_count": 1,
                "capacity": "spot",
                "status": "Stopped",
                "started_at": "2026-01-01T00:00:00.000Z",
                "ended_at": "2026-01-01T00:30:00.000Z",
                "billable_seconds": 0,
                "cost_usd": 0.0,
            },
            {
                "attempt": 2,
                "instance_type": "ml.g6.xlarge",
                "instance_count": 1,
                "capacity": "on-demand",
                "status": "Completed",
                "started_at": "2026-01-01T00:30:01.000Z",
                "ended_at": None,
                "billable_seconds": 600,
                "cost_usd": 0.3333,
            },
        ],
    }
    text = display.job_detail(job)
    assert "capacity_chain  spot, on-demand" in text
    lines = text.splitlines()
    header = lines.index("attempts:") + 1
    assert lines[header].split() == [
        "#",
        "TYPE",
        "COUNT",
        "CAPACITY",
        "STATUS",
        "START",
        "END",
        "BILLABLE",
        "COST",
    ]
    assert lines[header + 1].split() == [
        "1",
        "ml.g5.xlarge",
        "1",
        "spot",
        "Stopped",
        "2026-01-01T00:00:00.000Z",
        "2026-01-01T00:30:00.000Z",
        "0s",
        "$0.00",
    ]
    assert lines[header + 2].split()[1:] == [
        "ml.g6.xlarge",
        "1",
        "on-demand",
        "Completed",
        "2026-01-01T00:30:01.000Z",
        "-",
        "600s",
        "$0.33",
    ]


def test_describe_shows_the_mlflow_run():
    from ftl_client.display import job_detail

    text = job_detail(
        {
            "job_name": "j",
            "tracking": {
                "mlflow_resource_arn": "arn:aws:sagemaker:us-east-1:1:mlflow-app/app-1",
                "experiment_name": "ftl/team-a",
                "run_name": "j",
            },
        }
    )
    assert "tracking  run j in ftl/team-a on arn:aws:sagemaker:us-east-1:1:mlflow-app/app-1" in text


def test_describe_shows_the_evaluation_and_its_verdict():
    """Issue 36: the evaluation job, its status, the gate's verdict and reason, the metrics."""
    from ftl_client.display import job_detail

    evaluation = {"job_name": "j-eval", "status": "Completed", "verdict": "Rejected",
                  "reason": "gate failed: eval_f1 80 is below the minimum 85",
                  "metrics": {"eval_f1": 80.0, "eval_exact_match": 71.5}}  # fmt: skip
    text = job_detail({"job_name": "j", "evaluation": evaluation})
    assert (
        "evaluation  j-eval Completed; verdict Rejected: gate failed: eval_f1 80 is below the "
        "minimum 85; eval_exact_match=71.5, eval_f1=80"
    ) in text
    started = job_detail(
        {"job_name": "j", "evaluation": {"job_name": "j-eval", "status": "InProgress"}}
    )
    assert "evaluation  j-eval InProgress" in started


def test_list_shows_each_jobs_evaluation_and_marks_the_evaluation_job():
    """Issue 36: an evaluated job's line carries its evaluation's status, then its verdict;
    the evaluation job has its own line, its template marked as the evaluation."""
    base = {"template": "distilbert-spot", "status": "Completed"}
    text = jobs_table(
        [
            job(**base, job_name="j", evaluation={"job_name": "j-eval", "status": "InProgress"}),
            job(**base, job_name="k", evaluation={"status": "Completed", "verdict": "Rejected"}),
            job(**base, job_name="m", evaluation={"job_name": "m-eval", "status": "Refused"}),
            job(**{**base, "status": "InProgress"}, job_name="j-eval", kind="evaluation"),
            job(**base, job_name="n"),
        ]
    )
    lines = {line.split()[0]: line for line in text.splitlines()[1:]}
    assert "Completed; eval InProgress" in lines["j"], text
    assert "Completed; eval Rejected" in lines["k"] and "Completed; eval Refused" in lines["m"]
    assert "distilbert-spot (evaluation)" in lines["j-eval"] and "eval" not in lines["n"]
