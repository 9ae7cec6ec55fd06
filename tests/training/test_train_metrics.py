"""Metrics computed by the entrypoint itself (no `evaluate` download)."""

import math

import numpy as np
import pytest

from ftl_train import metrics as M
from ftl_train.qa import postprocess_qa


def test_normalize_and_squad_scores():
    assert M.normalize_answer("The  Big, Apple!") == "big apple"
    assert M.exact_match_score("the Big apple", "Big Apple.") == 1.0
    assert M.f1_score("big red apple", "big apple") == pytest.approx(0.8)
    scores = M.squad_metrics(
        {"a": "Paris", "b": "in London town"}, {"a": ["paris", "Paris, France"], "b": ["London"]}
    )
    assert scores["exact_match"] == pytest.approx(50.0)
    assert scores["f1"] == pytest.approx(100 * (1 + 0.5) / 2)
    # unanswerable (SQuAD 2.0): the empty prediction matches an empty gold list
    assert M.squad_metrics({"c": ""}, {"c": []}, version_2=True) == {
        "exact_match": 100.0,
        "f1": 100.0,
    }


def test_accuracy_and_macro_f1():
    y = [0, 0, 1, 1, 2, 2]
    p = [0, 1, 1, 1, 2, 0]
    assert M.accuracy(p, y) == pytest.approx(4 / 6)
    # per class F1: c0 = 2*1/(2+1+1)=0.5, c1 = 2*2/(4+1+0)=0.8, c2 = 2*1/(2+0+1)=2/3
    assert M.macro_f1(p, y) == pytest.approx((0.5 + 0.8 + 2 / 3) / 3)
    logits = np.eye(3)[p] * 5.0
    out = M.classification_metrics(logits, np.array(y))
    assert out["accuracy"] == pytest.approx(4 / 6) and math.isclose(
        out["f1"], (0.5 + 0.8 + 2 / 3) / 3
    )


def test_qa_postprocessing_across_windows():
    context = "alpha beta gamma delta epsilon"
    # two windows of the same example; offsets None outside the context
    offs_a = [None, (0, 5), (6, 10), (11, 16), None]
    offs_b = [None, (11, 16), (17, 22), (23, 30), None]
    start = np.full((2, 6), -10.0)
    end = np.full((2, 6), -10.0)
    start[0, 2], end[0, 3] = 2.0, 2.0  # "beta gamma", score 4
    start[1, 2], end[1, 3] = 3.0, 3.0  # "delta epsilon", score 6 (best)
    start[:, 0], end[:, 0] = (
        9.0,
        9.0,
    )  # [CLS] null answer in every window, only counted with allow_null
    out = postprocess_qa(start, end, ["x", "x"], [offs_a, offs_b], {"x": context})
    assert out == {"x": "delta epsilon"}
    out = postprocess_qa(start, end, ["x", "x"], [offs_a, offs_b], {"x": context}, allow_null=True)
    assert out == {"x": ""}
    # end before start and too-long spans are never chosen
    start2 = np.full((1, 5), -10.0)
    end2 = np.full((1, 5), -10.0)
    start2[0, 3] = 5.0  # best start, but every end after it is poor
    start2[0, 1], end2[0, 2] = 1.0, 1.0
    end2[0, 0] = 50.0  # best end is before any start (and outside the context)
    assert postprocess_qa(start2, end2, ["y"], [offs_a], {"y": context}) == {"y": "alpha beta"}
    assert postprocess_qa(start2, end2, ["y"], [offs_a], {"y": context}, max_answer_length=1) == {
        "y": "gamma"
    }
