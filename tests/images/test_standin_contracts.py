"""The stand-ins refuse what the closed libraries refuse (issue 34, item 4).

Each rule is written down in the stand-in with the documentation it comes from; here each
refusal fires, in the environment of an image that ships the library, and what is accepted
is traced. One Python process per image runs every case (``CASES_*`` below), so the cost
is one interpreter start and one import of torch/transformers per image.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.images.test_standins import (
    IMAGE_PT113,
    IMAGE_PT251,
    IMAGE_SMP_V2,
    SMDDP,
    SMP_V1,
    SMP_V2,
    _env,
    _python,
)

pytestmark = [pytest.mark.slow, pytest.mark.images, pytest.mark.xdist_group("images")]

# Each case: (name, environment, code). The code runs in a fresh module namespace after the
# environment is applied; it prints one JSON line, or raises (the error's type and message
# are the result).
RUNNER = textwrap.dedent(
    """
    import json, os, sys, traceback
    cases = json.load(open(sys.argv[1]))
    out = {}
    for name, env, code in cases:
        os.environ.update(env)
        try:
            ns = {}
            exec(code, ns)
            out[name] = {"ok": ns.get("result")}
        except Exception as exc:  # the refusal under test
            out[name] = {"error": type(exc).__name__, "message": str(exc)}
        for key in env:
            os.environ.pop(key, None)
    print("RESULTS " + json.dumps(out))
    """
)


def _run_cases(image: str, stand_ins: list[Path], cases: list, tmp: Path) -> dict:
    python = _python(image)
    (tmp / "cases.json").write_text(json.dumps(cases))
    (tmp / "runner.py").write_text(RUNNER)
    env = _env(tmp, stand_ins, {})
    done = subprocess.run(
        [str(python), str(tmp / "runner.py"), str(tmp / "cases.json")],
        env=env,
        cwd=str(tmp),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    line = [x for x in done.stdout.splitlines() if x.startswith("RESULTS ")][-1]
    return json.loads(line.split(" ", 1)[1])


def _smp_env(params: dict, per_host: int = 8, hosts: int = 1) -> dict:
    return {
        "SM_HP_MP_PARAMETERS": json.dumps(params),
        "SM_FRAMEWORK_PARAMS": json.dumps(
            {"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": per_host}
        ),
        "SM_HOSTS": json.dumps([f"algo-{i + 1}" for i in range(hosts)]),
    }


SMP_V1_MODEL = """
import transformers, smdistributed.modelparallel.torch as smp
smp.reset(); smp.init()
cfg = transformers.GPT2Config(n_embd={heads} * 2, n_layer=2, n_head={heads}, vocab_size=64,
                              n_positions=32)
{create}
dm = smp.DistributedModel(model)
result = {{"split": smp.state.tp_split, "tp_size": smp.tp_size(), "pp_size": smp.pp_size(),
          "dp_size": smp.dp_size(), "rdp_size": smp.rdp_size(),
          "distributed": len(list(dm.distributed_modules()))}}
"""
IN_CONTEXT = "with smp.tensor_parallelism():\n    model = transformers.GPT2LMHeadModel(cfg)"
MARKED = "model = transformers.GPT2LMHeadModel(cfg)\nsmp.set_tensor_parallelism(model, True)"
PLAIN = "model = transformers.GPT2LMHeadModel(cfg)"

SMP_V1_BF16_TRAINER = """
import torch, transformers, smdistributed.modelparallel.torch as smp
import transformers.trainer as tt
smp.reset(); smp.init()
tt.smp = smp  # trainer.py imported smp at its own import only when SMP was already on
tt.IS_SAGEMAKER_MP_POST_1_10 = True
args = transformers.TrainingArguments("{out}", bf16=True, no_cuda=True, report_to=[])
model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_embd=8, n_layer=1, n_head=2,
                                                             vocab_size=64, n_positions=16))
transformers.Trainer(model=model, args=args)
"""


def test_smp_v1_stand_in_contracts(tmp_path: Path) -> None:
    tp4 = {"partitions": 1, "tensor_parallel_degree": 4, "ddp": True}
    cases = [
        ("split", _smp_env(tp4, hosts=2), SMP_V1_MODEL.format(heads=20, create=IN_CONTEXT)),
        ("marked", _smp_env(tp4), SMP_V1_MODEL.format(heads=20, create=MARKED)),
        ("not-created-in-context", _smp_env(tp4), SMP_V1_MODEL.format(heads=20, create=PLAIN)),
        ("heads", _smp_env(tp4), SMP_V1_MODEL.format(heads=25, create=IN_CONTEXT)),
        (
            "degrees-do-not-divide",
            _smp_env({"partitions": 3}),
            "import smdistributed.modelparallel.torch as smp\nsmp.reset(); smp.init()",
        ),
        (
            "tp-over-one-host",
            _smp_env({"partitions": 1, "tensor_parallel_degree": 8}, per_host=4, hosts=2),
            "import smdistributed.modelparallel.torch as smp\nsmp.reset(); smp.init()",
        ),
        (
            "fp16-and-bf16",
            _smp_env({"partitions": 1, "fp16": True, "bf16": True}),
            "import smdistributed.modelparallel.torch as smp\nsmp.reset(); smp.init()",
        ),
        (
            "trainer-bf16",
            _smp_env({"partitions": 1}),
            SMP_V1_BF16_TRAINER.format(out=tmp_path / "out"),
        ),
    ]
    got = _run_cases(IMAGE_PT113, [SMP_V1], cases, tmp_path)

    split = got["split"]["ok"]
    assert split["split"] == [
        {
            "model_type": "gpt2",
            "degree": 4,
            "layers": 2,
            "heads": 20,
            "heads_per_rank": 5,
            "hidden_per_rank": 10,
        }
    ]
    # tp_size() is the configuration's; 16 processes on 2 hosts, one pipeline stage
    assert (split["tp_size"], split["pp_size"], split["dp_size"], split["rdp_size"]) == (
        4,
        1,
        16,
        4,
    )
    assert split["distributed"] == 2
    assert got["marked"]["ok"]["split"][0]["heads_per_rank"] == 5
    # created outside tensor_parallelism() and not marked: SMP v1 leaves it replicated
    assert got["not-created-in-context"]["ok"]["split"] == []
    assert got["not-created-in-context"]["ok"]["distributed"] == 0
    assert "does not divide the 25 attention heads" in got["heads"]["message"]
    assert "= 3 does not divide the 8 processes" in got["degrees-do-not-divide"]["message"]
    assert "more than the 4 processes per host" in got["tp-over-one-host"]["message"]
    assert "fp16 and bf16 cannot both be true" in got["fp16-and-bf16"]["message"]
    # transformers 4.26's own refusal (real code in the image), which defect 2 hit on an A100
    assert "does not support BF16" in got["trainer-bf16"]["message"]


TSM = """
import json, torch, transformers, torch.sagemaker as tsm
tsm.state.__init__()
tsm.init({params})
cfg = {config}
model = tsm.transform(transformers.AutoModelForCausalLM.from_config(cfg))
result = {{"model": type(model).__name__, "tp": tsm.state.config.get("tensor_parallel_degree")}}
"""
LLAMA = (
    "transformers.LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, "
    "num_attention_heads=2, num_key_value_heads=2, vocab_size=64)"
)
GPT2 = "transformers.GPT2Config(n_embd=16, n_layer=1, n_head=2, vocab_size=64)"


def test_smp_v2_stand_in_contracts(tmp_path: Path) -> None:
    world2 = {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0"}
    cases = [
        ("llama-tp2", world2, TSM.format(params={"tensor_parallel_degree": 2}, config=LLAMA)),
        ("tp8-world2", world2, TSM.format(params={"tensor_parallel_degree": 8}, config=LLAMA)),
        ("gpt2-tp2", world2, TSM.format(params={"tensor_parallel_degree": 2}, config=GPT2)),
        ("gpt2-tp1", world2, TSM.format(params={"tensor_parallel_degree": 1}, config=GPT2)),
    ]
    got = _run_cases(IMAGE_SMP_V2, [SMP_V2], cases, tmp_path)
    assert got["llama-tp2"]["ok"] == {"model": "LlamaForCausalLM", "tp": 2}
    assert (
        "tensor_parallel_degree 8 does not divide the world size 2"
        in (got["tp8-world2"]["message"])
    )
    assert "not 'gpt2'" in got["gpt2-tp2"]["message"]
    assert got["gpt2-tp1"]["ok"]["model"] == "GPT2LMHeadModel"  # no TP: any model
    trace = [json.loads(x) for x in (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert [c for c in trace if c["call"] == "tensor_parallel"] == [
        {**c, "degree": 2, "model_type": "llama", "world_size": 2}
        for c in trace
        if c["call"] == "tensor_parallel"
    ]


SMDDP_INIT = """
import os, torch.distributed as dist
import smdistributed.dataparallel.torch.torch_smddp
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
if dist.is_initialized():
    dist.destroy_process_group()
dist.init_process_group(backend="{backend}", rank=0, world_size=1)
result = str(dist.get_backend())
dist.destroy_process_group()
"""


def test_smddp_stand_in_contracts(tmp_path: Path) -> None:
    enabled = {
        "SM_FRAMEWORK_PARAMS": json.dumps({"sagemaker_distributed_dataparallel_enabled": True})
    }
    cases = [
        ("smddp", enabled, SMDDP_INIT.format(backend="smddp")),
        ("gloo", enabled, SMDDP_INIT.format(backend="gloo")),
        ("gloo-without-smddp", {"SM_FRAMEWORK_PARAMS": "{}"}, SMDDP_INIT.format(backend="gloo")),
    ]
    got = _run_cases(IMAGE_PT251, [SMDDP], cases, tmp_path)
    assert got["smddp"]["ok"] == "smddp"
    assert "backend is 'gloo', not 'smddp'" in got["gloo"]["message"]
    assert got["gloo-without-smddp"]["ok"] == "gloo"
    backends = [
        json.loads(x)["backend"]
        for x in (tmp_path / "trace.jsonl").read_text().splitlines()
        if json.loads(x)["call"] == "init_process_group"
    ]
    assert backends == ["smddp", "gloo", "gloo"]
    assert os.path.isfile(SMDDP / "bin" / "smddprun")
