"""How a job's container starts: our init as PID 1, so a stop reaches the training script.

SageMaker stops a container as ``docker stop`` does: SIGTERM to the container's PID 1, then
SIGKILL when the grace period ends. In the training images PID 1 is the image's ENTRYPOINT
(``bash -m start_with_right_hostname.sh train``), and a namespace's PID 1 gets a signal from
outside only when it has a handler for it: bash has none, so the signal is dropped and the
script never checkpoints (issue 34). The rendered request therefore sets
``AlgorithmSpecification.ContainerEntrypoint`` to a small bash init and
``ContainerArguments`` to the image's ENTRYPOINT with ``train``, which is what the image
would have run. The init (``INIT_SCRIPT``):

* traps TERM and INT, then starts its arguments (the image's start) as a background child;
* on a signal, sends SIGTERM to the training processes only: every process whose command
  line is a Python interpreter, then only options (and ``mpi4py`` after ``-m``), then the
  entry point's file name (``training_process_pattern``, the init's ``$0``): the script
  the toolkit runs, each of torchrun's workers and each of mpirun's ranks on this host.
  Not the toolkit, not the ``/bin/sh -c`` between the toolkit and Python, not torchrun's
  agent (its script is ``torchrun``), not a process group. Processes forked by the script
  (data loader workers) share its command line and get the signal too; the script's
  handler only sets a flag;
* when no training process exists yet, signals its child instead, so the job ends at once
  (PID 1 then exits and the kernel ends every process of the container);
* waits until its child has exited, through any number of signals (PID 1 must outlive the
  training processes: its exit kills the namespace), and exits with the child's status.

Each host's container gets its own SIGTERM, so each host's init signals its own ranks.

The script is one line (the model's pattern ``.*`` matches no line break) and fits one
``TrainingContainerEntrypointString`` (at most 256 characters; at most 100 items in either
list): ``check_container_start`` holds the rule, the constraints check (``tests/authz``)
checks every rendered request against the full model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._shapes import Named, fail

__all__ = [
    "INIT_SCRIPT",
    "MAX_ITEM",
    "MAX_ITEMS",
    "TRAIN_ARGUMENT",
    "check_container_start",
    "container_start",
    "training_process_pattern",
]

# AlgorithmSpecification.ContainerEntrypoint / ContainerArguments (botocore sagemaker model,
# TrainingContainerEntrypoint and TrainingContainerArguments): 1 to 100 items, each at most
# 256 characters matching ``.*``.
MAX_ITEM = 256
MAX_ITEMS = 100
# What SageMaker passes to an image's ENTRYPOINT to train (the image's CMD is replaced).
TRAIN_ARGUMENT = "train"

# ``$0``: the pattern of a training process's command line (``training_process_pattern``),
# matched against /proc/<pid>/cmdline with its separators read as spaces.
INIT_SCRIPT = (
    "s(){ n=;for f in /proc/[1-9]*/cmdline;do "
    r"[[ $(tr \\0 \ <$f) =~ $0 ]]&&kill ${f:6:-8}&&n=1;done 2>/dev/null;};"
    "t(){ s;[ $n ]||kill $p;};trap t TERM INT;"
    '"$@"&p=$!;while kill -0 $p 2>/dev/null;do wait $p;done;wait $p'
)
_ERE_SPECIAL = frozenset("\\.[]()*+?{}|^$")


def training_process_pattern(entry_point: str) -> str:
    """The extended regular expression (bash ``=~``) a training process's command line
    matches: a Python interpreter, then only options (and ``mpi4py`` after ``-m``), then the
    entry point's file name (in any folder), then a space or the end."""
    name = "".join("\\" + c if c in _ERE_SPECIAL else c for c in entry_point.rsplit("/", 1)[-1])
    return f"^([^ ]*/)?python[^ ]* (-[^ ]* |mpi4py )*([^ ]*/)?{name}( |$)"


def container_start(image_entrypoint: Sequence[str], entry_point: str) -> dict[str, Any]:
    """``ContainerEntrypoint`` (the init, with the training processes' pattern as ``$0``) and
    ``ContainerArguments`` (the image's ENTRYPOINT and ``train``) for a template."""
    return {
        "ContainerEntrypoint": ["bash", "-c", INIT_SCRIPT, training_process_pattern(entry_point)],
        "ContainerArguments": [*image_entrypoint, TRAIN_ARGUMENT],
    }


def check_container_start(spec: Named, image_entrypoint: Any, entry_point: str) -> None:
    """Rule ``image-entrypoint``: the image's ENTRYPOINT is a list of one-line strings that,
    with the init, fits the request's limits (empty: the image's own start, no init)."""
    if not isinstance(image_entrypoint, tuple) or not all(
        type(x) is str and x and x.isprintable() for x in image_entrypoint
    ):
        raise fail(
            spec,
            "image-entrypoint",
            "image_entrypoint must be a list of non-empty one-line strings "
            f"(the image's ENTRYPOINT), got {image_entrypoint!r}",
        )
    if not image_entrypoint:
        return
    fields = container_start(image_entrypoint, entry_point)
    for key, items in fields.items():
        if len(items) > MAX_ITEMS or any(len(x) > MAX_ITEM for x in items):
            raise fail(
                spec,
                "image-entrypoint",
                f"{key} must have at most {MAX_ITEMS} items of at most {MAX_ITEM} characters "
                "(image_entrypoint and entry_point make it too long)",
            )
