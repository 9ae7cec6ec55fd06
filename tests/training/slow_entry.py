"""The entrypoint with a pause after every optimizer step, so a test can interrupt it mid-run.

Same code path as training/train.py; the only addition is a callback that sleeps
FTL_TEST_STEP_DELAY seconds at each step end (it does not touch any RNG).
"""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "training"))

from transformers import TrainerCallback  # noqa: E402

from ftl_train.run import main  # noqa: E402


class StepDelay(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        time.sleep(float(os.environ.get("FTL_TEST_STEP_DELAY", "0.25")))


if __name__ == "__main__":
    sys.exit(main(callbacks=[StepDelay()]))
