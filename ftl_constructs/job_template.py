"""Training job templates: the job model's specs, made deployable.

A :class:`TrainingJobTemplate` resolves its training image for the stack's region with the
``sagemaker`` library's image URI lookup and validates the result with the job model's rules,
so a bad template fails ``cdk synth`` with the template's name and the rule it breaks.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path

from aws_cdk import Stack, Token
from constructs import Construct

from jobmodel import TemplateError, TemplateSpec, load_catalog, shipped_catalog, validate_template


@cache
def resolve_image(
    region: str,
    transformers_version: str,
    pytorch_version: str,
    py_version: str,
    instance_type: str,
) -> str:
    """The Hugging Face training image URI for a region (offline lookup in the SDK's tables)."""
    from sagemaker.core import image_uris  # heavy import, only when a template needs it

    return image_uris.retrieve(
        "huggingface",
        region=region,
        version=transformers_version,
        base_framework_version=f"pytorch{pytorch_version}",
        py_version=py_version,
        instance_type=instance_type,
        image_scope="training",
    )


class TrainingJobTemplate(Construct):
    """One template of the launcher's catalog.

    Attributes:
        spec: the validated template with its image resolved.
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
                image = resolve_image(
                    region,
                    fw["transformers_version"],
                    fw["pytorch_version"],
                    fw["py_version"],
                    spec.default_instance_type,
                )
            except (KeyError, ValueError) as err:
                raise TemplateError(
                    spec.name,
                    "image",
                    f"no Hugging Face training image for {dict(fw)} in {region}: {err}",
                ) from None
            spec = dataclasses.replace(spec, image_uri=image)
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
