"""jobmodel/regions.py's static table matches its sources: botocore's endpoint data and the
SageMaker SDK's image tables that synth resolves the shipped templates' images with."""

from __future__ import annotations

import botocore.session

from ftl_constructs.job_template import resolve_template_image
from jobmodel import regions
from jobmodel.templates.catalog import shipped_catalog


def test_sagemaker_and_batch_regions_are_botocores():
    session = botocore.session.get_session()
    assert set(session.get_available_regions("sagemaker")) == regions.SAGEMAKER_REGIONS
    assert set(session.get_available_regions("batch")) >= regions.BATCH_REGIONS


def test_image_regions_are_where_synth_finds_every_shipped_templates_image():
    for spec in shipped_catalog().values():
        found = set()
        for region in sorted(regions.SAGEMAKER_REGIONS):
            try:
                resolve_template_image(region, spec.framework, spec.instance_types[0])
            except ValueError:
                continue
            found.add(region)
        family = regions.image_family(spec.framework)
        assert found == regions.IMAGE_REGIONS[family], (spec.name, sorted(found))
