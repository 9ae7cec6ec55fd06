"""The trigger's botocore session: clients from the asset's trimmed service models.

The asset carries ``botocore_data/`` (see ``aws_operations.py``): service models cut to the
operations the trigger calls, their endpoint rule sets, and the few top-level files botocore
reads while building a client. The session's loader reads only that folder, so creating a
client decodes a few KiB of JSON instead of the full SageMaker model and never lists the
hundreds of service folders botocore ships. Without the folder (tests running from the source
tree) the session is botocore's default. botocore directly rather than boto3: ``import boto3``
also imports s3transfer, which the trigger never uses.
"""

from __future__ import annotations

import os
from pathlib import Path

import botocore.session
from botocore.loaders import Loader

DATA_DIR = Path(__file__).resolve().parent.parent / "botocore_data"


class AssetLoader(Loader):
    """botocore's loader over the asset's trimmed copy of botocore's own data.

    The copy is generated from botocore's bundled data, so it counts as built-in: botocore then
    resolves endpoints with its rule sets alone, as it does for its bundled ``endpoints.json``.
    """

    def __init__(self, data_dir: Path) -> None:
        super().__init__(extra_search_paths=[str(data_dir)], include_default_search_paths=False)
        self._data_dir = str(data_dir)

    def is_builtin_path(self, path: str | None) -> bool:
        return path is not None and (
            os.path.commonpath([self._data_dir, path]) == self._data_dir
            or super().is_builtin_path(path)
        )


def session(data_dir: Path | None = DATA_DIR) -> botocore.session.Session:
    """A botocore session whose clients load the trimmed models when ``data_dir`` exists."""
    sess = botocore.session.Session()
    if data_dir is not None and data_dir.is_dir():
        sess.register_component("data_loader", AssetLoader(data_dir))
    return sess
