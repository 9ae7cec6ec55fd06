"""Hyperparameters of the entrypoint, parsed from the CLI and ``SM_HPS`` against the table in
``hparam_specs.py``.

The SageMaker training toolkit runs ``python train.py --key value ...`` with every
hyperparameter of the job. The SageMaker SDK JSON-encodes each value and the toolkit
decodes it again, so values usually arrive as plain strings (``3e-05``, ``True``,
``bert-base``); a value that is still JSON-encoded (``"\\"bert-base\\""``) is decoded
here too. ``SM_HPS`` (a JSON object the toolkit also exports) holds the same values exactly,
while the command line has been through ``/bin/sh -c``: the toolkit joins its command with
spaces and runs it through the shell, so a value with a space arrives as several words
(``--fsdp full_shard auto_wrap``) and an empty one vanishes (issue 34). So with ``SM_HPS``
set, its values win and the command line only adds names it lacks (a launcher's
``--local_rank``), its extra words read as part of the value before them; without it (a
run by hand) the command line is read strictly.

Unknown names are an error, except the ones the platform itself passes
(``sagemaker_*``, ``mp_parameters``) and launcher arguments (``local_rank``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .hparam_specs import FSDP_OPTIONS, SPEC_BY_NAME, SPECS, TASKS, Spec

AUTO = "auto"


class HyperparameterError(ValueError):
    """A hyperparameter is unknown or has a value that cannot be used."""


# Passed by the SageMaker SDK / toolkit / launchers; never ours to interpret.
IGNORED_PREFIXES = ("sagemaker_",)
# What SageMaker's tuner adds to each trial's hyperparameters (a sweep's trial, issue 37); the
# toolkit passes it on as ``--_tuning_objective_metric``. The job model's name for it is
# ``jobmodel.sweeps.render.OBJECTIVE_HYPERPARAMETER`` (this code runs in the images and cannot
# import the job model; tests/training/test_tuning_objective_name.py holds the two equal).
TUNING_OBJECTIVE = "_tuning_objective_metric"
IGNORED_NAMES = frozenset({"mp_parameters", "local_rank", "local-rank", TUNING_OBJECTIVE})

_TRUE = {"true", "1", "yes", "y", "on"}
_FALSE = {"false", "0", "no", "n", "off"}
_NULL = {"null", "none", ""}


def _decode_json_layers(value: Any) -> Any:
    """Undo JSON encoding that the toolkit did not undo (``'"abc"'`` -> ``'abc'``)."""
    for _ in range(3):
        if not isinstance(value, str):
            return value
        text = value.strip()
        if len(text) >= 2 and text[0] == '"' and text[-1] == '"':
            try:
                value = json.loads(text)
                continue
            except json.JSONDecodeError:
                return value
        return value
    return value


def _coerce(spec: Spec, raw: Any) -> Any:
    value = _decode_json_layers(raw)
    where = f"hyperparameter {spec.name}={raw!r}"
    if isinstance(value, str) and value.strip().lower() in _NULL:
        if spec.nullable or spec.kind == "tristate":
            return None
        if value.strip() == "" and spec.kind == "str":
            raise HyperparameterError(f"{where}: must not be empty")
    if spec.kind == "tristate" and isinstance(value, str) and value.strip().lower() == AUTO:
        return None
    if spec.kind in ("bool", "tristate"):
        if isinstance(value, bool):
            return value
        if isinstance(value, (int, float)) and value in (0, 1):
            return bool(value)
        if isinstance(value, str):
            low = value.strip().lower()
            if low in _TRUE:
                return True
            if low in _FALSE:
                return False
        raise HyperparameterError(
            f"{where}: expected true or false" + (" or auto" if spec.kind == "tristate" else "")
        )
    if spec.kind == "int":
        if isinstance(value, bool):
            raise HyperparameterError(f"{where}: expected an integer")
        if isinstance(value, int):
            return value
        try:
            number = float(value) if not isinstance(value, str) else float(value.strip())
        except (TypeError, ValueError):
            raise HyperparameterError(f"{where}: expected an integer") from None
        if not math.isfinite(number) or number != int(number):
            raise HyperparameterError(f"{where}: expected an integer")
        return int(number)
    if spec.kind == "float":
        if isinstance(value, bool):
            raise HyperparameterError(f"{where}: expected a number")
        try:
            number = float(value.strip()) if isinstance(value, str) else float(value)
        except (TypeError, ValueError):
            raise HyperparameterError(f"{where}: expected a number") from None
        if not math.isfinite(number):
            raise HyperparameterError(f"{where}: expected a finite number")
        return number
    # str
    if isinstance(value, (dict, list)):
        value = json.dumps(value)
    value = str(value).strip()
    if spec.choices and value not in spec.choices:
        raise HyperparameterError(f"{where}: expected one of {', '.join(spec.choices)}")
    return value


def _is_ignored(name: str) -> bool:
    return name in IGNORED_NAMES or name.startswith(IGNORED_PREFIXES)


def split_cli(argv: Sequence[str], *, split_by_shell: bool = False) -> dict[str, str]:
    """``--a 1 --b=2 --flag`` -> ``{"a": "1", "b": "2", "flag": "true"}``.

    ``split_by_shell``: a word after a value continues that value (``--a x y`` -> ``"x y"``),
    as a value with spaces arrives after the toolkit's ``/bin/sh -c``; else it is an error."""
    out: dict[str, str] = {}
    last = ""
    i = 0
    args = list(argv)
    while i < len(args):
        token = args[i]
        if split_by_shell and last and not token.startswith("--"):
            out[last] = f"{out[last]} {token}"
            i += 1
            continue
        if not token.startswith("--") or token == "--":
            raise HyperparameterError(
                f"unexpected command-line argument {token!r}; hyperparameters are --name value"
            )
        name = token[2:]
        if "=" in name:
            name, value = name.split("=", 1)
            i += 1
        elif i + 1 < len(args) and not (args[i + 1].startswith("--") and len(args[i + 1]) > 2):
            value = args[i + 1]
            i += 2
        else:
            value = "true"
            i += 1
        out[name] = value
        last = name
    return out


@dataclass
class Hyperparameters:
    values: dict[str, Any] = field(default_factory=dict)
    given: frozenset[str] = frozenset()  # names set explicitly (not defaulted)
    ignored: tuple[str, ...] = ()

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("values")
        if values is not None and name in values:
            return values[name]
        raise AttributeError(name)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.values)


def parse(
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Hyperparameters:
    """Parse hyperparameters from ``SM_HPS`` (if set), then the names ``argv`` adds, then
    ``extra``; without ``SM_HPS``, from ``argv`` then ``extra``."""
    raw: dict[str, Any] = {}
    from_toolkit = bool(environ is not None and environ.get("SM_HPS"))
    if environ is not None and environ.get("SM_HPS"):
        try:
            hps = json.loads(environ["SM_HPS"])
        except json.JSONDecodeError as exc:
            raise HyperparameterError(f"SM_HPS is not valid JSON: {exc}") from None
        if not isinstance(hps, dict):
            raise HyperparameterError("SM_HPS must be a JSON object")
        raw.update(hps)
    if argv:
        cli = split_cli(argv, split_by_shell=from_toolkit)
        raw.update({k: v for k, v in cli.items() if not (from_toolkit and k in raw)})
    if extra:
        raw.update(extra)

    values: dict[str, Any] = {s.name: s.default for s in SPECS}
    given: set[str] = set()
    ignored: list[str] = []
    unknown: list[str] = []
    for key, value in raw.items():
        name = key.replace("-", "_") if key.replace("-", "_") in SPEC_BY_NAME else key
        if _is_ignored(name):
            ignored.append(name)
            continue
        spec = SPEC_BY_NAME.get(name)
        if spec is None:
            unknown.append(key)
            continue
        values[name] = _coerce(spec, value)
        given.add(name)
    if unknown:
        raise HyperparameterError(
            "unknown hyperparameter(s): "
            + ", ".join(sorted(unknown))
            + ". Supported: "
            + ", ".join(s.name for s in SPECS)
        )
    hp = Hyperparameters(values=values, given=frozenset(given), ignored=tuple(sorted(ignored)))
    validate(hp)
    return hp


def validate(hp: Hyperparameters) -> None:
    v = hp.values
    if v["task"] is None:
        raise HyperparameterError("hyperparameter task is required: one of " + ", ".join(TASKS))
    positive: dict[str, Callable[[Any], bool]] = {
        "per_device_train_batch_size": lambda x: x >= 1,
        "per_device_eval_batch_size": lambda x: x >= 1,
        "gradient_accumulation_steps": lambda x: x >= 1,
        "save_steps": lambda x: x >= 1,
        "logging_steps": lambda x: x >= 1,
        "save_total_limit": lambda x: x >= 1,
        "doc_stride": lambda x: x >= 0,
        "learning_rate": lambda x: x > 0,
        "num_train_epochs": lambda x: x > 0,
        "weight_decay": lambda x: x >= 0,
        "warmup_ratio": lambda x: 0 <= x < 1,
        "mlm_probability": lambda x: 0 < x < 1,
        "max_grad_norm": lambda x: x >= 0,
        "max_answer_length": lambda x: x >= 1,
        "n_best_size": lambda x: x >= 1,
        "lora_r": lambda x: x >= 1,
        "lora_alpha": lambda x: x >= 1,
        "lora_dropout": lambda x: 0 <= x < 1,
        "loss_chunk_tokens": lambda x: x >= 1,
    }
    for name, ok in positive.items():
        if not ok(v[name]):
            raise HyperparameterError(f"hyperparameter {name}={v[name]!r} is out of range")
    for name in (
        "max_seq_length",
        "num_labels",
        "max_train_samples",
        "max_eval_samples",
        "dataloader_num_workers",
        "global_batch_size",
        "eval_steps",
    ):
        low = 0 if name in ("dataloader_num_workers", "eval_steps") else 1
        if v[name] is not None and v[name] < low:
            raise HyperparameterError(f"hyperparameter {name}={v[name]!r} is out of range")
    if (
        v["max_seq_length"] is not None
        and v["task"] == "qa"
        and v["doc_stride"] >= v["max_seq_length"]
    ):
        raise HyperparameterError("hyperparameter doc_stride must be smaller than max_seq_length")
    if v["fp16"] is True and v["bf16"] is True:
        raise HyperparameterError("fp16 and bf16 cannot both be true")
    if v["label_mapping"] is not None:
        parse_label_mapping(v["label_mapping"])  # raises on a bad value
    if v["global_batch_size"] is not None and "gradient_accumulation_steps" in hp.given:
        raise HyperparameterError(
            "hyperparameter gradient_accumulation_steps cannot be set with global_batch_size, "
            "which derives it on the host (per_device_train_batch_size is then the cap on the "
            "per-device batch); set one of them"
        )
    _validate_recipes(v)


def fsdp_options(value: str | None) -> list[str]:
    """``"full_shard auto_wrap"`` -> ``["full_shard", "auto_wrap"]``; raises on unknown options."""
    options = (value or "").replace(",", " ").split()
    bad = [o for o in options if o not in FSDP_OPTIONS]
    if bad:
        raise HyperparameterError(
            f"hyperparameter fsdp={value!r}: unknown option(s) {', '.join(bad)}; "
            f"expected some of {', '.join(sorted(FSDP_OPTIONS))}"
        )
    return options


def _validate_recipes(v: dict[str, Any]) -> None:
    if v["peft"] != "none" and v["task"] not in ("sft", "clm"):
        raise HyperparameterError(f"hyperparameter peft={v['peft']!r} applies to task sft or clm")
    if fsdp_options(v["fsdp"]) and v["peft"] != "none":
        raise HyperparameterError(
            f"hyperparameter peft={v['peft']!r} with fsdp is not supported: LoRA/QLoRA "
            "runs single node (data parallel across its GPUs); use fsdp for full fine-tuning"
        )
    _validate_kernels(v)
    if not v["lora_target_modules"].strip(", "):
        raise HyperparameterError("hyperparameter lora_target_modules must not be empty")


def _validate_kernels(v: dict[str, Any]) -> None:
    lm = v["task"] in ("sft", "clm")
    for name, off in (("loss_kernel", "auto"), ("liger_kernel", False)):
        if v[name] not in (off, "plain") and not lm:
            raise HyperparameterError(
                f"hyperparameter {name}={v[name]!r} applies to task sft or clm"
            )
    if v["attn_implementation"] == "varlen" and not lm:
        raise HyperparameterError(
            "hyperparameter attn_implementation='varlen' is causal attention for task sft or clm"
        )
    if v["liger_kernel"] and v["loss_kernel"] == "chunked":
        raise HyperparameterError(
            "hyperparameter loss_kernel='chunked' with liger_kernel=true: liger-kernel brings "
            "its own fused linear cross-entropy; leave loss_kernel auto"
        )
    if v["optim_state_dtype"] == "bfloat16" and v["optim"] not in (None, "adamw_torch"):
        raise HyperparameterError(
            f"hyperparameter optim_state_dtype='bfloat16' is an AdamW of its own; "
            f"optim={v['optim']!r} cannot be combined with it (leave optim unset)"
        )


LABEL_MAPPINGS: dict[str, tuple[dict[str, int], list[str]]] = {
    # amazon_reviews_multi style star ratings -> three sentiment classes
    "stars3": ({"1": 0, "2": 0, "3": 1, "4": 2, "5": 2}, ["negative", "neutral", "positive"]),
}


def parse_label_mapping(text: str) -> tuple[dict[str, int], list[str]]:
    """Return (raw label as string -> id, id -> label name)."""
    if text in LABEL_MAPPINGS:
        mapping, names = LABEL_MAPPINGS[text]
        return dict(mapping), list(names)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        raise HyperparameterError(
            f"hyperparameter label_mapping={text!r}: expected one of "
            f"{', '.join(LABEL_MAPPINGS)} or a JSON object"
        ) from None
    if not isinstance(obj, dict) or not obj:
        raise HyperparameterError(
            "hyperparameter label_mapping: the JSON value must be a non-empty object"
        )
    targets = list(obj.values())
    if all(isinstance(t, int) and not isinstance(t, bool) for t in targets):
        if min(targets) < 0:
            raise HyperparameterError("hyperparameter label_mapping: label ids must be >= 0")
        n = max(targets) + 1
        names = [str(i) for i in range(n)]
        return {str(k): int(t) for k, t in obj.items()}, names
    if all(isinstance(t, str) for t in targets):
        names = sorted(set(targets))
        return {str(k): names.index(t) for k, t in obj.items()}, names
    raise HyperparameterError(
        "hyperparameter label_mapping: values must be all integers or all strings"
    )
