"""The entrypoint's flow: hyperparameters, data, model, Trainer, checkpoints, model dir.

The parts live beside it: ``inputs.py`` (where the model and data are), ``tasks.py`` (data
preparation per task), ``arguments.py`` (TrainingArguments), ``modelling.py`` (model and
Trainer), ``checkpoints.py`` (resume), ``lora.py`` and ``parallel.py`` (recipes).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import checkpoints, compat, hparams, kernels, lora, parallel, tracking
from .arguments import build_training_arguments
from .batching import BatchPlan, apply_global_batch
from .callbacks import SigtermCheckpointCallback
from .data import DataError
from .defaults import Performance, resolve
from .env import DeviceCaps, SageMakerEnv, read_env, select_backend
from .hparam_specs import describe
from .hparams import HyperparameterError, Hyperparameters
from .inputs import load_data, plan_data, resolve_model_path
from .modelling import load_model, make_trainer
from .preprocess import TaskData, configure_cache
from .tasks import PREPARE

logger = logging.getLogger("ftl_train")

EXIT_TERMINATED = 143  # 128 + SIGTERM


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
    batch: BatchPlan | None = None  # global_batch_size split over this host set's devices


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
    perf = resolve(hp, caps, parallel.smp_v1_parameters(environ))
    for note in perf.notes:
        logger.warning(note)
    lora.check_peft(hp, caps.cuda)
    kernels.check(hp, caps.cuda, environ)

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
    batch = apply_global_batch(hp, args)  # before the Trainer reads the batch settings
    parallel.check_fsdp_launch(args)
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
    with parallel.smp_v1_model_creation(environ):  # SMP v1 splits what is created here
        model = load_model(hp, model_path, perf, task.model_kwargs)
    parallel.check_tensor_parallel_heads(
        model.config, parallel.smp_v1_tensor_parallel_degree(environ)
    )
    model = lora.wrap(hp, model, perf.gradient_checkpointing)
    from .throughput import flops_per_token

    fpt = flops_per_token(model)  # before FSDP/SMP shard the parameters
    model = parallel.smp_v2_transform(tsm, model)
    trainer = make_trainer(model, args, task, tokenizer, perf, [sigterm, *callbacks], fpt)
    run = Run(hp, sm, perf, args, trainer, task, tokenizer, resume_from, checkpoint_dir, sigterm)
    run.model_path = model_path
    run.batch = batch
    return run


def _write_json(path: str, obj: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=2, sort_keys=True, default=str)


def _save_outputs(run: Run, results: dict[str, Any]) -> None:
    """The final model (or adapter) and tokenizer to SM_MODEL_DIR; results, hyperparameters
    and the log history to SM_OUTPUT_DATA_DIR."""
    trainer = run.trainer
    if run.hp.task in ("clm", "sft"):
        compat.unwrap_model(trainer).config.use_cache = True  # for generation
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
        results["kernels"] = trainer.ftl_kernels.as_dict()
        if run.batch is not None:
            results["batch"] = run.batch.as_dict()
        _write_json(os.path.join(run.sm.output_data_dir, "results.json"), results)
        _write_json(os.path.join(run.sm.output_data_dir, "hyperparameters.json"), run.hp.as_dict())
        if trainer.state.log_history:
            _write_json(
                os.path.join(run.sm.output_data_dir, "log_history.json"),
                {"log_history": trainer.state.log_history},
            )


def main(
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    callbacks: Sequence[Any] = (),
) -> int:
    setup_logging(True)
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        print("hyperparameters (pass as --name value):\n" + describe())
        return 0
    environ = os.environ if environ is None else environ
    tracked = tracking.settings(environ)  # issue 27: None unless the launcher tracks the job
    tracker = tracking.Tracker(tracked, environ) if tracked is not None else None
    try:
        run = prepare_run(argv, environ, callbacks=[*callbacks, *([tracker] if tracker else [])])
        checkpoints.check_resumable(run.resume_from, compat.trainer_fsdp_enabled(run.trainer))
    except (HyperparameterError, DataError, checkpoints.CheckpointError) as exc:
        print(f"ftl_train: error: {exc}", file=sys.stderr, flush=True)
        return 2
    if tracker is not None:
        tracker.params, tracker.checkpoint_dir = run.hp.as_dict(), run.checkpoint_dir

    trainer = run.trainer
    if run.sigterm.requested.is_set():
        logger.warning("SIGTERM before training started; nothing to save")
        return EXIT_TERMINATED
    if run.resume_from:
        logger.info("resuming from %s", run.resume_from)
    try:
        result = trainer.train(resume_from_checkpoint=run.resume_from)
    except BaseException:
        if tracker is not None:
            tracker.stop("FAILED")
        raise

    if run.sigterm.stopped or run.sigterm.requested.is_set():
        if tracker is not None:
            tracker.stop("KILLED")  # the next attempt continues the run
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
    _save_outputs(run, results)
    if tracker is not None:
        tracker.finish(results, trainer.state.global_step)
    trainer.ftl_barrier()
    run.sigterm.uninstall()
    return 0
