"""SQuAD scoring and QA post-processing against the reference rules, on generated inputs.

The references are written out here from their sources (no package ships them offline):

* SQuAD v1.1 and v2.0: the official evaluation scripts, ``evaluate-v1.1.py`` and
  ``evaluate-v2.0.py`` (the SQuAD explorer's). Both normalize an answer the same way:
  lower case, drop ASCII punctuation, drop the words a/an/the, squeeze whitespace.
  v1.1: EM = normalized strings equal; F1 over the normalized tokens, 0 when no token is
  shared (so also when either side is empty); each the max over the gold answers.
  v2.0: gold answers whose normalized text is empty are dropped, and a question left
  without any has the single gold answer ``""``; EM as v1.1; F1 = 1 when both token lists
  are empty, 0 when only one is, else as v1.1.
* Post-processing: Hugging Face's ``postprocess_qa_predictions``
  (transformers examples/pytorch/question-answering/utils_qa.py): for each window, the
  n-best start and end logits; a pair counts when both are context tokens, end >= start and
  the span is at most max_answer_length tokens; score = start + end logit. With
  unanswerable questions the null answer (the lowest [CLS] score over the windows) joins
  them; the n-best scores are kept, best first. v1: the best one's text. v2: the best one
  whose text is not empty; "" when the null score beats it.
"""

from __future__ import annotations

import collections
import random
import re
import string

import numpy as np

from ftl_train import metrics as M
from ftl_train.qa import postprocess_qa

# ---------------------------------------------------------------- official SQuAD rules


def _norm(s):
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s, flags=re.UNICODE)
    return " ".join(s.split())


def _f1_tokens(pred, gold):
    common = collections.Counter(pred) & collections.Counter(gold)
    same = sum(common.values())
    if same == 0:
        return 0.0
    p, r = same / len(pred), same / len(gold)
    return 2 * p * r / (p + r)


def official_v11(pred, golds):
    em = max(float(_norm(pred) == _norm(g)) for g in golds)
    f1 = max(_f1_tokens(_norm(pred).split(), _norm(g).split()) for g in golds)
    return em, f1


def official_v20(pred, golds):
    golds = [g for g in golds if _norm(g)] or [""]
    em = max(float(_norm(pred) == _norm(g)) for g in golds)

    def f1(g):
        gt, pt = (_norm(g).split() if g else []), (_norm(pred).split() if pred else [])
        if not gt or not pt:
            return float(gt == pt)
        return _f1_tokens(pt, gt)

    return em, max(f1(g) for g in golds)


PIECES = ["the", "a", "an", "The", "A", "north", "North", "river", "Nile", "1984", "3.14"]
PIECES += ["é", "naïve", "theatre", "an.", "a,", "!", ".", "-", "'", "", " ", "\t", "A!"]


def _answer(rng):
    return rng.choice([" ", "", "  "]).join(rng.choice(PIECES) for _ in range(rng.randint(0, 4)))


def test_squad_scores_follow_the_official_v1_1_and_v2_0_scripts():
    rng = random.Random(0)
    for version_2, official in ((False, official_v11), (True, official_v20)):
        agree = 0
        for _set in range(300):
            preds, refs, ems, f1s = {}, {}, [], []
            for q in range(rng.randint(1, 60)):
                golds = [_answer(rng) for _ in range(rng.randint(0 if version_2 else 1, 3))]
                pred = _answer(rng)
                preds[str(q)], refs[str(q)] = pred, golds
                em, f1 = official(pred, golds or [""])
                ems.append(em)
                f1s.append(f1)
                one = M.squad_metrics({"q": pred}, {"q": golds}, version_2=version_2)
                assert (one["exact_match"], one["f1"]) == (100 * em, 100 * f1), (pred, golds)
                agree += 1
            whole = M.squad_metrics(preds, refs, version_2=version_2)
            assert whole["exact_match"] == np.float64(100 * sum(ems) / len(ems))
            assert abs(whole["f1"] - 100 * sum(f1s) / len(f1s)) < 1e-9
        print(f"\nsquad {'v2.0' if version_2 else 'v1.1'}: {agree} pairs and 300 sets agree")
    # the example: golds that normalize to nothing are not answers in v2.0
    assert M.squad_metrics({"q": ""}, {"q": ["A!", " north"]}, version_2=True)["f1"] == 0.0


# ---------------------------------------------------------------- post-processing


def hf_postprocess(start, end, feature_ids, offsets, contexts, n_best, max_len, v2):
    out = {}
    for ex_id, context in contexts.items():
        prelim, null = [], None
        for fi in [i for i, e in enumerate(feature_ids) if e == ex_id]:
            s_log, e_log, offs = start[fi], end[fi], offsets[fi]
            score0 = s_log[0] + e_log[0]
            if null is None or null > score0:
                null = score0
            for s in np.argsort(s_log)[-1 : -n_best - 1 : -1]:
                for e in np.argsort(e_log)[-1 : -n_best - 1 : -1]:
                    if offs[s] is None or offs[e] is None or e < s or e - s + 1 > max_len:
                        continue
                    prelim.append((s_log[s] + e_log[e], context[offs[s][0] : offs[e][1]]))
        if v2:
            prelim.append((null, ""))
        preds = sorted(prelim, key=lambda p: p[0], reverse=True)[:n_best]
        if not v2:
            out[ex_id] = preds[0][1]
            continue
        best = next(p for p in preds if p[1])
        out[ex_id] = "" if null - best[0] > 0 else best[1]
    return out


def test_postprocessing_follows_hugging_face_and_skips_empty_spans():
    rng = np.random.default_rng(0)
    cases = skipped_empty = 0
    for _ in range(300):
        words = [f"w{k}" for k in range(int(rng.integers(8, 30)))]
        context = " ".join(words)
        spans, pos = [], 0
        for w in words:  # a bare-space token (zero width) before some words, as byte-level BPE
            if rng.random() < 0.4:
                spans.append((pos, pos))
            spans.append((pos, pos + len(w)))
            pos += len(w) + 1
        n_feat = int(rng.integers(1, 3))
        width = len(spans) // n_feat + 3
        feature_ids, offsets, starts, ends = [], [], [], []
        for f in range(n_feat):
            window = spans[f * (width - 3) : f * (width - 3) + width - 2]
            offs = [None, *window, None]
            feature_ids.append("x")
            offsets.append(offs)
            starts.append(rng.normal(size=len(offs)) * 3)
            ends.append(rng.normal(size=len(offs)) * 3)
            zero = [k for k, o in enumerate(offs) if o is not None and o[0] == o[1]]
            if zero and rng.random() < 0.7:  # make an empty span the best one
                k = int(rng.choice(zero))
                starts[-1][k] += 12.0
                ends[-1][k] += 12.0
        n_best, max_len = int(rng.integers(2, 8)), int(rng.integers(1, 6))
        for v2 in (False, True):
            args = (starts, ends, feature_ids, offsets, {"x": context}, n_best, max_len)
            try:
                expected = hf_postprocess(*args, v2)
            except (StopIteration, IndexError):
                continue  # no non-empty candidate kept: the reference has no answer to give
            got = postprocess_qa(
                starts, ends, feature_ids, offsets, {"x": context}, n_best, max_len, v2
            )
            assert got == expected
            cases += 1
            if v2 and expected["x"] and hf_postprocess(*args, False)["x"] == "":
                skipped_empty += 1
    print(f"\nqa post-processing: {cases} cases agree ({skipped_empty} skip an empty best span)")
    assert skipped_empty > 20
