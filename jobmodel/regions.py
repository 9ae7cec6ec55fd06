"""Where the platform can run: a static table for ``ftl doctor`` (no AWS call, no SDK import).

Sources and dates (regenerate with ``tests/infra/test_region_table.py``, which pins both to
their sources):

* :data:`SAGEMAKER_REGIONS`: the regions botocore 1.44.5's endpoint data lists for the
  SageMaker API (``get_available_regions("sagemaker")``), read 2026-11; commercial partition.
* :data:`BATCH_REGIONS`: the same data for AWS Batch. Queue mode needs AWS Batch for SageMaker
  training jobs (service environments); AWS publishes no per-region list of that feature in
  any data this project pins, so the table says where Batch itself is, and ``ftl doctor``
  says so.
* :data:`IMAGE_REGIONS`: per image family, the regions where the shipped templates' training
  images exist, from the SageMaker SDK's image tables that synth resolves images with
  (``ftl_constructs/job_template.py``; sagemaker-core's ``image_uri_config``), read 2026-11.
  Synth fails in a region without a template's image, naming the template.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

__all__ = ["BATCH_REGIONS", "IMAGE_REGIONS", "SAGEMAKER_REGIONS", "image_family"]

SAGEMAKER_REGIONS: frozenset[str] = frozenset(
    {
        "af-south-1", "ap-east-1", "ap-east-2", "ap-northeast-1", "ap-northeast-2",
        "ap-northeast-3", "ap-south-1", "ap-south-2", "ap-southeast-1", "ap-southeast-2",
        "ap-southeast-3", "ap-southeast-4", "ap-southeast-5", "ap-southeast-6", "ap-southeast-7",
        "ca-central-1", "ca-west-1", "eu-central-1", "eu-central-2", "eu-north-1", "eu-south-1",
        "eu-south-2", "eu-west-1", "eu-west-2", "eu-west-3", "il-central-1", "me-central-1",
        "me-south-1", "mx-central-1", "sa-east-1", "us-east-1", "us-east-2", "us-west-1",
        "us-west-2",
    }
)  # fmt: skip
BATCH_REGIONS: frozenset[str] = SAGEMAKER_REGIONS  # botocore 1.44.5 lists Batch in each

_NO_IMAGES = frozenset(
    {
        "ap-east-2", "ap-south-2", "ap-southeast-4", "ap-southeast-5", "ap-southeast-6",
        "ap-southeast-7", "eu-central-2", "eu-south-2", "mx-central-1",
    }
)  # fmt: skip
_NO_SMP_IMAGES = _NO_IMAGES | frozenset(
    {
        "af-south-1", "ap-east-1", "ap-southeast-3", "ca-west-1", "eu-south-1", "il-central-1",
        "me-central-1", "me-south-1",
    }
)  # fmt: skip
IMAGE_REGIONS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "huggingface": SAGEMAKER_REGIONS - _NO_IMAGES,
        "pytorch-smp": SAGEMAKER_REGIONS - _NO_SMP_IMAGES,
    }
)


def image_family(framework: Mapping[str, Any]) -> str:
    """A template's image family (its ``framework.image_family``, Hugging Face by default)."""
    return str(framework.get("image_family", "huggingface"))
