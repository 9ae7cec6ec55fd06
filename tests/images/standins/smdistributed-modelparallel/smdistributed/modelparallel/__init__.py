"""TEST-ONLY STAND-IN for SageMaker model parallelism v1 (``smdistributed.modelparallel``).

SMP v1 is a closed binary that ships only inside SageMaker's training images (1.15.0 in the
transformers 4.26 / PyTorch 1.13.1 image); it is not on PyPI. The image matrix puts this
folder on ``PYTHONPATH`` for the images whose package-set file says they ship the library, so
that the HF Trainer's SMP path (switched on by ``SM_HP_MP_PARAMETERS`` with ``partitions`` and
``SM_FRAMEWORK_PARAMS`` with ``sagemaker_mpi_enabled``) runs instead of only importing.

``smdistributed.modelparallel.torch`` implements, as rank 0 of the job SageMaker's MPI launch
describes (``sagemaker_mpi_num_of_processes_per_host`` on each of ``SM_HOSTS``), every call
transformers 4.26's Trainer, TrainingArguments, trainer_pt_utils and modeling_utils make;
its docstring lists them and what they do here. ``__version__`` says 1.15.0 (the image's
release) so transformers takes its ``>= 1.10`` code paths.

What it does NOT prove:

- pipeline parallelism: no partitioning, no pipeline schedule (``pipeline``, ``partitions``,
  ``placement_strategy``, ``auto_partition``), no inter-partition send/recv; the requested
  degrees are recorded in ``smp.state.cfg`` but the run has one partition;
- tensor-parallel math: the modules SMP v1 would split are found and checked as its
  documentation says (``torch/tensor_parallel.py``) and the split is traced, but no module is
  replaced with a distributed one;
- sharded optimizer state, activation checkpointing/offloading, FP16 master weights and loss
  scaling, delayed parameter initialisation;
- any collective: allgather/broadcast/barrier return at once; no MPI, NCCL, EFA, and no
  multi-process or multi-host run (``smp.init`` refuses a launch of more than one process);
- the real checkpoint file layout (``smp.save``'s ``_<pp>_<tp>[_<rdp>]`` suffixes and
  ``smp.save_checkpoint``'s folder are this stand-in's choice, readable only by it);
- the real library's API drift: the calls follow the SMP v1 documentation and what
  transformers calls, nothing more.

Contract checks (each names its documentation where it is made): the pipeline x tensor
degree divides the job's processes and a tensor-parallel group fits one host (``smp.init``),
fp16 and bf16 are not both on, tensor parallelism applies only to modules created in
``tensor_parallelism()``/``model_creation`` or marked with ``set_tensor_parallelism``, only
to the Hugging Face families SMP v1 translates, and only with a head count the degree
divides (``DistributedModel``). ``tp_size()``, ``pp_size()``, ``dp_size()`` and
``rdp_size()`` are the configuration's. Every call is traced to ``$FTL_STANDIN_TRACE``.

Microbatches are real, though: ``smp.step`` splits every tensor argument along its batch axis
into ``microbatches`` pieces (the batch must divide evenly, as the real library requires),
runs the function once per piece, averages gradients across them
(``average_grads_across_microbatches``) and returns ``StepOutput`` objects.
"""

__version__ = "1.15.0"
STAND_IN = True
