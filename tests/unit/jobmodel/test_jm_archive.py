"""The archive's kind (issue 36): one fact, from the hyperparameters as the entrypoint reads
them, for the registry's version, its lineage and the evaluation job."""

from __future__ import annotations

import pytest

from jobmodel.after_training import archive as A


@pytest.mark.parametrize(
    ("hps", "kind"),
    [
        ({"model_name_or_path": "bert-base-uncased"}, A.FULL_MODEL),
        ({"peft": "none", "lora_r": "16"}, A.FULL_MODEL),  # lora_r alone is not an adapter
        ({"peft": "lora"}, A.ADAPTER),
        ({"peft": "qlora", "merge_adapter": "false"}, A.ADAPTER),
        ({"peft": "lora", "merge_adapter": "true"}, A.MERGED),
        ({"peft": '"lora"', "merge_adapter": "True"}, A.MERGED),  # the toolkit's JSON quoting
        ({"peft": "qlora", "merge_adapter": True}, A.MERGED),  # a template's JSON value
        ({"peft": "lora", "merge_adapter": "yes"}, A.MERGED),
        ({"peft": "lora", "merge_adapter": 0}, A.ADAPTER),
    ],
)
def test_the_kind_follows_peft_and_merge_adapter(hps, kind):
    assert A.archive_kind(hps).kind == kind


def test_each_kind_says_where_the_adapter_is_and_whether_the_base_is_needed():
    base = "meta-llama/Llama-3.1-8B-Instruct"
    full = A.archive_kind({"model_name_or_path": base})
    adapter = A.archive_kind({"peft": "lora", "model_name_or_path": base})
    merged = A.archive_kind({"peft": "lora", "merge_adapter": "true", "model_name_or_path": base})
    assert (full.adapter_path, adapter.adapter_path, merged.adapter_path) == (None, "", "adapter/")
    assert [k.needs_base_model for k in (full, adapter, merged)] == [False, True, False]
    assert adapter.describe().startswith(f"LoRA adapter of {base}")
    assert merged.describe().startswith(f"merged model: {base}") and "adapter/" in merged.describe()
    assert full.describe() == f"model fine-tuned from {base}"
    assert merged.lineage() == {"artifact": "merged-model", "base_model": base}
    assert A.archive_kind({}).lineage() == {"artifact": "full-model"}
