"""The synth-time image lookup reads the SDK's table; it must agree with the SDK's function."""

from __future__ import annotations

import pytest

from ftl_constructs.job_template import resolve_image
from jobmodel import shipped_catalog

REGIONS = ["us-east-1", "eu-west-1", "ap-northeast-1", "us-gov-west-1", "cn-north-1"]


@pytest.mark.parametrize("region", REGIONS)
def test_lookup_matches_sagemaker_image_uris_retrieve(region):
    from sagemaker.core import image_uris

    for spec in shipped_catalog().values():
        fw = spec.framework
        for instance_type in spec.instance_types:
            ours = resolve_image(
                region,
                fw["transformers_version"],
                fw["pytorch_version"],
                fw["py_version"],
                instance_type,
            )
            sdk = image_uris.retrieve(
                "huggingface",
                region=region,
                version=fw["transformers_version"],
                base_framework_version=f"pytorch{fw['pytorch_version']}",
                py_version=fw["py_version"],
                instance_type=instance_type,
                image_scope="training",
            )
            assert ours == sdk, (spec.name, instance_type)


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (("us-east-1", "0.0.1", "2.5.1", "py311", "ml.p4d.24xlarge"), "transformers"),
        (("us-east-1", "4.49.0", "0.1", "py311", "ml.p4d.24xlarge"), "PyTorch"),
        (("us-east-1", "4.49.0", "2.5.1", "py27", "ml.p4d.24xlarge"), "py27"),
        (("mars-east-1", "4.49.0", "2.5.1", "py311", "ml.p4d.24xlarge"), "mars-east-1"),
    ],
)
def test_unknown_versions_and_regions_are_errors(args, problem):
    with pytest.raises(ValueError, match=problem):
        resolve_image(*args)
