"""``ftl queue`` against the real trigger handler in queue mode (moto for DynamoDB and
SageMaker, the sandbox's AWS Batch stand-in for the service jobs): what the client prints is
the launcher's queue, in Batch's dispatch order, with the launcher's reasons."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from ftl_client import LauncherClient
from ftl_client.cli import main
from tests.unit.trigger.conftest import QueueLauncher, queue_launcher


@pytest.fixture
def one_slot(monkeypatch, tmp_path) -> Iterator[QueueLauncher]:
    """The trigger in queue mode on a queue of one instance: one job runs, the rest wait."""
    from sandbox.batch_api import BatchSandbox

    with BatchSandbox() as sandbox:
        yield queue_launcher(sandbox, monkeypatch, tmp_path, capacity=1)


class HandlerLambda:
    """A Lambda client whose Invoke runs the loaded trigger handler in this process."""

    def __init__(self, launcher: Any) -> None:
        self.launcher = launcher
        self.events: list[dict] = []

    def invoke(self, FunctionName: str, Payload: bytes) -> dict:  # noqa: N803 (boto3's names)
        event = json.loads(Payload)
        self.events.append(event)
        body = json.dumps(self.launcher(event)).encode()
        return {"StatusCode": 200, "Payload": io.BytesIO(body)}


def test_ftl_queue_shows_the_waiting_jobs_in_dispatch_order(one_slot, capsys):
    launcher, prefix = one_slot, f"t{uuid.uuid4().hex[:10]}"
    submit = {"template": "distilbert-spot"}
    running = launcher({**submit, "job_name": prefix})
    waiting = [launcher({**submit, "job_name": f"{prefix}-{i}"})["job_name"] for i in range(3)]
    launcher({"action": "describe", "job_name": running["job_name"]})  # the first one runs
    capsys.readouterr()  # the trigger's own output (its fleet metric lines) so far
    lam = HandlerLambda(launcher)
    client = LauncherClient(
        function_name="ftl-trigger", region="us-east-1", clients={"lambda": lam}
    )

    assert main(["queue"], client=client) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert lam.events == [{"action": "list", "status": "Queued"}]
    assert header.split()[:7] == ["POS", "JOB", "TEAM", "SHARE", "INSTANCES", "WAITED", "REASON"]
    # a single-team platform: no team, the one share "default"
    # (jobmodel.capacity.scheduler.share_of)
    assert [row.split()[:4] for row in rows] == [
        ["1", waiting[0], "-", "default"],
        ["2", waiting[1], "-", "default"],
        ["3", waiting[2], "-", "default"],
    ]
    assert all(" 1 x ml.g5.xlarge " in row for row in rows)
    assert "behind 2 jobs" in rows[2]
    # this queue's trigger does not know the capacity (no FTL_QUEUE_CAPACITY): no estimate
    # (the spot jobs could still start training sooner on-demand)
    assert all("start unknown" in row and row.endswith("on-demand (spot off)") for row in rows)

    assert main(["queue", "--json"], client=client) == 0
    jobs = json.loads(capsys.readouterr().out)["jobs"]
    assert [j["job_name"] for j in jobs] == waiting
    assert all(j["status"] == "Queued" and j["queued_seconds"] >= 0 for j in jobs)
    assert all(j["share"] == "default" for j in jobs)
    assert all(
        j["estimated_start_by"] is None and j["estimated_start_unknown_reason"] for j in jobs
    )
