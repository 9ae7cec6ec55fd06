"""An evaluation job's end, read (issue 36): ``evaluation.json`` from the output archive, the
outcome of every way an evaluation ends, the version's metadata within its 50 entries, the
update request, ModelMetrics on the registration, the end effect by the record's kind and the
``evaluated`` notice."""

from __future__ import annotations

import io
import json
import tarfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ftl_ledger.job_codec import from_record
from jobmodel.after_training import registry as REG
from jobmodel.evaluation import results as R
from jobmodel.evaluation import version as V
from jobmodel.evaluation.gate import Verdict
from jobmodel.jobs import effects as E
from jobmodel.jobs import notifications as N
from jobmodel.jobs.job import Job
from jobmodel.templates.evaluation_policy import EvaluationPolicy


def _tar(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, raw in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    return out.getvalue()


EVAL_JOB = {
    "job_name": "j-eval",
    "kind": "evaluation",
    "evaluation_of": "j",
    "status": "Completed",
    "training_job_name": "j-eval",
    "rendered": json.dumps({"OutputDataConfig": {"S3OutputPath": "s3://art/nlp/j-eval/"}}),
}


def test_the_result_is_read_from_the_output_archive():
    body = {"status": "Completed", "metrics": {"eval_f1": 88.0}}
    assert R.read_result(_tar({"evaluation.json": json.dumps(body).encode()})) == body
    assert (
        R.output_archive_url(Job(**EVAL_JOB)) == "s3://art/nlp/j-eval/j-eval/output/output.tar.gz"
    )
    with pytest.raises(R.ResultError, match="no evaluation.json"):
        R.read_result(_tar({"other.txt": b"x"}))
    with pytest.raises(R.ResultError, match="not a JSON object"):
        R.read_result(_tar({"evaluation.json": b"[1]"}))
    with pytest.raises(R.ResultError, match="cannot be read"):
        R.read_result(b"not a tarball")


@pytest.mark.parametrize(
    ("status", "result", "want", "reason"),
    [
        ("Completed", {"status": "Completed", "metrics": {"a": 1, "b": float("nan"), "c": True}},
         "Completed", None),
        ("Failed", {"status": "Failed", "reason": "no adapter"}, "Failed", "no adapter"),
        ("Failed", None, "Failed", "evaluation job Failed: AlgorithmError"),
        ("Stopped", None, "Failed", "evaluation job Stopped"),
        ("Completed", None, "Failed", "no results: NoSuchKey"),
        ("Completed", {"status": "Running"}, "Failed", "evaluation.json says 'Running'"),
    ],
)  # fmt: skip
def test_every_end_is_an_outcome(status, result, want, reason):
    job = Job(**{**EVAL_JOB, "status": status, "failure_reason": "AlgorithmError"})
    found = R.outcome(job, result, "NoSuchKey")
    assert found.status == want
    if reason is None:
        assert found.metrics == {"a": 1.0} and found.reason is None
    else:
        assert reason in (found.reason or "") and found.metrics == {}


def test_the_policy_comes_from_the_record_or_the_parent_and_a_bad_one_gates_nothing():
    policy = {"task_metrics": {"channel": "validation"}, "gate": [{"metric": "m", "min": 1}]}
    none = Job(job_name="j")

    def evaluation(raw):
        return Job(**{**EVAL_JOB, "evaluation_policy": raw})

    own = R.policy_of(evaluation(json.dumps(policy)), none)
    assert [g.metric for g in own.gate] == ["m"]
    parent = R.policy_of(Job(**EVAL_JOB), Job(job_name="j", evaluation={"policy": policy}))
    assert parent == own
    assert R.policy_of(evaluation("{bad"), none) == EvaluationPolicy()
    assert R.policy_of(evaluation('{"gate": 3}'), none).gate == ()


def _lineage(n: int) -> dict[str, str]:
    fixed = {"job_name": "j", "template": "t", "artifact": "full-model"}
    hps = {f"hp.k{i:02d}": str(i) for i in range(n - len(fixed) - 1)}
    return {**fixed, "metric.eval_loss": "0.1", **hps}


def test_the_evaluation_fits_the_50_entries_by_dropping_hyperparameters_last_first():
    current = {**_lineage(49), "omitted": "3"}
    found = R.Outcome(evaluation_job="j-eval", status="Completed",
                      metrics={"eval_f1": 1.0, "eval_exact_match": 2.0})  # fmt: skip
    judged = Verdict(status="Rejected", reason="r", failed=("eval_f1",))
    wanted = V.entries(found, judged, ("eval_f1",))
    assert list(wanted) == ["eval.job", "eval.status", "eval.verdict", "eval.failed",
                            "eval.eval_f1", "eval.eval_exact_match"]  # fmt: skip
    to_set, remove = V.metadata_change(current, wanted)
    after = {k: v for k, v in {**current, **to_set}.items() if k not in remove}
    assert len(after) <= REG.MAX_METADATA
    assert all(after[k] == v for k, v in wanted.items())
    assert all(k.startswith("hp.") for k in remove) and "hp.k00" in after
    assert remove == sorted(remove, reverse=True)
    assert after["omitted"] == str(3 + len(remove))


@given(
    n=st.integers(min_value=3, max_value=50),
    metrics=st.dictionaries(st.from_regex(r"[a-z_]{1,12}", fullmatch=True),
                            st.floats(allow_nan=False, allow_infinity=False), max_size=60),
    omitted=st.booleans(),
)  # fmt: skip
def test_the_metadata_never_exceeds_its_limits(n, metrics, omitted):
    current = {**_lineage(n - 1), "omitted": "2"} if omitted else _lineage(n)
    found = R.Outcome(evaluation_job="j-eval", status="Completed", metrics=metrics)
    wanted = V.entries(found, Verdict(status="PendingManualApproval", reason="r"))
    to_set, remove = V.metadata_change(current, wanted)
    after = {k: v for k, v in {**current, **to_set}.items() if k not in remove}
    assert len(after) <= REG.MAX_METADATA
    assert {"job_name", "template", "artifact", "eval.job", "eval.verdict"} <= set(after)
    assert all(len(k) <= REG.MAX_KEY and len(v) <= REG.MAX_VALUE for k, v in after.items())
    dropped = [k for k in remove if not k.startswith("eval.")]
    if dropped:
        assert after["omitted"] == str((2 if omitted else 0) + len(dropped))


def test_a_repeat_removes_nothing_and_an_earlier_evaluation_is_replaced():
    found = R.Outcome(evaluation_job="j-eval", status="Completed", metrics={"a": 1.0})
    wanted = V.entries(found, Verdict(status="PendingManualApproval", reason="r"))
    assert V.metadata_change({**_lineage(10), **wanted}, wanted) == ({}, [])
    to_set, remove = V.metadata_change({**_lineage(10), "eval.old": "2"}, wanted)
    assert remove == ["eval.old"] and to_set == wanted
    assert V.is_recorded(wanted, "j-eval") and not V.is_recorded(wanted, "k-eval")
    assert V.baseline({**wanted, "eval.b": "x", "eval.c": "inf"}) == {"a": 1.0}


def test_the_update_moves_only_a_pending_version():
    judged = Verdict(status="Rejected", reason="gate failed: x")
    pending = {"ModelPackageArn": "arn:p/1", "ModelApprovalStatus": "PendingManualApproval"}
    request = V.update_request(pending, judged, {"eval.job": "e"}, "j/evaluated")
    assert request["ModelApprovalStatus"] == "Rejected"
    assert request["ApprovalDescription"] == "gate failed: x"
    assert request["ClientToken"] == REG.client_token("j/evaluated")
    reviewed = {**pending, "ModelApprovalStatus": "Approved"}
    request = V.update_request(reviewed, judged, {"eval.job": "e"}, "j/evaluated")
    assert "ModelApprovalStatus" not in request and "ApprovalDescription" not in request
    stays = V.update_request(pending, Verdict(status="PendingManualApproval", reason="y"), {}, "d")
    assert "ModelApprovalStatus" not in stays and stays["ApprovalDescription"] == "y"


def test_a_job_that_owes_an_evaluation_is_registered_with_model_metrics():
    job = {"job_name": "j", "template": "t", "output_s3_uri": "s3://art/nlp/j/",
           "owed_effects": {"register": "j/register", "evaluate": "j/evaluate"}}  # fmt: skip
    metrics = REG.model_metrics(job["output_s3_uri"], job["owed_effects"])
    request = REG.create_request(from_record(job), "g", "j/register", metrics=metrics)
    uri = "s3://art/nlp/j/evaluation/model-metrics.json"
    assert request["ModelMetrics"] == {
        "ModelQuality": {"Statistics": {"ContentType": "application/json", "S3Uri": uri}}
    }
    assert REG.model_metrics(job["output_s3_uri"], {"register": "j/register"}) is None
    assert "ModelMetrics" not in REG.create_request(from_record(job), "g", "d")


def test_an_evaluation_jobs_end_owes_only_its_results_under_the_evaluated_jobs_id():
    assert E.owed_at_end(from_record(EVAL_JOB)) == {E.RESULTS: "j/evaluated"}
    owed = E.owed_at_end(Job(job_name="j"))
    assert owed == {"announce": "j/announce", "register": "j/register"}
    assert R.results_dedup("j") == "j/evaluated"


def test_the_write_that_gives_a_verdict_owes_the_evaluated_notice_once():
    before = {"job_name": "j", "status": "Completed", "evaluation": {"job_name": "j-eval"}}
    found = R.Outcome(evaluation_job="j-eval", status="Completed", metrics={"m": 2.0})
    judged = Verdict(status="Rejected", reason="gate failed", failed=("m",))
    view = R.parent_view(before["evaluation"], found, judged)
    after = {**before, "evaluation": view, "model_package_arn": "arn:p/3"}
    assert N.owed_notices(from_record(before), from_record(after)) == {"evaluated": "j/evaluated"}
    assert N.owed_notices(from_record(after), from_record(after)) == {}
    notice = N.job_notice(N.EVALUATED, from_record(after), "j/evaluated", region="us-east-1")
    assert notice.subject == "Evaluation of j: Rejected"
    assert notice.message["verdict"] == "Rejected" and notice.message["status"] == "Rejected"
    assert notice.message["metrics"] == {"m": 2.0} and notice.message["failed_checks"] == ["m"]
    assert notice.message["evaluation_job_name"] == "j-eval"
    assert notice.attributes["event"] == "evaluated"
    entry = N.event_entry(notice, source="ftl.ftl", bus="default")
    assert entry["DetailType"] == "FTL Evaluation Completed"


def test_models_shows_a_versions_evaluation_from_its_entries():
    found = R.Outcome(evaluation_job="j-eval", status="Completed", metrics={"m": 0.5, "n": 2.0})
    judged = Verdict(status="Rejected", reason="r", failed=("m", "n"))
    props = {**_lineage(10), **V.entries(found, judged, ("m",))}
    assert V.evaluation_view(props) == {
        "job_name": "j-eval",
        "status": "Completed",
        "verdict": "Rejected",
        "failed_checks": ["m", "n"],
        "metrics": {"m": 0.5, "n": 2.0},
    }
    assert V.evaluation_view(_lineage(10)) is None
