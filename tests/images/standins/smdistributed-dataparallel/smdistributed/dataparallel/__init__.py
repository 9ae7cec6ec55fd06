"""TEST-ONLY STAND-IN for SageMaker's distributed data parallel library (smddp).

The real ``smdistributed-dataparallel`` is a closed binary that ships only inside SageMaker's
training images; it is not on PyPI. The image matrix (``tests/images``) puts this folder on
``PYTHONPATH`` for the images whose package-set file (``image_sets/*.json``,
``distribution_libraries``) says they ship the library, so that the code paths which switch
on when ``SM_FRAMEWORK_PARAMS`` carries ``"sagemaker_distributed_dataparallel_enabled": true``
run instead of only importing.

What it implements (every call the HF Trainer / accelerate in the catalog's images make):

- ``import smdistributed.dataparallel.torch.torch_smddp`` (accelerate's
  ``PartialState._prepare_backend``; transformers 4.26's ``TrainingArguments._setup_devices``)
  registers a ``torch.distributed`` backend named ``smddp``, so that
  ``torch.distributed.init_process_group(backend="smddp")`` works. The process group behind
  it is **gloo** (CPU). On import it also fills in, when missing, the environment the real
  launcher (``mpirun ... smddprun``) gives each process: ``RANK``, ``WORLD_SIZE``,
  ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``SMDATAPARALLEL_LOCAL_RANK`` (from Open MPI's
  ``OMPI_COMM_WORLD_*`` when present, else one process), ``MASTER_ADDR`` and ``MASTER_PORT``
  (a free port when there is one process).
- transformers (4.49) wraps the model in ``DistributedDataParallel(model,
  device_ids=[SMDATAPARALLEL_LOCAL_RANK])``. On a CPU, torch refuses ``device_ids`` for a CPU
  module, so ``torch_smddp`` patches ``DistributedDataParallel.__init__`` to drop
  ``device_ids``/``output_device`` **only** when the process group is this stand-in's
  ``smddp`` and every parameter is on the CPU. This adaptation exists only here: on a GPU the
  real call goes through unchanged.
- The pre-1.4 API, ``smdistributed.dataparallel.torch.distributed`` (``init_process_group``,
  ``is_initialized``, ``get_rank``, ``get_world_size``, ``get_local_rank``,
  ``get_local_size``, ``barrier``, ``all_reduce``, ``broadcast``, ``all_gather``,
  ``ReduceOp``) and ``smdistributed.dataparallel.torch.parallel.distributed
  .DistributedDataParallel``, over the same backend.
- ``smdistributed.dataparallel.exceptions`` (the training toolkit lists its classes).
- ``bin/smddprun`` (put ``bin`` on ``PATH`` to use it): the training toolkit runs ``mpirun ...
  smddprun python train.py`` when ``which smddprun`` finds one; it exports ``RANK``,
  ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` and ``SMDATAPARALLEL_LOCAL_RANK`` from
  Open MPI's variables and runs the command.

On a CPU the Trainer only takes the smddp path when ``TrainingArguments.use_cpu`` is off and
``ACCELERATE_TORCH_DEVICE=cpu`` names the device: with ``use_cpu`` accelerate never imports
``torch_smddp`` (no process group), yet transformers 4.49 still wraps the model for smddp.

Every call is appended as one JSON line to the file named by ``FTL_STANDIN_TRACE`` (when set),
so a test can assert the path was really taken.

What it does NOT prove:

- anything about the real library's collectives: its all-reduce algorithm, EFA/RDMA, NCCL
  interplay, performance, or behaviour on GPUs; gloo on a CPU stands in for all of it;
- multi-host training, ``mpirun``/``smddprun`` launch and their environment (the defaults
  filled in above are this stand-in's reading of what the launcher exports, not a copy);
- that the real library exists in the image, supports the image's PyTorch version, or
  supports the instance type (SageMaker checks that at job start);
- the real library's API drift between versions (1.7.0 in the PyTorch 1.13 image, 2.6.0 in
  the 2.5.1 images): this is one API for all of them;
- the GPU placement (``torch.cuda.set_device``, ``device_ids``) the Trainer does with it.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

__version__ = "0.0.0+ftl.standin"
STAND_IN = True


def _trace(call: str, **details: Any) -> None:
    """One JSON line per call in ``$FTL_STANDIN_TRACE`` (no-op when unset)."""
    path = os.environ.get("FTL_STANDIN_TRACE")
    if not path:
        return
    record = {
        "lib": "smdistributed.dataparallel",
        "call": call,
        "pid": os.getpid(),
        "time": time.time(),
        **details,
    }
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, default=str) + "\n")
