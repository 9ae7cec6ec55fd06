"""The tasks: which data preparation and model class each ``task`` hyperparameter means.

* ``qa`` (``qa.py``): extractive question answering on SQuAD-style columns, windows over
  long contexts, exact match and F1.
* ``classification`` (``classification.py``): one text or a sentence pair with a label;
  accuracy and macro F1.
* ``mlm`` and ``clm`` (``lm.py``): masked and causal LM on texts cut into blocks; eval loss
  and perplexity.
* ``sft`` (``sft.py``): supervised fine-tuning of a causal LM on chat or prompt/completion
  data.

What they share (the prepared data's shape, sequence limits, the tokenization cache) is in
``preprocess.py``.
"""

from __future__ import annotations

from typing import Any

from .classification import prepare_classification
from .lm import prepare_lm
from .preprocess import TaskData
from .qa import prepare_qa


def _prepare_sft(*args: Any) -> TaskData:
    from .sft import prepare_sft  # imports torch: only when the task is sft

    return prepare_sft(*args)


PREPARE = {
    "sft": _prepare_sft,
    "qa": prepare_qa,
    "classification": prepare_classification,
    "mlm": prepare_lm,
    "clm": prepare_lm,
}


def model_auto_class(task: str) -> Any:
    import transformers

    return {
        "qa": transformers.AutoModelForQuestionAnswering,
        "classification": transformers.AutoModelForSequenceClassification,
        "mlm": transformers.AutoModelForMaskedLM,
        "clm": transformers.AutoModelForCausalLM,
        "sft": transformers.AutoModelForCausalLM,
    }[task]
