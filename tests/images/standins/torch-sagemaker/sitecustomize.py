"""Makes ``import torch.sagemaker`` load the SMP v2 stand-in (test only; see its docstring).

``torch`` is a regular package, so a ``torch/sagemaker`` folder on ``PYTHONPATH`` would never
be found; instead this ``sitecustomize`` (run by ``site`` at start-up when this folder is on
``PYTHONPATH``) puts a meta-path finder first that answers only for ``torch.sagemaker`` and
its submodules, with ``ftl_torch_sagemaker_standin/`` next to this file. Everything else
imports as before. A ``sitecustomize`` that this one shadows (a later entry of ``sys.path``)
is then run too. Not active under ``python -S``/``-I`` (no ``site``/``PYTHONPATH``).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
_PACKAGE_DIR = os.path.join(_HERE, "ftl_torch_sagemaker_standin")
_NAME = "torch.sagemaker"


class TorchSagemakerStandInFinder(importlib.abc.MetaPathFinder):
    """``torch.sagemaker[.x]`` from the stand-in folder; None (not mine) for anything else."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != _NAME and not fullname.startswith(_NAME + "."):
            return None
        rel = fullname[len(_NAME) :].lstrip(".").split(".") if fullname != _NAME else []
        base = os.path.join(_PACKAGE_DIR, *rel)
        if os.path.isdir(base):
            return importlib.util.spec_from_file_location(
                fullname, os.path.join(base, "__init__.py"), submodule_search_locations=[base]
            )
        if os.path.isfile(base + ".py"):
            return importlib.util.spec_from_file_location(fullname, base + ".py")
        return None


def _install() -> None:
    if not any(isinstance(f, TorchSagemakerStandInFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, TorchSagemakerStandInFinder())


def _run_shadowed_sitecustomize() -> None:
    """Run the next ``sitecustomize`` on ``sys.path`` (the one this file hides), if any."""
    for entry in sys.path:
        folder = os.path.abspath(entry or os.getcwd())
        if folder == _HERE:
            continue
        candidate = os.path.join(folder, "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_ftl_shadowed_sitecustomize", candidate)
            if spec and spec.loader:
                module = importlib.util.module_from_spec(spec)
                sys.modules[spec.name] = module
                spec.loader.exec_module(module)
            return


_install()
_run_shadowed_sitecustomize()
