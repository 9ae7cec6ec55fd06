"""What the SageMaker training container tells the script through its environment.

Everything has a local default so the entrypoint also runs outside SageMaker.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

OPT_ML = "/opt/ml"
LOCAL_ROOT = "ftl_output"


def _on_sagemaker(environ: Mapping[str, str]) -> bool:
    return any(k.startswith("SM_") for k in environ) or os.path.isdir(OPT_ML)


@dataclass
class SageMakerEnv:
    model_dir: str
    output_data_dir: str
    default_checkpoint_dir: str
    channels: dict[str, str] = field(default_factory=dict)
    num_gpus: int = 0
    hosts: list[str] = field(default_factory=list)
    current_host: str = "localhost"
    framework_params: dict = field(default_factory=dict)
    tensorboard_dir: str | None = None

    @property
    def num_hosts(self) -> int:
        return max(1, len(self.hosts))

    def channel(self, *names: str) -> str | None:
        for name in names:
            path = self.channels.get(name)
            if path and os.path.isdir(path) and _has_files(path):
                return path
        return None


def _has_files(path: str) -> bool:
    for _root, _dirs, files in os.walk(path):
        if any(not f.startswith(".") for f in files):
            return True
    return False


def read_env(environ: Mapping[str, str] | None = None) -> SageMakerEnv:
    env = os.environ if environ is None else environ
    on_sm = _on_sagemaker(env)
    root = OPT_ML if on_sm else LOCAL_ROOT

    channels: dict[str, str] = {}
    for key, value in env.items():
        if key.startswith("SM_CHANNEL_") and value:
            channels[key[len("SM_CHANNEL_") :].lower()] = value
    # Channels not announced through SM_CHANNEL_* (e.g. an older toolkit): the input folder.
    input_root = os.path.join(OPT_ML, "input", "data")
    if not channels and os.path.isdir(input_root):
        for name in sorted(os.listdir(input_root)):
            path = os.path.join(input_root, name)
            if os.path.isdir(path):
                channels[name.lower()] = path

    hosts: list[str] = []
    if env.get("SM_HOSTS"):
        try:
            hosts = list(json.loads(env["SM_HOSTS"]))
        except (json.JSONDecodeError, TypeError):
            hosts = []
    try:
        framework_params = json.loads(env.get("SM_FRAMEWORK_PARAMS", "{}") or "{}")
    except json.JSONDecodeError:
        framework_params = {}
    try:
        num_gpus = int(env.get("SM_NUM_GPUS", "0") or 0)
    except ValueError:
        num_gpus = 0

    tb = env.get("FTL_TENSORBOARD_DIR")
    if tb is None and os.path.isdir(os.path.join(OPT_ML, "output", "tensorboard")):
        tb = os.path.join(OPT_ML, "output", "tensorboard")

    return SageMakerEnv(
        model_dir=env.get("SM_MODEL_DIR") or os.path.join(root, "model"),
        output_data_dir=env.get("SM_OUTPUT_DATA_DIR") or os.path.join(root, "output", "data"),
        default_checkpoint_dir=os.path.join(root, "checkpoints"),
        channels=channels,
        num_gpus=num_gpus,
        hosts=hosts,
        current_host=env.get("SM_CURRENT_HOST", "localhost"),
        framework_params=framework_params if isinstance(framework_params, dict) else {},
        tensorboard_dir=tb,
    )


# ---------------------------------------------------------------- distribution


def smddp_requested(environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    if env.get("SMDATAPARALLEL", "").lower() in ("1", "true"):
        return True
    try:
        params = json.loads(env.get("SM_FRAMEWORK_PARAMS", "{}") or "{}")
    except json.JSONDecodeError:
        return False
    return bool(
        isinstance(params, dict) and params.get("sagemaker_distributed_dataparallel_enabled")
    )


def smddp_available() -> bool:
    try:
        return importlib.util.find_spec("smdistributed.dataparallel") is not None
    except (ImportError, ValueError):
        return False


def world_size_from_env(environ: Mapping[str, str] | None = None) -> int:
    env = os.environ if environ is None else environ
    for key in ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
        if env.get(key):
            try:
                return int(env[key])
            except ValueError:
                pass
    return 1


def select_backend(
    environ: Mapping[str, str] | None = None, cuda: bool | None = None
) -> str | None:
    """Process-group backend for this launch: smddp, nccl, gloo, or None for one process."""
    if smddp_requested(environ) and smddp_available():
        return "smddp"
    if world_size_from_env(environ) <= 1:
        return None
    if cuda is None:
        import torch

        cuda = torch.cuda.is_available()
    return "nccl" if cuda else "gloo"


def trainer_ddp_backend(backend: str | None) -> str | None:
    """The value for TrainingArguments.ddp_backend.

    smddp is not a TrainingArguments choice: the Trainer (through accelerate) switches
    to it by itself when SM_FRAMEWORK_PARAMS asks for it and smdistributed is installed,
    and rejects any other explicit backend in that case.
    """
    return None if backend in (None, "smddp") else backend


# ---------------------------------------------------------------- device


@dataclass(frozen=True)
class DeviceCaps:
    cuda: bool
    bf16: bool
    tf32: bool
    name: str

    @classmethod
    def detect(cls) -> DeviceCaps:
        import torch

        if torch.cuda.is_available():
            major, _minor = torch.cuda.get_device_capability()
            return cls(
                cuda=True,
                bf16=bool(torch.cuda.is_bf16_supported()),
                tf32=major >= 8,
                name=torch.cuda.get_device_name(),
            )
        return cls(cuda=False, bf16=False, tf32=False, name="cpu")
