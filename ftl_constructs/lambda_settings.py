"""How the platform's Lambda functions run: runtime version and SnapStart (pure Python).

The runtime defaults to the Python the tests and benchmarks run on, so what is tested is what
is deployed; ``tests/infra/test_platform_function.py`` compares the two. SnapStart restores
the trigger from a snapshot taken after its module-level set-up, on published versions only,
and Lambda offers it for Python 3.12 and later.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jobmodel.contract.errors import SettingsError

# The minor version tests, benchmarks and the bytecode shipped in the assets are built with.
DEFAULT_LAMBDA_RUNTIME = "python3.11"
LAMBDA_RUNTIMES = ("python3.11", "python3.12", "python3.13", "python3.14")
SNAPSTART_RUNTIMES = ("python3.12", "python3.13", "python3.14")

RUNTIME_KEY = "lambdaRuntime"
SNAPSTART_KEY = "snapStart"
KEYS = (RUNTIME_KEY, SNAPSTART_KEY)


class LambdaSettingsError(SettingsError):
    """A Lambda context value is invalid; ``key`` is the context key without its prefix."""


@dataclass(frozen=True)
class LambdaSettings:
    """``runtime``: the Lambda runtime name; ``snap_start``: SnapStart on published versions."""

    runtime: str = DEFAULT_LAMBDA_RUNTIME
    snap_start: bool = False

    @property
    def python_version(self) -> tuple[int, int]:
        major, minor = self.runtime.removeprefix("python").split(".")
        return int(major), int(minor)

    @classmethod
    def parse(cls, runtime: Any = None, snap_start: Any = None) -> LambdaSettings:
        """Validate the two context values (``None`` means unset)."""
        runtime = DEFAULT_LAMBDA_RUNTIME if runtime is None else runtime
        if runtime not in LAMBDA_RUNTIMES:
            raise LambdaSettingsError(RUNTIME_KEY, f"one of {', '.join(LAMBDA_RUNTIMES)}", runtime)
        if snap_start is None:
            snap_start = False
        if isinstance(snap_start, str) and snap_start.lower() in ("true", "false"):
            snap_start = snap_start.lower() == "true"  # `-c ftl:snapStart=true`
        if not isinstance(snap_start, bool):
            raise LambdaSettingsError(SNAPSTART_KEY, "true or false", snap_start)
        if snap_start and runtime not in SNAPSTART_RUNTIMES:
            raise LambdaSettingsError(
                SNAPSTART_KEY,
                f"Lambda SnapStart needs a Python runtime of 3.12 or later, but the functions "
                f"run {runtime}; set ftl:{RUNTIME_KEY} to one of {', '.join(SNAPSTART_RUNTIMES)}",
                snap_start,
            )
        return cls(runtime=runtime, snap_start=snap_start)

    @classmethod
    def from_context(cls, get: Callable[[str], Any], prefix: str = "ftl:") -> LambdaSettings:
        """From a context getter such as ``node.try_get_context``."""
        return cls.parse(get(prefix + RUNTIME_KEY), get(prefix + SNAPSTART_KEY))
