"""`make demo`: deploy the platform into a local moto sandbox and print what it created."""

from __future__ import annotations

import json
import sys

from sandbox.deploy import deploy
from sandbox.server import Sandbox


def main() -> int:
    with Sandbox() as sandbox:
        print(f"moto sandbox on {sandbox.endpoint}; deploying every stack with the pinned CDK CLI")
        outputs = deploy(sandbox.endpoint)
        timings = deploy.timings  # type: ignore[attr-defined]
        print(f"bootstrap {timings['bootstrap_s']:.1f}s, deploy {timings['deploy_s']:.1f}s")
        print(json.dumps(outputs, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
