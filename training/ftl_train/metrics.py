"""Evaluation metrics, computed here with numpy (no `evaluate` download at run time)."""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

# ---------------------------------------------------------------- classification


def accuracy(predictions: Sequence[int], labels: Sequence[int]) -> float:
    p = np.asarray(predictions)
    y = np.asarray(labels)
    if y.size == 0:
        return 0.0
    return float((p == y).mean())


def macro_f1(
    predictions: Sequence[int], labels: Sequence[int], num_labels: int | None = None
) -> float:
    """Unweighted mean of the per-class F1 over the classes present in labels or predictions."""
    p = np.asarray(predictions).astype(np.int64)
    y = np.asarray(labels).astype(np.int64)
    if y.size == 0:
        return 0.0
    classes = (
        np.union1d(np.unique(p), np.unique(y)) if num_labels is None else np.arange(num_labels)
    )
    if num_labels is not None:
        present = np.union1d(np.unique(p), np.unique(y))
        classes = classes[np.isin(classes, present)]
    scores = []
    for c in classes:
        tp = float(np.sum((p == c) & (y == c)))
        fp = float(np.sum((p == c) & (y != c)))
        fn = float(np.sum((p != c) & (y == c)))
        denom = 2 * tp + fp + fn
        scores.append(0.0 if denom == 0 else 2 * tp / denom)
    return float(np.mean(scores)) if scores else 0.0


def classification_metrics(logits: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    if isinstance(logits, (tuple, list)):
        logits = logits[0]
    preds = np.asarray(logits).argmax(axis=-1)
    return {"accuracy": accuracy(preds, labels), "f1": macro_f1(preds, labels)}


# ---------------------------------------------------------------- question answering

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower case, drop punctuation and English articles, squeeze whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match_score(prediction: str, truth: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(truth))


def f1_score(prediction: str, truth: str, version_2: bool = True) -> float:
    """Token-overlap F1 of the normalized answers.

    When either side normalizes to nothing: SQuAD v2.0 scores 1 if both do, else 0
    (unanswerable questions); SQuAD v1.1 scores 0 (no common token).
    """
    pred_tokens = normalize_answer(prediction).split()
    true_tokens = normalize_answer(truth).split()
    if not pred_tokens or not true_tokens:
        return float(version_2 and pred_tokens == true_tokens)
    common = collections.Counter(pred_tokens) & collections.Counter(true_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(true_tokens)
    return 2 * precision * recall / (precision + recall)


def squad_metrics(
    predictions: Mapping[str, str], references: Mapping[str, Iterable[str]], version_2: bool = False
) -> dict[str, float]:
    """Exact match and F1 in percent, each the max over an example's gold answers, by the
    rules of the official evaluation scripts (``evaluate-v1.1.py``, ``evaluate-v2.0.py``).

    ``version_2`` (a set with unanswerable questions): gold answers that normalize to the
    empty string (``the``, ``a,``, ``.``) are dropped, and a question left without any is
    unanswerable: its only gold answer is ``""``. v1.1 keeps every gold answer.
    """
    if not references:
        return {"exact_match": 0.0, "f1": 0.0}
    em = f1 = 0.0
    for qid, golds in references.items():
        golds = list(golds)
        if version_2:
            golds = [g for g in golds if normalize_answer(g)]
        golds = golds or [""]
        pred = predictions.get(qid, "")
        em += max(exact_match_score(pred, g) for g in golds)
        f1 += max(f1_score(pred, g, version_2) for g in golds)
    n = len(references)
    return {"exact_match": 100.0 * em / n, "f1": 100.0 * f1 / n}
