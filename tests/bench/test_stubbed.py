"""``bench/_stubbed.py``: the stubbed submit answers the calls a real submit makes, and says so
loudly when the submit's calls and its answers part (issue 35: the hand-written stubs went
stale and the benchmark measured an ``UpstreamError``)."""

from __future__ import annotations

import pytest

from bench import _stubbed as S
from bench._common import handler_output_discarded, trigger_asset
from testsupport import TRIGGER_ENV


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    asset = trigger_asset(tmp_path_factory.mktemp("stubbed") / "asset")
    with handler_output_discarded():
        recording = S.record(asset, TRIGGER_ENV, status="InProgress", name="handler_rec_t")
    return asset, recording


def test_a_warm_direct_submit_makes_the_calls_the_benchmarks_describe(recorded):
    _, recording = recorded
    S.check_calls(recording, S.DIRECT, "direct")
    # A cold container also reads the price item the price refresh keeps.
    assert [c.label for c in recording.first] == ["dynamodb:GetItem", *S.DIRECT]


def test_a_changed_sequence_names_both():
    recording = S.Recording(first=(), warm=(S.Call("dynamodb", "GetItem", {}),))
    with pytest.raises(S.CallsChanged, match=r"expected \['dynamodb:PutItem'\]") as info:
        S.check_calls(recording, ["dynamodb:PutItem"], "direct")
    assert "made     ['dynamodb:GetItem']" in str(info.value)


def test_a_call_without_its_answer_stops_the_benchmark(recorded):
    asset, recording = recorded
    short = S.Recording(first=recording.first, warm=recording.warm[:-1])
    submit = S.StubbedSubmit(asset, "handler_short_t", TRIGGER_ENV, short, "InProgress")
    with handler_output_discarded():
        submit.submit()  # the cold submit has all its answers
        # The start's write goes unanswered: the launcher survives it (its answer says the
        # record is pending), and the benchmark stops on either sign.
        with pytest.raises(S.CallsChanged, match="not status InProgress|where the recording"):
            submit.submit()


def test_an_answer_left_over_stops_the_benchmark(recorded):
    asset, recording = recorded
    extra = S.Call("sagemaker", "CreateTrainingJob", {"TrainingJobArn": "arn:x"})
    long = S.Recording(first=recording.first, warm=(*recording.warm, extra))
    submit = S.StubbedSubmit(asset, "handler_long_t", TRIGGER_ENV, long, "InProgress")
    with handler_output_discarded():
        submit.submit()
        with pytest.raises(S.CallsChanged, match="where the recording has"):
            submit.submit()
