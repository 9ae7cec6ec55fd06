"""``ftl queue`` (issue 10; docs/CLIENT.md): every page of ``list`` with ``status=Queued``,
shown in queue order (position, unknown positions last, then oldest first) with the team,
instances, time waited and reason. Over a stubbed Lambda client, answers shaped as the
launcher sends them in queue mode."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from ftl_client.cli import main
from ftl_client.client import QUEUED, queue_order
from ftl_client.display import queue_table, waited
from jobmodel.contract.statuses import JOB_STATUSES
from tests.client.support import Stubbed, job


def queued(name: str, **fields):
    base = job(name, status="Queued", secondary_status=None, instance_type="ml.p4d.24xlarge")
    for key in ("job_arn", "console_url", "secondary_status"):
        base.pop(key)
    base.update(fields)
    return base


NOW = datetime.now(UTC)
HEADER = [
    "POS",
    "JOB",
    "TEAM",
    "SHARE",
    "INSTANCES",
    "WAITED",
    "REASON",
    "STARTS",
    "SOONER",
    "WITH",
]
FIRST = queued(
    "nlp-a",
    team="nlp-x",
    share="nlpXx",
    instance_count=2,
    queue_position=1,
    queue_reason="waiting for capacity",
    queued_at=(NOW - timedelta(minutes=12)).isoformat(),
    queued_seconds=720,
)
SECOND = queued(
    "cv-b",
    team="cv",
    share="cv",
    instance_count=4,
    queue_position=2,
    queue_reason="behind 1 jobs",
    queued_at=(NOW - timedelta(hours=3, minutes=5)).isoformat(),
    queued_seconds=11100,
)
UNKNOWN_NEWER = queued(
    "nlp-c",
    team="nlp",
    share="nlp",
    queue_reason="over quota",
    queued_at=(NOW - timedelta(seconds=40)).isoformat(),
    queued_seconds=40,
)
UNKNOWN_OLDER = queued(
    "ml-d",
    share="default",
    queue_reason="waiting for capacity",
    queued_at=(NOW - timedelta(days=2, hours=4)).isoformat(),
    queued_seconds=187200,
)


def test_queue_pages_through_queued_jobs_and_prints_them_in_queue_order(capsys):
    with Stubbed() as s:
        s.answer({"jobs": [UNKNOWN_NEWER, SECOND], "next_token": "page-2"})
        s.answer({"jobs": [UNKNOWN_OLDER, FIRST]})
        assert main(["queue"], client=s.client) == 0
    assert s.events == [
        {"action": "list", "status": "Queued"},
        {"action": "list", "status": "Queued", "next_token": "page-2"},
    ]
    out, err = capsys.readouterr()
    assert err == ""
    header, *rows = out.splitlines()
    assert header.split() == HEADER
    assert [row.split()[:2] for row in rows] == [
        ["1", "nlp-a"],
        ["2", "cv-b"],
        ["-", "ml-d"],  # no position: after those with one, oldest first
        ["-", "nlp-c"],
    ]
    # The team and its Batch share (jobmodel.capacity.scheduler.share_of), then the instances.
    assert rows[0].split()[2:8] == ["nlp-x", "nlpXx", "2", "x", "ml.p4d.24xlarge", "12m"]
    assert "waiting for capacity" in rows[0]
    assert rows[1].split()[7] == "3h05m"
    assert rows[2].split()[2] == "-"  # a job without a team (single-team deployment)
    assert rows[2].split()[7] == "2d04h"
    assert rows[3].split()[7] == "40s" and "over quota" in rows[3]
    # the launcher gave no estimate: unknown, and no option
    assert all(row.split()[-3:] == ["start", "unknown", "-"] for row in rows)


def test_queue_json_is_the_jobs_in_queue_order(capsys):
    with Stubbed() as s:
        s.answer({"jobs": [UNKNOWN_NEWER, SECOND, UNKNOWN_OLDER, FIRST]})
        assert main(["queue", "--json"], client=s.client) == 0
    jobs = json.loads(capsys.readouterr().out)["jobs"]
    assert [j["job_name"] for j in jobs] == ["nlp-a", "cv-b", "ml-d", "nlp-c"]
    assert jobs[0] == FIRST  # the launcher's fields, unchanged


def test_an_empty_queue_says_so(capsys):
    with Stubbed() as s:
        s.answer({"jobs": []}).answer({"jobs": []})
        assert main(["queue"], client=s.client) == 0
        assert main(["--json", "queue"], client=s.client) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "queue is empty"
    assert json.loads(out.split("\n", 1)[1]) == {"jobs": []}


def test_queue_passes_the_admin_team_filter():
    with Stubbed() as s:
        s.answer({"jobs": [FIRST]})
        assert main(["queue", "--team", "nlp"], client=s.client) == 0
    assert s.events == [{"action": "list", "status": "Queued", "team": "nlp"}]


def test_a_rejected_queue_listing_is_one_error_line_and_exit_2(capsys):
    # A team member may not filter by team (docs/API.md, Isolation).
    message = "unknown field team"
    error = {"error": {"type": "ValidationError", "message": message, "field": "team"}}
    with Stubbed() as s:
        s.answer(error)
        assert main(["queue", "--team", "cv"], client=s.client) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: ValidationError: unknown field team")
    assert err.count("\n") == 1


def test_queue_order_without_positions_or_times():
    now = datetime.now(UTC)
    jobs = [
        queued("e", queue_position=True),  # not a position: treated as unknown
        queued("d"),  # nothing known: last
        queued("c", queued_seconds=30),
        queued("b", queued_at=(now - timedelta(hours=1)).isoformat()),
        queued("a", queue_position=3, queued_seconds=5),
    ]
    assert [j["job_name"] for j in sorted(jobs, key=queue_order)] == ["a", "b", "c", "d", "e"]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "-"),
        (-3, "0s"),
        (0, "0s"),
        (59.9, "59s"),
        (60, "1m"),
        (720, "12m"),
        (3599, "59m"),
        (3600, "1h00m"),
        (11100, "3h05m"),
        (86399, "23h59m"),
        (86400, "1d00h"),
        (187200, "2d04h"),
    ],
)
def test_waited_is_short_and_human(seconds, text):
    assert waited(seconds) == text


def test_waited_falls_back_to_queued_at_and_to_a_dash():
    now = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    rows = queue_table(
        [
            queued("a", queued_at="2026-11-22T11:48:00Z"),
            queued("b"),
        ],
        now=now,
    ).splitlines()[1:]
    assert rows[0].split()[7] == "12m"
    assert rows[1].split()[7] == "-"


def test_queued_is_a_contract_status():
    assert QUEUED in JOB_STATUSES


def test_queue_shows_the_estimated_start_and_what_would_start_it_sooner(capsys):
    later = (NOW + timedelta(hours=2)).replace(second=0, microsecond=0)
    estimated = {
        **FIRST,
        "estimated_start_by": later.isoformat().replace("+00:00", "Z"),
        "sooner": [
            {"option": "fewer_instances", "request": {"instance_count": 1},
             "estimated_start_by": NOW.isoformat()},
            {"option": "other_instance_type", "request": {"instance_type": "ml.p4de.24xlarge"},
             "instance_types": ["ml.p4de.24xlarge"]},
            {"option": "on_demand", "request": {"spot": False}},
        ],
    }  # fmt: skip
    unknown = {
        **SECOND,
        "estimated_start_by": None,
        "estimated_start_unknown_reason": "a running job ...",
        "sooner": [],
    }
    with Stubbed() as s:
        s.answer({"jobs": [unknown, estimated]})
        assert main(["queue"], client=s.client) == 0
    _, first, second = capsys.readouterr().out.splitlines()
    shown = (
        later.strftime("%H:%M") if later.date() == NOW.date() else later.strftime("%Y-%m-%d %H:%M")
    )
    assert f"starts by ~{shown} UTC (upper bound)" in first
    assert first.endswith(
        "1 instance (starts now); another type: ml.p4de.24xlarge; on-demand (spot off)"
    )
    assert second.split()[-3:] == ["start", "unknown", "-"]
    with Stubbed() as s:
        s.answer({"jobs": [unknown, estimated]})
        assert main(["queue", "--json"], client=s.client) == 0
    jobs = json.loads(capsys.readouterr().out)["jobs"]
    assert jobs == [estimated, unknown]  # the launcher's fields, unchanged
