"""The deployed functions' EMF lines show as one short line in the demo and while
``make sandbox`` serves (issue 18, point 10), not as a raw JSON object."""

from __future__ import annotations

import contextlib
import io
import json

from sandbox.metric_lines import MetricLines, metric_summary

EMF = {
    "_aws": {
        "Timestamp": 1,
        "CloudWatchMetrics": [
            {
                "Namespace": "ftl",
                "Dimensions": [["Platform"]],
                "Metrics": [{"Name": "JobsStarted"}, {"Name": "InstancesRunningChange"}],
            }
        ],
    },
    "Platform": "ftl",
    "JobName": "squad-demo-1",
    "JobsStarted": 1,
    "InstancesRunningChange": 2.0,
}


def test_an_emf_line_becomes_one_short_line():
    assert metric_summary(json.dumps(EMF)) == (
        "    [fleet metrics, EMF] squad-demo-1: JobsStarted 1, InstancesRunningChange 2"
    )
    assert metric_summary("plain text") == "plain text"
    assert metric_summary('{"not": "emf"}') == '{"not": "emf"}'


def test_printing_through_metric_lines(capsys):
    out = io.StringIO()
    with contextlib.redirect_stdout(MetricLines(out)):
        print("deploying")
        print(json.dumps(EMF))
    assert out.getvalue().splitlines() == [
        "deploying",
        "    [fleet metrics, EMF] squad-demo-1: JobsStarted 1, InstancesRunningChange 2",
    ]
    assert "_aws" not in out.getvalue()
