"""Template rules about how a job starts on real SageMaker containers.

These are the rules a moto sandbox cannot show: they check a template against what the
SageMaker training toolkit and the Hugging Face Trainer read inside the container. They
live apart from ``templates.py`` (the schema and the generic rules) and run from
``validate_template``; each raises ``TemplateError(template, rule, message)``.

Rule ids: ``smp-partitions``, ``isolation-model``, ``isolation-code-channel``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import _rules as R
from .errors import TemplateError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .templates import TemplateSpec

__all__ = ["check_start_rules"]


def _fail(spec: TemplateSpec, rule: str, message: str) -> TemplateError:
    return TemplateError(str(spec.name), rule, message)


# --------------------------------------------------------------------------------------
# SMP v1 (smdistributed.modelparallel, MPI launcher)
# --------------------------------------------------------------------------------------


def _check_smp_v1(spec: TemplateSpec) -> None:
    """An SMP v1 template must carry ``partitions`` in ``mp_parameters``.

    The SDK v2 sends ``mp_parameters`` as a hyperparameter; the toolkit exports it as
    ``SM_HP_MP_PARAMETERS``. transformers' ``is_sagemaker_mp_enabled()``
    (``transformers/utils/import_utils.py``) returns False unless that JSON object has a
    ``partitions`` key, whatever else it holds (``pipeline_parallel_degree`` is SMP's
    alias for it, but the Trainer does not look at the alias). Without it the Trainer
    never calls ``smp.init``: every MPI rank trains alone, with no tensor parallelism and
    no optimizer sharding.
    """
    params: Mapping[str, Any] = spec.distribution.mp_parameters or {}
    if "partitions" not in params:
        raise _fail(
            spec,
            "smp-partitions",
            "smp mp_parameters must include 'partitions' (the pipeline degree; 1 for tensor "
            "parallelism alone): the Hugging Face Trainer enables SageMaker model parallelism "
            "only when SM_HP_MP_PARAMETERS has a 'partitions' key",
        )
    alias = params.get("pipeline_parallel_degree")
    if alias is not None and alias != params["partitions"]:
        raise _fail(
            spec,
            "smp-partitions",
            f"mp_parameters pipeline_parallel_degree {alias!r} contradicts partitions "
            f"{params['partitions']!r} (SMP reads them as the same setting)",
        )


# --------------------------------------------------------------------------------------
# Network isolation
# --------------------------------------------------------------------------------------

# The channel the renderer adds for the source archive (render.CODE_CHANNEL).
CODE_CHANNEL = "code"
MODEL_CHANNEL = "model"


def _check_isolation(spec: TemplateSpec) -> None:
    """An isolated container has no network: code and weights must arrive as channels.

    The renderer adds the ``code`` channel itself (as SDK v2 does), so a template may not
    declare one and must leave room for it. The model cannot come from the Hugging Face
    Hub either: the template must declare a required ``model`` channel (weights staged in
    S3), which the entrypoint loads from ``/opt/ml/input/data/model``.
    """
    if not spec.network_isolation:
        return
    names = [c.name for c in spec.inputs]
    if CODE_CHANNEL in names:
        raise _fail(
            spec,
            "isolation-code-channel",
            "channel 'code' is reserved under network isolation: the platform stages the "
            "training source archive there",
        )
    if len(names) + 1 > R.MAX_CHANNELS:
        raise _fail(
            spec,
            "isolation-code-channel",
            f"network isolation adds the 'code' channel; {len(names)} declared channels "
            f"leave no room under SageMaker's {R.MAX_CHANNELS}",
        )
    model = next((c for c in spec.inputs if c.name == MODEL_CHANNEL), None)
    if model is None or model.required is not True:
        raise _fail(
            spec,
            "isolation-model",
            "network_isolation needs a required 'model' input channel (the weights staged "
            "in S3): an isolated container cannot download a model from the Hub",
        )


def check_start_rules(spec: TemplateSpec) -> None:
    """Every rule of this module, in order (called by ``validate_template`` after the
    generic channel checks)."""
    if spec.distribution.kind == "smp":
        _check_smp_v1(spec)
    _check_isolation(spec)
