"""Bootstrap and deploy the CDK app into a sandbox endpoint with the pinned CLI."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ACCOUNT = "123456789012"
REGION = "us-east-1"


def sandbox_env(endpoint: str) -> dict[str, str]:
    """Environment for AWS clients and the CDK CLI aimed at the sandbox, never at AWS."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION=REGION,
        AWS_REGION=REGION,
        CDK_DEFAULT_ACCOUNT=ACCOUNT,
        CDK_DEFAULT_REGION=REGION,
        JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION="20",
        CDK_DISABLE_VERSION_CHECK="1",
        AWS_EC2_METADATA_DISABLED="true",
    )
    return env


def _cdk(args: list[str], env: dict[str, str]) -> None:
    cmd = ["npx", "--no-install", "cdk", *args, "--no-notices", "--ci"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}")


def deploy(
    endpoint: str,
    *,
    context: dict[str, str] | None = None,
    synthesized: dict[str, dict[str, Any]] | None = None,
) -> dict[str, dict[str, str]]:
    """Bootstrap, deploy every stack with ``--method=direct`` and return the stack outputs.

    ``synthesized``, when given, is filled with each stack's synthesized template by stack
    name (what the sandbox needs of resources moto does not model, such as the Batch queue).
    """
    env = sandbox_env(endpoint)
    ctx: list[str] = []
    for key, value in {"ftl:account": ACCOUNT, "ftl:region": REGION, **(context or {})}.items():
        ctx += ["-c", f"{key}={value}"]
    with tempfile.TemporaryDirectory() as tmp:
        # A private cloud assembly folder, so concurrent synths never share cdk.out.
        ctx += ["--output", str(Path(tmp) / "cdk.out")]
        started = time.perf_counter()
        _cdk(["bootstrap", f"aws://{ACCOUNT}/{REGION}", *ctx], env)
        bootstrapped = time.perf_counter()
        outputs = Path(tmp) / "outputs.json"
        deploy_args = ["deploy", "--all", "--method=direct", "--require-approval", "never"]
        _cdk([*deploy_args, "--outputs-file", str(outputs), *ctx], env)
        result = json.loads(outputs.read_text())
        if synthesized is not None:
            synthesized.update(stack_templates(Path(tmp) / "cdk.out"))
    deploy.timings = {
        "bootstrap_s": bootstrapped - started,  # type: ignore[attr-defined]
        "deploy_s": time.perf_counter() - bootstrapped,
    }
    return result


def stack_templates(assembly: Path) -> dict[str, dict[str, Any]]:
    """Each stack's template in a cloud assembly folder, by stack name."""
    manifest = json.loads((assembly / "manifest.json").read_text())
    return {
        artifact["properties"]["stackName"]: json.loads(
            (assembly / artifact["properties"]["templateFile"]).read_text()
        )
        for artifact in manifest["artifacts"].values()
        if artifact["type"] == "aws:cloudformation:stack"
    }
