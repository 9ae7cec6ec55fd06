"""The entrypoint's flow: hyperparameters, data, model, Trainer, checkpoints, model dir."""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import logging
import os
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import checkpoints, hparams, lora, parallel
from .callbacks import MetricLineCallback, SigtermCheckpointCallback
from .data import DataError, load_split
from .defaults import Performance, resolve
from .env import DeviceCaps, SageMakerEnv, read_env, select_backend, trainer_ddp_backend
from .hparams import HyperparameterError, Hyperparameters
from .tasks import (
    DEFAULT_BEST_METRIC,
    PREPARE,
    TaskData,
    cache_dir,
    configure_cache,
    limit_raw,
    model_auto_class,
)

logger = logging.getLogger("ftl_train")

EXIT_TERMINATED = 143  # 128 + SIGTERM
TRAIN_CHANNELS = ("train", "training")
EVAL_CHANNELS = ("validation", "valid", "eval", "dev", "test")
MODEL_CHANNELS = ("model",)


@dataclass
class Run:
    hp: Hyperparameters
    sm: SageMakerEnv
    perf: Performance
    args: Any  # transformers.TrainingArguments
    trainer: Any  # FtlTrainer
    task: TaskData
    tokenizer: Any
    resume_from: str | None
    checkpoint_dir: str
    sigterm: SigtermCheckpointCallback
    model_path: str = ""


# ---------------------------------------------------------------- inputs


def resolve_model_path(hp: Hyperparameters, sm: SageMakerEnv) -> str:
    """The `model` channel when it holds a model, else model_name_or_path."""
    channel = sm.channel(*MODEL_CHANNELS)
    if channel:
        if os.path.isfile(os.path.join(channel, "config.json")):
            return channel
        for sub in sorted(glob.glob(os.path.join(channel, "*", "config.json"))):
            return os.path.dirname(sub)
        tars = sorted(glob.glob(os.path.join(channel, "*.tar.gz")))
        if tars:  # a SageMaker model artifact (model.tar.gz)
            found = _extract_model_tarball(tars[0])
            if found:
                return found
        if hp.model_name_or_path is None:
            raise HyperparameterError(
                f"the model channel {channel} holds no model (no config.json)"
            )
        logger.warning(
            "the model channel holds no config.json; using model_name_or_path=%s",
            hp.model_name_or_path,
        )
    if hp.model_name_or_path is None:
        raise HyperparameterError("no model: set model_name_or_path or provide a `model` channel")
    return hp.model_name_or_path


EVAL_SPLITS = ("validation", "valid", "eval", "dev", "test")


@dataclass
class DataPlan:
    train_path: str
    eval_path: str | None
    eval_split_in_train: (
        str | None
    )  # a DatasetDict in the train channel that carries a validation split

    @property
    def has_eval(self) -> bool:
        return self.eval_path is not None or self.eval_split_in_train is not None


def plan_data(sm: SageMakerEnv) -> DataPlan:
    """Find the data folders without reading the data."""
    train_path = sm.channel(*TRAIN_CHANNELS)
    if train_path is None:
        raise DataError(
            "no training data: expected a `train` channel (SM_CHANNEL_TRAIN); channels present: "
            + (", ".join(sorted(sm.channels)) or "none")
        )
    eval_path = sm.channel(*EVAL_CHANNELS)
    in_train = None
    dd = os.path.join(train_path, "dataset_dict.json")
    if eval_path is None and os.path.isfile(dd):
        try:
            with open(dd, encoding="utf-8") as fh:
                splits = json.load(fh).get("splits", [])
        except (OSError, json.JSONDecodeError):
            splits = []
        in_train = next((name for name in EVAL_SPLITS if name in splits), None)
    return DataPlan(train_path, eval_path, in_train)


def _safe_extract(tar: tarfile.TarFile, dest: str) -> None:
    try:
        tar.extractall(dest, filter="data")
    except TypeError:  # Python without extraction filters (older py39/py310 images)
        root = os.path.realpath(dest)
        for member in tar.getmembers():
            target = os.path.realpath(os.path.join(dest, member.name))
            if (
                not (target == root or target.startswith(root + os.sep))
                or member.issym()
                or member.islnk()
            ):
                raise DataError(
                    f"refusing to extract {member.name!r} from the model archive"
                ) from None
        tar.extractall(dest)  # noqa: S202 - members checked above


def _extract_model_tarball(tar_path: str) -> str | None:
    """Unpack once per node into the cache folder; return the folder holding config.json."""
    st = os.stat(tar_path)
    key = f"{os.path.abspath(tar_path)}:{st.st_size}:{int(st.st_mtime)}"
    dest = os.path.join(cache_dir(), "model-" + hashlib.sha256(key.encode()).hexdigest()[:16])
    if not os.path.isdir(dest):
        tmp = tempfile.mkdtemp(prefix=".extract-", dir=cache_dir())
        with tarfile.open(tar_path) as tar:
            _safe_extract(tar, tmp)
        try:
            os.rename(tmp, dest)  # atomic; another process may have won the race
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    found = sorted(glob.glob(os.path.join(dest, "**", "config.json"), recursive=True))
    return os.path.dirname(found[0]) if found else None


def load_data(hp: Hyperparameters, plan: DataPlan) -> tuple[Any, Any]:
    cache = os.path.join(cache_dir(), "datasets")
    train = load_split(plan.train_path, ("train",), cache_dir=cache)
    evald = None
    if plan.eval_path is not None:
        evald = load_split(plan.eval_path, EVAL_SPLITS, cache_dir=cache)
    elif plan.eval_split_in_train is not None:
        evald = load_split(plan.train_path, (plan.eval_split_in_train,), cache_dir=cache)
    return limit_raw(train, hp.max_train_samples), limit_raw(evald, hp.max_eval_samples)


# ---------------------------------------------------------------- model


def weight_dtype(hp: Hyperparameters, perf: Performance) -> Any:
    """float32 weights for full fine-tuning (bf16/fp16 autocast computes, the optimizer updates
    fp32 master weights); the frozen base of LoRA in the 16-bit compute dtype. Explicit because
    transformers 5 would otherwise keep a checkpoint's own dtype (usually bf16) for training."""
    import torch

    if hp.peft == "none":
        return torch.float32
    return torch.bfloat16 if perf.bf16 else torch.float16 if perf.fp16 else torch.float32


def load_model(hp: Hyperparameters, model_path: str, perf: Performance, model_kwargs: dict) -> Any:
    auto = model_auto_class(hp.task)
    kwargs = dict(model_kwargs)
    kwargs.update(lora.quantization_kwargs(hp))
    kwargs.setdefault("dtype", weight_dtype(hp, perf))
    attn = perf.attn_implementation
    try:
        model = auto.from_pretrained(model_path, attn_implementation=attn, **kwargs)
    except (ValueError, ImportError) as exc:
        if attn == "eager":
            raise
        logger.warning(
            "attn_implementation=%s is not available for this model (%s); using eager", attn, exc
        )
        model = auto.from_pretrained(model_path, attn_implementation="eager", **kwargs)
    if hp.task in ("clm", "sft"):
        if getattr(model.config, "pad_token_id", None) is None:
            model.config.pad_token_id = model.config.eos_token_id
        # No KV cache while training: with one, transformers skips its packed-sequence mask
        # and packed examples would attend to each other. Switched back on before the final save.
        model.config.use_cache = False
    return model


# ---------------------------------------------------------------- training arguments


def _training_fields() -> set[str]:
    from transformers import TrainingArguments

    return {f.name for f in dataclasses.fields(TrainingArguments)}


def _report_to(sm: SageMakerEnv) -> str:
    """TensorBoard when the template asked for its output folder and the package is there."""
    if not sm.tensorboard_dir:
        return "none"
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        return "none"
    os.environ.setdefault("TENSORBOARD_LOGGING_DIR", sm.tensorboard_dir)
    return "tensorboard"


def _sharding_and_checkpointing(
    hp: Hyperparameters, perf: Performance, environ: Mapping[str, str], fields: set[str]
) -> dict[str, Any]:
    """FSDP fields (with FSDP's own activation checkpointing) or the Trainer's checkpointing."""
    kw: dict[str, Any] = {}
    fsdp = parallel.fsdp_training_args(
        parallel.smp_v2_fsdp_options(environ, hp),
        hp.fsdp_transformer_layer_cls_to_wrap,
        perf.gradient_checkpointing,
    )
    kw.update(fsdp)
    # transformers 5 renamed gradient_checkpointing to activation_checkpointing; under FSDP
    # the checkpointing is FSDP's own (fsdp_config), the Trainer's would all-gather twice.
    kw[
        "activation_checkpointing"
        if "activation_checkpointing" in fields
        else "gradient_checkpointing"
    ] = bool(perf.gradient_checkpointing and not fsdp)
    if perf.gradient_checkpointing and not fsdp:
        ck = "activation_checkpointing_kwargs"
        kw[ck if ck in fields else "gradient_checkpointing_kwargs"] = {"use_reentrant": False}
    return kw


def build_training_arguments(
    hp: Hyperparameters,
    perf: Performance,
    sm: SageMakerEnv,
    checkpoint_dir: str,
    has_eval: bool,
    environ: Mapping[str, str] | None = None,
) -> Any:
    from transformers import TrainingArguments

    fields = _training_fields()
    eval_steps = hp.eval_steps if has_eval else 0
    step_eval = bool(has_eval and eval_steps > 0)
    load_best = hp.load_best_model_at_end
    if load_best is None:
        load_best = step_eval
    if load_best and not step_eval:
        raise HyperparameterError("load_best_model_at_end needs validation data and eval_steps > 0")
    if load_best and hp.save_steps % eval_steps != 0:
        raise HyperparameterError(
            f"load_best_model_at_end needs save_steps ({hp.save_steps}) "
            f"to be a multiple of eval_steps ({eval_steps})"
        )
    metric = hp.metric_for_best_model or DEFAULT_BEST_METRIC[hp.task]
    bare = metric[len("eval_") :] if metric.startswith("eval_") else metric
    greater = not (bare.endswith("loss") or bare.endswith("perplexity"))

    report_to = _report_to(sm)

    kw: dict[str, Any] = dict(
        output_dir=checkpoint_dir,
        do_train=True,
        do_eval=has_eval,
        learning_rate=hp.learning_rate,
        num_train_epochs=hp.num_train_epochs,
        max_steps=hp.max_steps,
        per_device_train_batch_size=hp.per_device_train_batch_size,
        per_device_eval_batch_size=hp.per_device_eval_batch_size,
        gradient_accumulation_steps=hp.gradient_accumulation_steps,
        weight_decay=hp.weight_decay,
        max_grad_norm=hp.max_grad_norm,
        lr_scheduler_type=hp.lr_scheduler_type,
        seed=hp.seed,
        bf16=perf.bf16,
        fp16=perf.fp16,
        tf32=perf.tf32,
        optim=perf.optim,
        torch_compile=perf.torch_compile,
        dataloader_num_workers=perf.dataloader_num_workers,
        dataloader_pin_memory=perf.dataloader_pin_memory,
        logging_strategy="steps",
        logging_steps=hp.logging_steps,
        save_strategy="steps",
        save_steps=hp.save_steps,
        save_total_limit=hp.save_total_limit,
        save_on_each_node=False,  # one process writes each file; other nodes only their RNG states
        load_best_model_at_end=load_best,
        metric_for_best_model=metric if load_best else None,
        greater_is_better=greater if load_best else None,
        report_to=report_to,
        disable_tqdm=True,  # progress bars flood CloudWatch; metrics are printed as lines
        log_level="info",
        log_level_replica="warning",
        ddp_backend=trainer_ddp_backend(select_backend(environ)),
        ignore_data_skip=False,
        remove_unused_columns=True,
    )
    kw["eval_strategy" if "eval_strategy" in fields else "evaluation_strategy"] = (
        "steps" if step_eval else "no"
    )
    if step_eval:
        kw["eval_steps"] = eval_steps
    if "warmup_ratio" in fields:
        kw["warmup_ratio"] = hp.warmup_ratio
    else:
        kw["warmup_steps"] = hp.warmup_ratio  # transformers 5: a float < 1 is a ratio
    if report_to == "tensorboard" and "logging_dir" in fields:
        kw["logging_dir"] = sm.tensorboard_dir
    kw.update(_sharding_and_checkpointing(hp, perf, environ or os.environ, fields))
    if not perf.cuda:
        # Said outright: bf16 autocast on a CPU wants it, and so does a multi-process CPU run
        # (gloo), which accelerate otherwise sets up as a single process.
        kw["use_cpu"] = True
    if "save_safetensors" in fields:
        kw["save_safetensors"] = True
    dropped = [k for k in kw if k not in fields]
    for k in dropped:
        logger.info("this transformers version has no TrainingArguments.%s; left out", k)
        kw.pop(k)
    return TrainingArguments(**kw)


# ---------------------------------------------------------------- assembly


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time (it may be swapped, e.g. by pytest)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def setup_logging(main_process: bool = True) -> None:
    level = logging.INFO if main_process else logging.WARNING
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    try:
        import datasets
        import transformers

        # Config dumps and per-file load messages are noise in CloudWatch;
        # keep the Trainer's own info.
        transformers.utils.logging.set_verbosity(logging.WARNING)
        for name in (
            "transformers.trainer",
            "transformers.trainer_utils",
            "transformers.trainer_callback",
        ):
            logging.getLogger(name).setLevel(level)
        datasets.utils.logging.set_verbosity(logging.WARNING)
        datasets.disable_progress_bars()
    except Exception:  # pragma: no cover
        pass


def prepare_run(
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    extra: Mapping[str, Any] | None = None,
    callbacks: Sequence[Any] = (),
    caps: DeviceCaps | None = None,
) -> Run:
    """Everything up to a ready Trainer (shared with bench/train_throughput.py)."""
    environ = os.environ if environ is None else environ
    hp = hparams.parse(argv, environ, extra)
    if hp.ignored:
        logger.info("ignoring platform hyperparameters: %s", ", ".join(hp.ignored))
    sm = read_env(environ)
    configure_cache(environ.get("FTL_CACHE_DIR"))
    sigterm = SigtermCheckpointCallback()
    sigterm.install()
    caps = caps or DeviceCaps.detect()
    perf = resolve(hp, caps)
    for note in perf.notes:
        logger.warning(note)
    lora.check_peft(hp, caps.cuda)

    checkpoint_dir = hp.checkpoint_dir or sm.default_checkpoint_dir
    resume_from = checkpoints.newest_complete(checkpoint_dir)

    from transformers import AutoConfig, AutoTokenizer, set_seed

    model_path = resolve_model_path(hp, sm)
    plan = plan_data(sm)
    os.makedirs(checkpoint_dir, exist_ok=True)
    args = build_training_arguments(
        hp, perf, sm, checkpoint_dir, has_eval=plan.has_eval, environ=environ
    )
    setup_logging(args.process_index == 0)
    logger.info(
        "device=%s world_size=%d backend=%s resume_from=%s",
        caps.name,
        args.world_size,
        select_backend(environ),
        resume_from,
    )

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    config = AutoConfig.from_pretrained(model_path)
    # The node's main process reads and tokenizes first; the others then reuse its cache files.
    with args.main_process_first(desc="preprocessing"):
        train_raw, eval_raw = load_data(hp, plan)
        task = PREPARE[hp.task](hp, tokenizer, config, train_raw, eval_raw, perf.pad_to_multiple_of)
    if task.train is None or len(task.train) == 0:
        raise DataError("the training data produced no examples")

    set_seed(hp.seed)
    tsm = parallel.smp_v2_init(environ)  # after TrainingArguments set the process group up
    model = load_model(hp, model_path, perf, task.model_kwargs)
    model = lora.wrap(hp, model, perf.gradient_checkpointing)
    from .throughput import flops_per_token

    fpt = flops_per_token(model)  # before FSDP/SMP shard the parameters
    model = parallel.smp_v2_transform(tsm, model)
    trainer = _make_trainer(model, args, task, tokenizer, perf, [sigterm, *callbacks], fpt)
    run = Run(hp, sm, perf, args, trainer, task, tokenizer, resume_from, checkpoint_dir, sigterm)
    run.model_path = model_path
    return run


def _make_trainer(
    model: Any,
    args: Any,
    task: TaskData,
    tokenizer: Any,
    perf: Performance,
    callbacks: list,
    flops_per_token: float,
) -> Any:
    lengths = None
    if (
        perf.group_by_length
        and task.lengths_column
        and task.lengths_column in task.train.column_names
    ):
        lengths = list(task.train[task.lengths_column])

    from .trainer import FtlTrainer

    trainer_kwargs: dict[str, Any] = dict(
        model=model,
        args=args,
        data_collator=task.collator,
        train_dataset=task.train,
        eval_dataset=task.eval,
        compute_metrics=task.compute_metrics,
        callbacks=[MetricLineCallback(), *callbacks],
        ftl_lengths=lengths,
        ftl_is_lm=task.is_lm,
        ftl_flops_per_token=flops_per_token,
    )
    import inspect

    from transformers import Trainer

    if "processing_class" in inspect.signature(Trainer.__init__).parameters:
        trainer_kwargs["processing_class"] = tokenizer
    else:  # transformers < 4.46
        trainer_kwargs["tokenizer"] = tokenizer
    trainer = FtlTrainer(**trainer_kwargs)
    # The printer echoes every log dict; the ftl_metric lines already carry them.
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    if task.label_names:
        trainer.label_names = task.label_names
    return trainer


def _write_json(path: str, obj: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=2, sort_keys=True, default=str)


def main(
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    callbacks: Sequence[Any] = (),
) -> int:
    setup_logging(True)
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        print("hyperparameters (pass as --name value):\n" + hparams.describe())
        return 0
    try:
        run = prepare_run(argv, environ, callbacks=callbacks)
    except (HyperparameterError, DataError) as exc:
        print(f"ftl_train: error: {exc}", file=sys.stderr, flush=True)
        return 2

    trainer = run.trainer
    if run.sigterm.requested.is_set():
        logger.warning("SIGTERM before training started; nothing to save")
        return EXIT_TERMINATED
    if run.resume_from:
        logger.info("resuming from %s", run.resume_from)
    result = trainer.train(resume_from_checkpoint=run.resume_from)

    if run.sigterm.stopped or run.sigterm.requested.is_set():
        logger.warning(
            "stopped on SIGTERM after checkpointing step %d to %s",
            trainer.state.global_step,
            run.checkpoint_dir,
        )
        run.sigterm.uninstall()
        return EXIT_TERMINATED

    results: dict[str, Any] = dict(result.metrics)
    if run.task.eval is not None:
        results.update(trainer.evaluate())

    if run.hp.task in ("clm", "sft"):
        trainer.accelerator.unwrap_model(trainer.model).config.use_cache = True  # for generation
    if run.hp.peft != "none":
        lora.save_final(
            trainer, run.tokenizer, run.sm.model_dir, run.model_path, run.hp.merge_adapter
        )
    else:
        trainer.ftl_save_model(run.sm.model_dir)  # writes on the saving process only
        if trainer.is_world_process_zero():
            run.tokenizer.save_pretrained(run.sm.model_dir)
    if trainer.is_world_process_zero():
        results["global_step"] = trainer.state.global_step
        _write_json(os.path.join(run.sm.output_data_dir, "results.json"), results)
        _write_json(os.path.join(run.sm.output_data_dir, "hyperparameters.json"), run.hp.as_dict())
        if trainer.state.log_history:
            _write_json(
                os.path.join(run.sm.output_data_dir, "log_history.json"),
                {"log_history": trainer.state.log_history},
            )
    trainer.ftl_barrier()
    run.sigterm.uninstall()
    return 0
