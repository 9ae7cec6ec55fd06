"""Builds every stack of the platform into an app (used by app.py and the tests)."""

from __future__ import annotations

import aws_cdk as cdk

from ftl_constructs.settings import PlatformSettings
from jobmodel.contract.names import PLATFORM_TAG_KEY
from stacks.foundation_stack import FoundationStack
from stacks.launcher_stack import LauncherStack


def build_platform(
    app: cdk.App, *, default_account: str | None = None, default_region: str | None = None
) -> dict[str, cdk.Stack]:
    settings = PlatformSettings.from_context(
        app.node.try_get_context, default_region=default_region, default_account=default_account
    )
    env = cdk.Environment(account=settings.account, region=settings.region)
    foundation = FoundationStack(
        app,
        "Foundation",
        settings=settings,
        env=env,
        stack_name=settings.foundation_stack_name,
        description="Fine-tuning platform: key, buckets, training role, network",
    )
    for key, value in {**settings.tags, PLATFORM_TAG_KEY: settings.name}.items():
        cdk.Tags.of(app).add(key, value)
    launcher = LauncherStack(
        app,
        "Launcher",
        settings=settings,
        foundation=foundation,
        env=env,
        stack_name=settings.launcher_stack_name,
        description="Fine-tuning platform: templates, job launcher, HTTP API, job events",
    )
    return {"foundation": foundation, "launcher": launcher}
