"""Training job templates: the job model's specs, made deployable.

A :class:`TrainingJobTemplate` resolves its training image for the stack's region with the
``sagemaker`` library's image URI lookup and validates the result with the job model's rules,
so a bad template fails ``cdk synth`` with the template's name and the rule it breaks.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path

from aws_cdk import Stack, Token
from constructs import Construct

import image_sets
from jobmodel import TemplateError, TemplateSpec, load_catalog, shipped_catalog, validate_template


@cache
def _training_table(name: str) -> dict:
    """The ``sagemaker`` library's own image table ``<name>.json``, training scope.

    Reading the table the SDK ships is the SDK's lookup without importing ``sagemaker.core``
    (1.7 s of every synth); ``tests/infra/test_image_lookup.py`` pins the result to
    ``sagemaker.core.image_uris`` for every shipped template and several regions.
    """
    spec = importlib.util.find_spec("sagemaker")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError("the sagemaker package is not installed")
    root = Path(next(iter(spec.submodule_search_locations)))
    path = root / "core" / "image_uri_config" / f"{name}.json"
    return json.loads(path.read_text())["training"]


def _huggingface_training_table() -> dict:
    return _training_table("huggingface")


@cache
def resolve_image(
    region: str,
    transformers_version: str,
    pytorch_version: str,
    py_version: str,
    instance_type: str,
) -> str:
    """The Hugging Face training image URI for a region, as the SageMaker SDK resolves it."""
    table = _huggingface_training_table()
    version = table["version_aliases"].get(transformers_version, transformers_version)
    if version not in table["versions"]:
        raise ValueError(f"transformers {transformers_version} has no training image")
    entry = table["versions"][version]
    base = f"pytorch{pytorch_version}"
    base = entry.get("version_aliases", {}).get(base, base)
    if base not in entry:
        raise ValueError(f"no PyTorch {pytorch_version} image for transformers {version}")
    framework = entry[base]
    if py_version not in framework["py_versions"]:
        raise ValueError(f"{py_version} is not one of {framework['py_versions']}")
    if region not in framework["registries"]:
        raise ValueError(f"no image registry in {region}")
    family = instance_type.split(".")[1] if instance_type.count(".") == 2 else ""
    processor = "gpu" if family[:1] in ("p", "g") else "cpu"
    if processor not in framework["container_version"]:
        raise ValueError(f"no {processor} image for {instance_type}")
    domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return (
        f"{framework['registries'][region]}.dkr.ecr.{region}.{domain}/"
        f"{framework['repository']}:{base[len('pytorch') :]}-transformers{version}-"
        f"{processor}-{py_version}-{framework['container_version'][processor]}"
    )


@cache
def resolve_smp_image(
    region: str, pytorch_version: str, py_version: str, instance_type: str
) -> str:
    """The SMP v2 training image SDK v2 picks for a PyTorch estimator whose distribution
    enables ``torch_distributed`` and ``smdistributed.modelparallel``
    (``image_uris.get_training_image_uri``: the ``pytorch-smp`` table, tag
    ``<pytorch version>-gpu-<py>-<cuda>``, the CUDA suffix chosen as the SDK does)."""
    table = _training_table("pytorch-smp")
    version = table["version_aliases"].get(pytorch_version, pytorch_version)
    if version not in table["versions"]:
        raise ValueError(f"PyTorch {pytorch_version} has no SMP v2 image")
    entry = table["versions"][version]
    if py_version not in entry["py_versions"]:
        raise ValueError(f"{py_version} is not one of {entry['py_versions']}")
    if region not in entry["registries"]:
        raise ValueError(f"no SMP v2 image registry in {region}")
    family = instance_type.split(".")[1] if instance_type.count(".") == 2 else ""
    if family[:1] not in ("p", "g"):
        raise ValueError(f"no SMP v2 image for {instance_type} (GPU only)")
    if "2.5" in pytorch_version:
        cuda = "cu124"
    elif "p5" in instance_type or any(v in pytorch_version for v in ("2.1", "2.2", "2.3", "2.4")):
        cuda = "cu121"
    else:
        cuda = "cu118"
    domain = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return (
        f"{entry['registries'][region]}.dkr.ecr.{region}.{domain}/{entry['repository']}:"
        f"{pytorch_version}-gpu-{py_version}-{cuda}"
    )


def resolve_template_image(region: str, framework: Mapping[str, str], instance_type: str) -> str:
    """The image for a template's ``framework`` (its ``image_family`` picks the SDK table)."""
    family = framework.get("image_family", "huggingface")
    if family == "pytorch-smp":
        return resolve_smp_image(
            region, framework["pytorch_version"], framework["py_version"], instance_type
        )
    if family != "huggingface":
        raise ValueError(f"unknown image_family {family!r}")
    return resolve_image(
        region,
        framework["transformers_version"],
        framework["pytorch_version"],
        framework["py_version"],
        instance_type,
    )


class TrainingJobTemplate(Construct):
    """One template of the launcher's catalog.

    Attributes:
        spec: the validated template with its image resolved, and the image's ENTRYPOINT
            (from its package set) unless the template names one.
        image_set: the image's package set (``image_sets/``); synth fails, naming the
            template and the image, when the image has none.
    """

    def __init__(self, scope: Construct, id: str, *, spec: TemplateSpec) -> None:
        super().__init__(scope, id)
        region = Stack.of(self).region
        if Token.is_unresolved(region):
            raise TemplateError(
                spec.name,
                "image",
                "the stack needs a concrete region (context ftl:region) to resolve training images",
            )
        if spec.image_uri is None:
            fw = spec.framework
            try:
                image = resolve_template_image(region, fw, spec.default_instance_type)
            except (KeyError, ValueError) as err:
                raise TemplateError(
                    spec.name,
                    "image",
                    f"no training image for {dict(fw)} in {region}: {err}",
                ) from None
            spec = dataclasses.replace(spec, image_uri=image)
        validate_template(spec, require_image=True)
        try:
            self.image_set = image_sets.for_uri(spec.image_uri or "")
        except image_sets.ImageSetError as err:
            # The entrypoint is proven only in images whose software is written down (and
            # run by the image matrix): an image without a package-set file is not shipped.
            raise TemplateError(spec.name, "image", str(err)) from None
        if not spec.image_entrypoint:
            # The image's ENTRYPOINT, which the rendered request runs under the platform's
            # init (issue 34: jobmodel/templates/container_start.py).
            spec = dataclasses.replace(spec, image_entrypoint=self.image_set.entrypoint)
            validate_template(spec, require_image=True)
        self.spec = spec


def catalog_specs(
    extra_catalog: str | None = None, extra: Iterable[TemplateSpec] = ()
) -> list[TemplateSpec]:
    """The shipped templates, plus any from a catalog file and any defined in Python."""
    specs: dict[str, TemplateSpec] = dict(shipped_catalog())
    more: Mapping[str, TemplateSpec] = {}
    if extra_catalog:
        more = load_catalog(json.loads(Path(extra_catalog).read_text()))
    for spec in [*more.values(), *extra]:
        if spec.name in specs:
            raise TemplateError(
                spec.name, "duplicate-name", "a template with this name is already in the catalog"
            )
        specs[spec.name] = spec
    return list(specs.values())
