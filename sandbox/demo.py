"""`make demo`: deploy the platform into a local moto sandbox and start the BERT-large job.

Everything runs on this machine: moto's server on localhost, the pinned CDK CLI, and a real
Lambda Invoke of the deployed trigger (the sandbox runs the deployed zip with the deployed
configuration, since moto needs Docker to run Lambda code).

``--queue`` (`make demo-queue`) runs the queue-mode demo instead (``sandbox/queue_demo.py``),
``--chain`` (`make demo-chain`) the capacity-chain demo (``sandbox/chain_demo.py``),
``--sweep`` (`make demo-sweep`) the hyperparameter-sweep demo (``sandbox/sweep_demo.py``);
``--serve`` (`make sandbox`) keeps the sandbox up afterwards on ``localhost:4566``, or on a free
port when 4566 is taken (``--port N`` asks for one), and prints the ``export`` lines for a
second shell (``sandbox/shell.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys

import boto3

from sandbox.batch_api import BatchSandbox
from sandbox.demo_registry import show_model_version
from sandbox.deploy import deploy, sandbox_env
from sandbox.metric_lines import MetricLines
from sandbox.moto_notices import summary, unsupported_notices
from sandbox.pricing import refresh_after_deploy
from sandbox.shell import (
    TEAM_INVOKE_OUTPUT,
    PortInUse,
    choose_port,
    serve_forever,
    teams_context,
)
from sandbox.tracking_demo import show_tracking, tracking_context

REQUEST = {
    "template": "bert-large-qa",
    "job_name": "squad-demo",
    "hyperparameters": {"learning_rate": 3e-5, "num_train_epochs": 2},
    "instance_count": 2,
    "tags": {"team": "nlp"},
    "client_token": "demo-squad-1",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m sandbox.demo", description=__doc__)
    parser.add_argument("--queue", action="store_true", help="the queue-mode demo")
    parser.add_argument(
        "--chain", action="store_true", help="the capacity-chain demo (spot, on-demand, plan)"
    )
    parser.add_argument(
        "--sweep",
        action="store_true",
        help="the sweep demo (a tuning job's trials to its registered, evaluated best)",
    )
    parser.add_argument(
        "--serve", action="store_true", help="keep the sandbox up for the ftl client"
    )
    parser.add_argument(
        "--port", type=int, metavar="N", help="with --serve: listen on N (default 4566)"
    )
    parser.add_argument(
        "--teams",
        action="store_true",
        help="deploy with two teams (nlp, yours; vision) and an admin",
    )
    parser.add_argument(
        "--run-seconds",
        type=float,
        default=30.0,
        metavar="S",
        help="queue mode with --serve: a started training job completes after S seconds "
        "(default 30)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    serve = args.serve
    port = None
    if serve:
        try:
            port, note = choose_port(args.port)
        except PortInUse as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if note:
            print(note)
    if args.chain:
        from sandbox.chain_demo import run as run_chain

        return run_chain(port=port)
    if args.sweep:
        from sandbox.sweep_demo import run as run_sweep

        return run_sweep(port=port)
    if args.queue:
        from sandbox.queue_demo import run

        return run(serve=serve, port=port, teams=args.teams, run_seconds=args.run_seconds)
    context = {**(teams_context() if args.teams else {}), **tracking_context()}
    with contextlib.redirect_stdout(MetricLines(sys.stdout)), BatchSandbox(port=port) as sandbox:
        print(f"moto sandbox on {sandbox.endpoint}; deploying every stack with the pinned CDK CLI")
        os.environ.update(sandbox_env(sandbox.endpoint))  # every AWS call goes to the sandbox
        with unsupported_notices() as skipped:
            outputs = deploy(sandbox.endpoint, context=context)
        if skipped:
            print(summary(skipped))
        timings = deploy.timings  # type: ignore[attr-defined]
        print(f"bootstrap {timings['bootstrap_s']:.1f}s, deploy {timings['deploy_s']:.1f}s")
        print(json.dumps(outputs, indent=2))
        flat = {k: v for stack in outputs.values() for k, v in stack.items()}
        # After a deploy the platform loads prices from the Price List API (here its stand-in).
        (priced,) = refresh_after_deploy(sandbox, "ftl-launcher")
        print(f"prices from the Price List stand-in (sandbox/pricing.py): {priced.response}")

        # With teams the direct door is the team's alias (the unqualified function refuses).
        target = flat.get(TEAM_INVOKE_OUTPUT, flat["TriggerFunctionName"])
        print(f"\nlambda invoke {target}:\n{json.dumps(REQUEST, indent=2)}")
        reply = boto3.client("lambda").invoke(
            FunctionName=target, Payload=json.dumps(REQUEST).encode()
        )
        job = json.loads(reply["Payload"].read())
        if "error" in job:
            print(json.dumps(job, indent=2))
            return 1
        print(json.dumps(job, indent=2))

        show_training_job(sandbox.endpoint, job["job_name"], flat["JobTableName"])
        show_tracking(boto3.client("lambda"), target, job["job_name"])
        show_model_version(target, job["job_name"])  # the registered model version
        if serve:
            serve_forever(sandbox.endpoint, outputs)
    return 0


def show_training_job(endpoint: str, job_name: str, table: str) -> None:
    """The started job as SageMaker (moto) describes it and as the job ledger recorded it."""
    kwargs = {"endpoint_url": endpoint, "region_name": "us-east-1"}
    described = boto3.client("sagemaker", **kwargs).describe_training_job(TrainingJobName=job_name)
    ledger = boto3.client("dynamodb", **kwargs).get_item(
        TableName=table, Key={"pk": {"S": f"job#{job_name}"}}
    )["Item"]
    # moto keeps no Environment or RetryStrategy; the ledger holds the exact request sent.
    sent = json.loads(ledger["rendered"]["S"])
    hp = described["HyperParameters"]
    distribution = [
        k
        for k in (
            "sagemaker_distributed_dataparallel_enabled",
            "sagemaker_torch_distributed_enabled",
            "sagemaker_mpi_enabled",
            "mp_parameters",
        )
        if k in hp
    ]
    print("\nthe training job, read back from SageMaker (moto) and the job ledger:")
    rows = [
        ("job", described["TrainingJobName"]),
        ("instance type", described["ResourceConfig"]["InstanceType"]),
        ("instance count", described["ResourceConfig"]["InstanceCount"]),
        ("managed spot", described["EnableManagedSpotTraining"]),
        (
            "max run / max wait",
            f"{described['StoppingCondition']['MaxRuntimeInSeconds']}s / "
            f"{described['StoppingCondition']['MaxWaitTimeInSeconds']}s",
        ),
        ("checkpoint URI", described["CheckpointConfig"]["S3Uri"]),
        ("distribution", ", ".join(f"{k}={hp[k]}" for k in distribution)),
        ("environment", json.dumps(sent.get("Environment", {}))),
        ("retry strategy", json.dumps(sent.get("RetryStrategy"))),
        ("image", described["AlgorithmSpecification"]["TrainingImage"]),
        ("requested by", ledger["requested_by"]["S"]),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"  {key:<{width}}  {value}")


if __name__ == "__main__":
    sys.exit(main())
