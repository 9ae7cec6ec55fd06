"""The distribution-kind table (``jobmodel.templates.distribution_kinds``) is what the renderer, the
hyperparameter rules and validation read: a row's rendered keys are its declared keys, and
what every catalog template renders beyond its own hyperparameters is exactly them."""

from __future__ import annotations

import pytest

import jobmodel as jm
from jobmodel.templates.distribution_kinds import KINDS
from jobmodel.templates.hyperparameters import DISTRIBUTION_KEYS, SCRIPT_MODE_KEYS
from jobmodel.templates.spec import DISTRIBUTION_KINDS, Distribution


@pytest.mark.parametrize("name", list(KINDS))
def test_each_kinds_renderer_writes_exactly_its_declared_keys(name):
    kind = KINDS[name]
    dist = Distribution(
        kind=name,
        processes_per_host=8 if kind.processes_per_host else None,
        mp_parameters={"partitions": 1} if kind.mp_parameters else None,
    )
    rendered = kind.render(dist, "ml.p4d.24xlarge")
    assert tuple(sorted(rendered)) == tuple(sorted(kind.keys))
    assert DISTRIBUTION_KEYS[name] == kind.keys  # the reserved keys the rules check


def test_the_rules_know_every_kind_of_the_table_and_no_other():
    assert set(DISTRIBUTION_KINDS) == set(DISTRIBUTION_KEYS) == set(KINDS)


def test_every_catalog_template_renders_its_kinds_keys(
    catalog: dict[str, jm.TemplateSpec], platform: jm.PlatformConfig
):
    seen = set()
    for spec in catalog.values():
        req = jm.validate_submit({"template": spec.name}, {spec.name: spec}, platform)
        out = jm.render_create_training_job(req, spec, platform, job_name="j-20260101-0000-abcd")
        extra = set(out["HyperParameters"]) - set(spec.hyperparameters) - set(req.hyperparameters)
        assert extra - set(SCRIPT_MODE_KEYS) == set(KINDS[spec.distribution.kind].keys), spec.name
        seen.add(spec.distribution.kind)
    assert len(seen) > 1  # the check is not vacuous
