"""What SageMaker leaves of an evaluation job in the sandbox: its output data archive.

The sandbox runs no training container, so nothing writes the evaluation entrypoint's report.
The sweep demo, and the tests that play an evaluation job's end, put it where SageMaker would:
``evaluation.json`` in a gzipped tar at ``<S3OutputPath>/<training job>/output/output.tar.gz``,
where the evaluation's results effect reads it (``jobmodel.evaluation.results``).
"""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Mapping
from typing import Any

from jobmodel.evaluation.results import OUTPUT_ARCHIVE, RESULT_FILE

__all__ = ["archive", "output_location"]


def archive(report: Mapping[str, Any]) -> bytes:
    """An ``output.tar.gz`` holding ``report`` as ``evaluation.json``."""
    raw = json.dumps(report).encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        info = tarfile.TarInfo(RESULT_FILE)
        info.size = len(raw)
        tar.addfile(info, io.BytesIO(raw))
    return out.getvalue()


def output_location(output_path: str, training_job: str) -> tuple[str, str]:
    """The bucket and key of a training job's output archive, from its request's
    ``OutputDataConfig.S3OutputPath`` (``s3://bucket[/prefix]``)."""
    bucket, _, prefix = output_path.removeprefix("s3://").partition("/")
    key = "/".join(p for p in (prefix.strip("/"), training_job, "output", OUTPUT_ARCHIVE) if p)
    return bucket, key
