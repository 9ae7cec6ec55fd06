"""Template rules about the distribution: its shape, and how a job starts on real containers.

``check_distribution`` holds the shape rules (a known kind, instance types that can
run it, processes per host, SMP v1 parameters). ``check_start_rules`` holds the rules a
moto sandbox cannot show: they check a template against what the SageMaker training
toolkit and the Hugging Face Trainer read inside the container. Both run from
``validate_template`` (``jobmodel.templates.rules``); each rule raises
``TemplateError(template, rule, message)``.

Start rule ids: ``smp-partitions``, ``smp-v2-parameters``, ``smp-v2-instance``,
``framework``, ``isolation-model``, ``isolation-code-channel``, ``legacy``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .. import _rules as R
from ..instances import INSTANCE_TYPES, InstanceType
from ._shapes import fail
from .distribution_kinds import KINDS
from .spec import DISTRIBUTION_KINDS

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .spec import TemplateSpec

__all__ = [
    "IMAGE_FAMILIES",
    "SMP_DEGREE_KEYS",
    "SMP_V2_PARAMETERS",
    "check_distribution",
    "check_start_rules",
]

# SMP v1 mp_parameters keys that set a parallel degree; an smp template names at least one.
SMP_DEGREE_KEYS = ("partitions", "pipeline_parallel_degree", "tensor_parallel_degree")

# ``framework["image_family"]``: which SDK image table resolves the template's image.
# huggingface: huggingface-pytorch-training (transformers_version, pytorch_version,
# py_version); pytorch-smp: the SMP v2 image SDK v2 picks for a PyTorch estimator with
# torch_distributed + smdistributed.modelparallel (pytorch_version, py_version).
IMAGE_FAMILIES: Mapping[str, tuple[str, ...]] = {
    "huggingface": ("transformers_version", "pytorch_version", "py_version"),
    "pytorch-smp": ("pytorch_version", "py_version"),
}

# SMP v2 core configuration keys (AWS "SMP v2 core feature configuration parameters";
# the same fields as the SDK's sagemaker.train.distributed.SMP), with the JSON type each takes.
SMP_V2_PARAMETERS: Mapping[str, type] = {
    "hybrid_shard_degree": int,
    "sm_activation_offloading": bool,
    "activation_loading_horizon": int,
    "fsdp_cache_flush_warnings": bool,
    "allow_empty_shards": bool,
    "tensor_parallel_degree": int,
    "context_parallel_degree": int,
    "expert_parallel_degree": int,
    "random_seed": int,
}
# Degrees that must be at least 1 when given (hybrid_shard_degree 0 means "largest possible").
_SMP_V2_DEGREES = ("tensor_parallel_degree", "context_parallel_degree", "expert_parallel_degree")
_MAX_LEGACY_REASON = 256


# --------------------------------------------------------------------------------------
# Shape: kinds, instance types, processes per host, SMP v1 parameters
# --------------------------------------------------------------------------------------


def check_distribution(spec: TemplateSpec) -> None:
    """The distribution's own rules (run by ``validate_template`` before the runtime rules).

    Rule ids: ``distribution``, ``hyperparameter-length``, ``smddp-instance``,
    ``multi-node-distribution``, ``multi-node-efa``, ``processes-per-host``,
    ``smp-parameters``.
    """
    dist = spec.distribution
    kind = dist.kind
    if kind not in DISTRIBUTION_KINDS:
        raise fail(
            spec,
            "distribution",
            f"distribution kind must be one of {', '.join(DISTRIBUTION_KINDS)}",
        )
    if type(dist.custom_mpi_options) is not str:
        raise fail(spec, "distribution", "custom_mpi_options must be a string")
    if len(R.encode_value(dist.custom_mpi_options)) > R.MAX_HYPERPARAMETER_LENGTH:
        raise fail(
            spec, "hyperparameter-length", "custom_mpi_options encodes to more than 256 characters"
        )
    types = [INSTANCE_TYPES[n] for n in spec.instance_types]
    _check_instance_capabilities(spec, types)
    _check_processes_per_host(spec, types)
    if KINDS[kind].mp_parameters == "smp":
        _check_smp_parameters(spec)
    elif dist.mp_parameters is not None and KINDS[kind].mp_parameters is None:
        takes = ", ".join(k.name for k in KINDS.values() if k.mp_parameters)
        raise fail(spec, "distribution", f"mp_parameters applies to {takes} only, not {kind}")


def _check_instance_capabilities(spec: TemplateSpec, types: list[InstanceType]) -> None:
    """smddp needs smddp-capable types; more than one node needs a distributed kind and EFA."""
    kind = KINDS[spec.distribution.kind]
    if kind.needs_smddp:
        for it in types:
            if not it.smddp:
                raise fail(
                    spec,
                    "smddp-instance",
                    f"{kind.name} distribution needs smddp-capable types; {it.name} is not",
                )
    if spec.max_instance_count > 1:
        if not kind.multi_node:
            raise fail(
                spec,
                "multi-node-distribution",
                f"max_instance_count {spec.max_instance_count} needs a distributed template "
                "(distribution is none)",
            )
        for it in types:
            if not it.efa:
                raise fail(
                    spec,
                    "multi-node-efa",
                    f"multi-node templates need EFA-capable types; {it.name} has no EFA",
                )


def _check_processes_per_host(spec: TemplateSpec, types: list[InstanceType]) -> None:
    """mpi and smp need processes_per_host (at most one per accelerator); no other kind takes it."""
    dist = spec.distribution
    kind = dist.kind
    if KINDS[kind].processes_per_host:
        pph = dist.processes_per_host
        if type(pph) is not int or pph < 1:
            raise fail(
                spec,
                "processes-per-host",
                f"{kind} needs processes_per_host of at least 1, got {pph!r}",
            )
        for it in types:
            if pph > it.accelerators:
                raise fail(
                    spec,
                    "processes-per-host",
                    f"processes_per_host {pph} is more than the {it.accelerators} accelerators of "
                    f"{it.name}",
                )
    elif dist.processes_per_host is not None:
        takes = " and ".join(k.name for k in KINDS.values() if k.processes_per_host)
        raise fail(spec, "distribution", f"processes_per_host applies to {takes} only, not {kind}")


def _check_smp_parameters(spec: TemplateSpec) -> None:
    """SMP v1 mp_parameters: a degree, JSON scalars, positive degrees, TP inside one host."""
    dist = spec.distribution
    params = dist.mp_parameters
    if not isinstance(params, Mapping) or not any(k in params for k in SMP_DEGREE_KEYS):
        raise fail(
            spec,
            "smp-parameters",
            f"smp needs mp_parameters with one of {', '.join(SMP_DEGREE_KEYS)}",
        )
    for key, value in params.items():
        if type(key) is not str or not R.is_json_scalar(value):
            raise fail(spec, "smp-parameters", f"mp_parameters[{key!r}] must be a JSON scalar")
    for key in (*SMP_DEGREE_KEYS, "microbatches"):
        if key in params and (type(params[key]) is not int or params[key] < 1):
            raise fail(spec, "smp-parameters", f"mp_parameters {key} must be a positive integer")
    tp = params.get("tensor_parallel_degree", 1)
    if tp > dist.processes_per_host:
        raise fail(
            spec,
            "smp-parameters",
            f"tensor_parallel_degree {tp} is more than processes_per_host "
            f"{dist.processes_per_host}",
        )
    if len(R.encode_value(dict(params))) > R.MAX_HYPERPARAMETER_LENGTH:
        raise fail(
            spec, "hyperparameter-length", "mp_parameters encodes to more than 256 characters"
        )
    _check_smp_precision(spec, params)


def _check_smp_precision(spec: TemplateSpec, params: Mapping[str, Any]) -> None:
    """SMP v1 precision (issue 34): never bf16 (transformers' Trainer raises "SageMaker Model
    Parallelism does not support BF16 yet"), and fp16 where SMP reads it: with SMP >= 1.10
    the Trainer replaces its ``fp16`` with the SMP configuration's, so a hyperparameter
    ``fp16`` that mp_parameters does not repeat would be dropped."""
    hp = spec.hyperparameters
    if params.get("bf16") is True or hp.get("bf16") is True:
        raise fail(
            spec,
            "smp-parameters",
            'SMP v1 does not train in bf16 with the Hugging Face Trainer; set "fp16": true '
            "in mp_parameters",
        )
    smp_fp16 = params.get("fp16", False) is True
    if hp.get("fp16") is not None and hp["fp16"] is not smp_fp16:
        raise fail(
            spec,
            "smp-parameters",
            f"hyperparameters fp16 {hp['fp16']!r} contradicts mp_parameters fp16 {smp_fp16!r}: "
            "SMP v1 trains with the fp16 of its own parameters; set it in mp_parameters",
        )


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
        raise fail(
            spec,
            "smp-partitions",
            "smp mp_parameters must include 'partitions' (the pipeline degree; 1 for tensor "
            "parallelism alone): the Hugging Face Trainer enables SageMaker model parallelism "
            "only when SM_HP_MP_PARAMETERS has a 'partitions' key",
        )
    alias = params.get("pipeline_parallel_degree")
    if alias is not None and alias != params["partitions"]:
        raise fail(
            spec,
            "smp-partitions",
            f"mp_parameters pipeline_parallel_degree {alias!r} contradicts partitions "
            f"{params['partitions']!r} (SMP reads them as the same setting)",
        )


# --------------------------------------------------------------------------------------
# SMP v2 (torch.sagemaker, torchrun launcher)
# --------------------------------------------------------------------------------------


def _smp_v2_value_problem(key: str, value: Any) -> str | None:
    want: type | None = SMP_V2_PARAMETERS.get(key)
    if want is None:
        known = ", ".join(SMP_V2_PARAMETERS)
        return f"mp_parameters key {key!r} is not an SMP v2 setting (one of {known})"
    exact = type(value) is want  # a flag, not a narrowing: value stays a JSON scalar (Any)
    if not exact:
        return f"mp_parameters {key} must be {'true or false' if want is bool else 'an integer'}"
    if key in _SMP_V2_DEGREES and value < 1:
        return f"mp_parameters {key} must be at least 1, got {value}"
    if want is int and value < 0:
        return f"mp_parameters {key} must not be negative, got {value}"
    return None


def _check_smp_v2(spec: TemplateSpec) -> None:
    """SMP v2 settings are checked key by key; SMP v1 keys (``partitions``, ``ddp``,
    ...) are refused, since torch.sagemaker.init() does not read them."""
    params = spec.distribution.mp_parameters
    if not isinstance(params, Mapping) or not params:
        raise fail(
            spec,
            "smp-v2-parameters",
            "smp-v2 needs mp_parameters with SMP v2 settings (e.g. tensor_parallel_degree)",
        )
    for key, value in params.items():
        problem = _smp_v2_value_problem(str(key), value)
        if problem is not None:
            raise fail(spec, "smp-v2-parameters", problem)
    if len(R.encode_value(dict(params))) > R.MAX_HYPERPARAMETER_LENGTH:
        raise fail(
            spec, "hyperparameter-length", "mp_parameters encodes to more than 256 characters"
        )
    tp = params.get("tensor_parallel_degree", 1)
    for name in spec.instance_types:
        it = INSTANCE_TYPES[name]
        if not it.accelerator.startswith("nvidia-"):
            raise fail(spec, "smp-v2-instance", f"SMP v2 runs on NVIDIA GPUs only; {name} has none")
        if tp > it.accelerators:
            raise fail(
                spec,
                "smp-v2-instance",
                f"tensor_parallel_degree {tp} is more than the {it.accelerators} GPUs of {name} "
                "(the platform keeps tensor parallelism inside a node)",
            )


def _check_framework(spec: TemplateSpec) -> None:
    """The image family decides the image table; SMP v2 needs the SMP image."""
    fw = spec.framework
    if not fw:
        return
    family = fw.get("image_family", "huggingface")
    if family not in IMAGE_FAMILIES:
        raise fail(
            spec,
            "framework",
            f"framework image_family must be one of {', '.join(IMAGE_FAMILIES)}, got {family!r}",
        )
    for key in IMAGE_FAMILIES[family]:
        if key not in fw:
            raise fail(spec, "framework", f"framework for {family} images needs {key!r}")
    kind = KINDS[spec.distribution.kind]
    own = {k.image_family: k.name for k in KINDS.values() if k.image_family}
    if spec.image_uri is None and (
        (kind.image_family is not None and family != kind.image_family)
        or (family in own and own[family] != kind.name)
    ):
        wanted = kind.image_family or "the default"
        raise fail(
            spec,
            "framework",
            f"{kind.name} templates run on the {wanted} image family, and a family a kind "
            f"names serves that kind only (distribution {kind.name}, image_family {family})",
        )


def _check_legacy(spec: TemplateSpec) -> None:
    reason = spec.legacy
    if reason is None:
        return
    if type(reason) is not str or not reason.strip() or len(reason) > _MAX_LEGACY_REASON:
        raise fail(
            spec,
            "legacy",
            f"legacy must be null or a reason of 1 to {_MAX_LEGACY_REASON} characters",
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
        raise fail(
            spec,
            "isolation-code-channel",
            "channel 'code' is reserved under network isolation: the platform stages the "
            "training source archive there",
        )
    if len(names) + 1 > R.MAX_CHANNELS:
        raise fail(
            spec,
            "isolation-code-channel",
            f"network isolation adds the 'code' channel; {len(names)} declared channels "
            f"leave no room under SageMaker's {R.MAX_CHANNELS}",
        )
    model = next((c for c in spec.inputs if c.name == MODEL_CHANNEL), None)
    if model is None or model.required is not True:
        raise fail(
            spec,
            "isolation-model",
            "network_isolation needs a required 'model' input channel (the weights staged "
            "in S3): an isolated container cannot download a model from the Hub",
        )


def check_start_rules(spec: TemplateSpec) -> None:
    """Every rule of this module, in order (called by ``validate_template`` after the
    generic channel checks)."""
    rule = _MP_START_RULES.get(KINDS[spec.distribution.kind].mp_parameters or "")
    if rule is not None:
        rule(spec)
    _check_framework(spec)
    _check_isolation(spec)
    _check_legacy(spec)


# The start rules of each kind's model-parallel parameters (``DistributionKind.mp_parameters``).
_MP_START_RULES = {"smp": _check_smp_v1, "smp-v2": _check_smp_v2}
