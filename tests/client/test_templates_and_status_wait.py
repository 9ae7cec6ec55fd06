"""Issue 18, point 6: ``ftl templates`` shows legacy templates, each input channel (required
or not, and its default data) and choices that cannot be misread; ``ftl status --wait``."""

from __future__ import annotations

from ftl_client.cli import main
from ftl_client.display import hyperparameter, templates_table
from tests.client.support import Stubbed, job

TEMPLATE = {
    "name": "gpt-tp-sharded",
    "distribution": "smp",
    "instance_types": ["ml.p4d.24xlarge"],
    "default_instance_type": "ml.p4d.24xlarge",
    "default_instance_count": 2,
    "max_instance_count": 16,
    "spot": True,
    "max_runtime_seconds": 86400,
    "inputs": ["train", "model"],
    "channels": [
        {
            "name": "train",
            "required": True,
            "default_prefix": "gpt-corpus/train/",
            "default_s3_uri": "s3://data-b/gpt-corpus/train/",
        },
        {"name": "model", "required": False, "default_prefix": None, "default_s3_uri": None},
    ],
    "hyperparameters": {
        "overridable": {"fsdp": {"type": "str", "choices": ["", "full_shard auto_wrap"]}}
    },
    "legacy": "SMP v1 on transformers 4.26 / PyTorch 1.13, out of support",
}


def test_legacy_templates_are_marked_with_their_reason():
    lines = templates_table([TEMPLATE]).splitlines()
    assert lines[0].split()[:2] == ["TEMPLATE", "DIST"]
    assert "(legacy)" in lines[2]
    assert lines[-1] == (
        "legacy: gpt-tp-sharded: SMP v1 on transformers 4.26 / PyTorch 1.13, out of support"
    )
    assert "legacy" not in templates_table([{**TEMPLATE, "legacy": None}])


def test_input_channels_say_required_and_where_the_default_data_is():
    text = templates_table([TEMPLATE])
    assert "INPUTS" in text.splitlines()[0]
    assert "train (required) default s3://data-b/gpt-corpus/train/" in text
    assert "model (optional)" in text


def test_choices_are_printed_unambiguously():
    spec = TEMPLATE["hyperparameters"]["overridable"]["fsdp"]
    assert hyperparameter("fsdp", spec) == 'fsdp: str {"", "full_shard auto_wrap"}'
    assert hyperparameter("n", {"type": "int", "choices": [4, 8]}) == "n: int {4, 8}"


def test_status_wait_watches_until_the_job_ends(capsys):
    with Stubbed() as s:
        s.answer(job(status="InProgress"))
        s.answer(job(status="Completed", secondary_status="Completed"))
        code = main(
            ["status", "sbx-20261122-0153-a1b2", "--wait", "--poll", "0.001"], client=s.client
        )
    assert code == 0
    assert "Completed: sbx-20261122-0153-a1b2" in capsys.readouterr().out
    assert [e["action"] for e in s.events] == ["describe", "describe"]


def test_status_wait_exits_3_when_the_job_failed(capsys):
    with Stubbed() as s:
        s.answer(job(status="Failed", failure_reason="OOM"))
        assert main(["status", "x", "--wait", "--poll", "0.001"], client=s.client) == 3
