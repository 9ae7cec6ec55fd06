"""The entrypoint with one rank slowed down where the Trainer looks for a checkpoint folder.

Same code path as training/train.py. ``FTL_TEST_SLOW_EXISTS_RANK`` names the rank (``RANK``)
whose ``os.path.exists`` of a ``checkpoint-<step>`` folder sleeps
``FTL_TEST_SLOW_EXISTS_SECONDS`` first. transformers 5.x decides the best checkpoint with
that call (``Trainer._save_checkpoint``) while the folder is being written by every FSDP rank,
so the delay turns the race the issue-34 deadlock came from into the same outcome every time:
the other rank checks before the folder exists, this one after.
"""

import os
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "training"))

from ftl_train.run import main  # noqa: E402

_CHECKPOINT = re.compile(r"checkpoint-\d+/?$")


def _slow_exists_on(rank: str, seconds: float) -> None:
    if os.environ.get("RANK", "0") != rank:
        return
    real = os.path.exists

    def exists(path) -> bool:  # type: ignore[no-untyped-def]
        if _CHECKPOINT.search(os.fspath(path)):
            time.sleep(seconds)
        return real(path)

    os.path.exists = exists  # type: ignore[assignment]


if __name__ == "__main__":
    if os.environ.get("FTL_TEST_SLOW_EXISTS_RANK"):
        _slow_exists_on(
            os.environ["FTL_TEST_SLOW_EXISTS_RANK"],
            float(os.environ.get("FTL_TEST_SLOW_EXISTS_SECONDS", "2")),
        )
    sys.exit(main())
