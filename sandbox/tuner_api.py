"""The tuner stand-in (``sandbox/tuner.py``) on the sandbox's endpoint.

``tuner_layer`` sits in front of the other layers of a ``BatchSandbox`` and is always on.
Requests signed for ``sagemaker`` (SigV4 scope) in SageMaker's JSON protocol
(``X-Amz-Target: SageMaker.<Operation>``) go to the stand-in when they are:

* ``CreateHyperParameterTuningJob``, ``DescribeHyperParameterTuningJob``,
  ``ListTrainingJobsForHyperParameterTuningJob`` and ``StopHyperParameterTuningJob``: always
  (moto never sees a tuning job, so an unknown name is the stand-in's ``ResourceNotFound``);
* ``DescribeTrainingJob`` of a trial the stand-in launched;
* ``ListTags`` of a tuning job's or a trial's ARN.

Everything else goes on to the next layer (and moto) unchanged, the body replayed. Errors
come back in SageMaker's JSON error shape (``__type``, ``Message``, HTTP 400), so boto3
raises the ``ClientError`` AWS would; a request that breaks botocore's model is a
``ValidationException``.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError, ParamValidationError

from sandbox.json_protocol import Replay, answer, jsonable, read_json, signed_for
from sandbox.tuner import TunerStandIn

__all__ = ["OPERATIONS", "tuner_layer"]

OPERATIONS = {
    "SageMaker.CreateHyperParameterTuningJob": "create_hyper_parameter_tuning_job",
    "SageMaker.DescribeHyperParameterTuningJob": "describe_hyper_parameter_tuning_job",
    "SageMaker.ListTrainingJobsForHyperParameterTuningJob": (
        "list_training_jobs_for_hyper_parameter_tuning_job"
    ),
    "SageMaker.StopHyperParameterTuningJob": "stop_hyper_parameter_tuning_job",
    "SageMaker.DescribeTrainingJob": "describe_training_job",
    "SageMaker.ListTags": "list_tags",
}


def _mine(standin: TunerStandIn, method: str, body: dict[str, Any]) -> bool:
    if method == "describe_training_job":
        return standin.owns_training_job(str(body.get("TrainingJobName")))
    if method == "list_tags":
        return standin.owns_arn(str(body.get("ResourceArn")))
    return True


def tuner_layer(app: Any, standin: TunerStandIn) -> Any:
    """Route the tuner's operations to ``standin`` (module docstring); the rest to ``app``."""

    def wsgi(environ: dict[str, Any], start_response: Any) -> Any:
        method = OPERATIONS.get(environ.get("HTTP_X_AMZ_TARGET", ""))
        signed = signed_for(environ)
        if method is None or signed is None or signed[0] != "sagemaker":
            return app(environ, start_response)
        raw, body = read_json(environ)
        if not isinstance(body, dict):
            out = {"__type": "ValidationException", "Message": "the body must be a JSON object"}
            return answer(start_response, out, error=True)
        if not _mine(standin, method, body):
            environ["wsgi.input"] = Replay(raw)  # not one of the stand-in's: passed on
            return app(environ, start_response)
        try:
            return answer(start_response, jsonable(getattr(standin, method)(**body)))
        except ParamValidationError as exc:
            out = {"__type": "ValidationException", "Message": str(exc)}
        except ClientError as exc:
            out = {
                "__type": exc.response["Error"]["Code"],
                "Message": exc.response["Error"]["Message"],
            }
        return answer(start_response, out, error=True)

    return wsgi
