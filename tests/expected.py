"""What the tests expect of the shipped product, written once and independently of the code.

These are the oracle: the catalog's template names in their listed order (one per seed
article, then the causal-LM templates of issue 11) and the fields of the contract's job
object. A change to either is a change to what data scientists see, so it should fail a test
here first.
"""

from __future__ import annotations

SHIPPED_TEMPLATES = [
    "bert-large-qa",
    "roberta-large-mnli-mp",
    "distilbert-spot",
    "distilbert-chain",
    "distilbert-multilingual-sentiment",
    "albert-mlm-pretrain",
    "gpt-tp-sharded",
    "llm-sft-fsdp",
    "llm-lora",
    "llm-sft",
    "llm-smp-v2",
]

# The job object that submit and describe return (docs/API.md).
JOB_FIELDS = frozenset(
    {
        "job_name",
        "job_arn",
        "template",
        "status",
        "instance_type",
        "instance_count",
        "spot",
        "checkpoint_s3_uri",
        "output_s3_uri",
        "console_url",
        "team",
        "estimated_max_cost_usd",
    }
)
