"""Each image the catalog names has one package-set file (image_sets/), and they agree.

The files are the one home of each image's software: its Python, every package the
entrypoint touches at the image's version, each with its source. The catalog's framework
versions and the image URIs synth resolves are tied to them here; synth refuses a template
whose image has no file.
"""

from __future__ import annotations

import dataclasses
import json
import re

import aws_cdk as cdk
import pytest

import image_sets
from ftl_constructs.job_template import TrainingJobTemplate, resolve_template_image
from jobmodel import TemplateError, shipped_catalog

REGIONS = ["us-east-1", "eu-west-1", "ap-northeast-1"]


def _image(spec, region: str = "us-east-1", instance_type: str | None = None) -> str:
    return resolve_template_image(
        region, spec.framework, instance_type or spec.default_instance_type
    )


@pytest.mark.parametrize("region", REGIONS)
def test_every_template_image_has_a_package_set_that_matches_its_framework(region):
    for spec in shipped_catalog().values():
        for instance_type in spec.instance_types:
            uri = _image(spec, region, instance_type)
            found = image_sets.for_uri(uri)
            assert dict(found.framework) == dict(spec.framework), (spec.name, found.name)
            fw = spec.framework
            assert found.version("torch") == fw["pytorch_version"], spec.name
            if "transformers_version" in fw:
                assert found.version("transformers") == fw["transformers_version"], spec.name
            assert found.py_version == fw["py_version"], (spec.name, found.python)
            assert f"-{found.py_version}-" in found.tag


def test_every_package_set_file_is_used_and_well_formed():
    used = {image_sets.for_uri(_image(spec)).name for spec in shipped_catalog().values()}
    assert used == set(image_sets.all_sets()), "a package-set file no template uses"
    for s in image_sets.all_sets().values():
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", s.build_date), s.name
        assert re.fullmatch(r"3\.\d+(\.\d+)?", s.python), s.name
        for source in s.sources:
            # a Dockerfile or buildspec at a named commit, or a named document
            assert re.fullmatch(r"[0-9a-f]{40}", source.get("commit", "")) or source.get("url"), (
                s.name,
                source,
            )
        for name, entry in s.packages.items():
            if entry.get("unpinned"):
                # resolved as of the build date, with the range the image asked for
                assert "spec" in entry or "note" in entry, (s.name, name)
        for name in image_sets.REQUIRED_PACKAGES:
            assert name in s.packages, (s.name, name)


def test_distribution_libraries_match_the_templates_that_need_them():
    """smddp templates run where the image ships smddp, SMP v1 templates where it ships
    SMP v1, the SMP v2 template where it ships torch.sagemaker."""
    needs = {
        "smddp": "smdistributed-dataparallel",
        "smp": "smdistributed-modelparallel",
        "smp-v2": "torch-sagemaker",
    }
    for spec in shipped_catalog().values():
        library = needs.get(spec.distribution.kind)
        if library:
            assert image_sets.for_uri(_image(spec)).ships(library), (spec.name, library)


def test_a_template_whose_image_has_no_package_set_fails_synth_naming_both():
    stack = cdk.Stack(cdk.App(), "T", env=cdk.Environment(region="us-east-1"))
    image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/our-trainer:1.0-gpu"
    spec = dataclasses.replace(
        shipped_catalog()["distilbert-spot"], name="team-custom", image_uri=image
    )
    with pytest.raises(TemplateError) as err:
        TrainingJobTemplate(stack, "Custom", spec=spec)
    assert err.value.template == "team-custom" and err.value.rule == "image"
    assert "our-trainer:1.0-gpu" in str(err.value) and "team-custom" in str(err.value)


def test_split_uri_reads_repository_and_tag():
    assert image_sets.split_uri(
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-training:2.5.1-x"
    ) == ("huggingface-pytorch-training", "2.5.1-x")
    with pytest.raises(image_sets.ImageSetError):
        image_sets.split_uri("registry.example.com/repo@sha256:abc")


def test_synth_puts_each_images_entrypoint_on_its_templates():
    """The image's ENTRYPOINT (its package set) goes onto the template at synth, so the
    rendered request runs it under the platform's init (issue 34)."""
    stack = cdk.Stack(cdk.App(), "T", env=cdk.Environment(region="us-east-1"))
    for i, spec in enumerate(shipped_catalog().values()):
        built = TrainingJobTemplate(stack, f"T{i}", spec=spec)
        assert built.spec.image_entrypoint == built.image_set.entrypoint, spec.name
        assert built.image_set.entrypoint == ("bash", "-m", "start_with_right_hostname.sh")


def test_an_entrypoint_must_cite_a_source(tmp_path, monkeypatch):
    path = image_sets.file_for(
        "huggingface-pytorch-training", "2.5.1-transformers4.49.0-gpu-py311-cu124-ubuntu22.04"
    )
    raw = json.loads(path.read_text())
    raw["entrypoint"]["source"] = "nowhere"
    bad = tmp_path / path.name
    bad.write_text(json.dumps(raw))
    with pytest.raises(image_sets.ImageSetError, match="entrypoint cites unknown source"):
        image_sets._load(bad)
    raw["entrypoint"] = {"command": [], "source": "base-dockerfile"}
    bad.write_text(json.dumps(raw))
    with pytest.raises(image_sets.ImageSetError, match="entrypoint.command"):
        image_sets._load(bad)
