"""The synth-time image lookup reads the SDK's table; it must agree with the SDK's function."""

from __future__ import annotations

import pytest

from ftl_constructs.job_template import resolve_image, resolve_smp_image, resolve_template_image
from jobmodel import shipped_catalog

REGIONS = ["us-east-1", "eu-west-1", "ap-northeast-1", "us-gov-west-1", "cn-north-1"]


@pytest.mark.parametrize("region", REGIONS)
def test_lookup_matches_sagemaker_image_uris_retrieve(region):
    from sagemaker.core import image_uris

    for spec in shipped_catalog().values():
        fw = spec.framework
        if fw.get("image_family") == "pytorch-smp":
            continue  # test_smp_lookup_matches_sdk_v2_estimator_lookup
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


SMP_REGIONS = ["us-east-1", "eu-west-1", "ap-northeast-1"]


def _smp_v2_distribution(params: dict) -> dict:
    return {
        "torch_distributed": {"enabled": True},
        "smdistributed": {"modelparallel": {"enabled": True, "parameters": params}},
    }


@pytest.mark.parametrize("region", SMP_REGIONS)
def test_smp_lookup_matches_sdk_v2_estimator_lookup(region):
    """SDK v2's PyTorch estimator resolves its image with get_training_image_uri, which
    switches to the pytorch-smp table when torch_distributed and modelparallel are on."""
    from sagemaker.core import image_uris

    smp = [s for s in shipped_catalog().values() if s.distribution.kind == "smp-v2"]
    assert smp, "the catalog has an smp-v2 template"
    for spec in smp:
        fw = spec.framework
        params = dict(spec.distribution.mp_parameters or {})
        for instance_type in spec.instance_types:
            ours = resolve_template_image(region, fw, instance_type)
            sdk = image_uris.get_training_image_uri(
                region,
                "pytorch",
                framework_version=fw["pytorch_version"],
                py_version=fw["py_version"],
                instance_type=instance_type,
                distribution=_smp_v2_distribution(params),
            )
            assert ours == sdk, (spec.name, instance_type)
            assert "/smdistributed-modelparallel:" in ours


@pytest.mark.parametrize("version", ["2.4.1", "2.5.1"])
def test_smp_lookup_follows_the_sdk_cuda_choice(version):
    from sagemaker.core import image_uris

    for instance_type in ("ml.p4d.24xlarge", "ml.p5.48xlarge"):
        sdk = image_uris.get_training_image_uri(
            "us-west-2",
            "pytorch",
            framework_version=version,
            py_version="py311",
            instance_type=instance_type,
            distribution=_smp_v2_distribution({"tensor_parallel_degree": 8}),
        )
        assert resolve_smp_image("us-west-2", version, "py311", instance_type) == sdk


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (("us-east-1", "0.1", "py311", "ml.p4d.24xlarge"), "SMP v2"),
        (("us-east-1", "2.5.1", "py39", "ml.p4d.24xlarge"), "py39"),
        (("cn-north-1", "2.5.1", "py311", "ml.p4d.24xlarge"), "cn-north-1"),
        (("us-east-1", "2.5.1", "py311", "ml.c5.xlarge"), "GPU only"),
    ],
)
def test_smp_lookup_errors(args, problem):
    with pytest.raises(ValueError, match=problem):
        resolve_smp_image(*args)


def test_unknown_image_family_is_an_error():
    with pytest.raises(ValueError, match="image_family"):
        resolve_template_image("us-east-1", {"image_family": "x"}, "ml.p4d.24xlarge")
