"""The tuner's objective hyperparameter has one name on both sides (issue 37).

SageMaker's tuner adds ``_tuning_objective_metric`` to every trial's hyperparameters. The job
model names it when it renders a sweep (``jobmodel.sweeps.render``); the training entrypoint,
which runs in the images and cannot import the job model, ignores it as a hyperparameter and
reads it to know a trial (``ftl_train.hparams``, ``ftl_train.tracking``). The sandbox's tuner and
the constraints check keep AWS's own spelling as independent oracles.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ftl_train import hparams, tracking
from jobmodel.sweeps.render import OBJECTIVE_HYPERPARAMETER

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from testsupport.constraints.rules_tuner import (  # noqa: E402
    OBJECTIVE_HYPERPARAMETER as AWS_NAME,
)


def test_the_training_code_and_the_job_model_name_the_objective_alike():
    assert hparams.TUNING_OBJECTIVE == OBJECTIVE_HYPERPARAMETER == AWS_NAME
    assert tracking.TUNING_OBJECTIVE is hparams.TUNING_OBJECTIVE
    assert OBJECTIVE_HYPERPARAMETER in hparams.IGNORED_NAMES


def test_a_trial_is_known_by_the_job_models_name():
    import json

    hps = {OBJECTIVE_HYPERPARAMETER: "eval_loss", "learning_rate": "0.1"}
    assert tracking._is_trial({"SM_HPS": json.dumps(hps)})
    assert not tracking._is_trial({"SM_HPS": json.dumps({"learning_rate": "0.1"})})
