"""The platform's Lambda baseline: the tested Python deployed, JSON logs, optional SnapStart."""

from __future__ import annotations

import logging
import sys

import pytest
from aws_cdk.assertions import Match

from ftl_constructs.lambda_settings import DEFAULT_LAMBDA_RUNTIME, LambdaSettings
from ftl_constructs.settings import ContextError, PlatformSettings
from tests.infra.synth import template


def _functions(stack_template) -> dict:
    return stack_template.find_resources("AWS::Lambda::Function")


def test_functions_deploy_the_python_the_tests_run_on():
    assert LambdaSettings().python_version == sys.version_info[:2], (
        f"tests run on {sys.version_info[:2]} but the functions deploy {DEFAULT_LAMBDA_RUNTIME}"
    )
    functions = _functions(template("launcher"))
    assert len(functions) == 3  # the trigger, the job-events handler and the price refresh
    for resource in functions.values():
        assert resource["Properties"]["Runtime"] == DEFAULT_LAMBDA_RUNTIME


def test_functions_log_json_at_the_application_level():
    t = template("launcher")
    t.resource_properties_count_is(
        "AWS::Lambda::Function",
        {
            "LoggingConfig": Match.object_like(
                {"LogFormat": "JSON", "ApplicationLogLevel": "INFO", "SystemLogLevel": "INFO"}
            )
        },
        3,
    )


def test_handlers_loggers_follow_the_application_log_level(monkeypatch):
    # Lambda sets the root logger's level from the function's application log level; the
    # handlers' loggers must not pin a level of their own.
    from tests.lambda_support import ROOT

    for path in (ROOT / "lambda").rglob("*.py"):
        assert ".setLevel(" not in path.read_text(), f"{path} sets a log level"
    root = logging.getLogger()
    monkeypatch.setattr(root, "level", logging.WARNING)
    assert not logging.getLogger("ftl.trigger").isEnabledFor(logging.INFO)
    monkeypatch.setattr(root, "level", logging.DEBUG)
    assert logging.getLogger("ftl.trigger").isEnabledFor(logging.DEBUG)


def test_snapstart_is_off_by_default():
    for resource in _functions(template("launcher")).values():
        assert "SnapStart" not in resource["Properties"]


def test_snapstart_on_a_newer_runtime_applies_to_published_versions():
    t = template("launcher", **{"ftl:snapStart": True, "ftl:lambdaRuntime": "python3.12"})
    t.resource_properties_count_is(
        "AWS::Lambda::Function",
        {"Runtime": "python3.12", "SnapStart": {"ApplyOn": "PublishedVersions"}},
        3,
    )


@pytest.mark.parametrize(
    ("context", "key", "rule"),
    [
        ({"snapStart": True}, "ftl:snapStart", "3.12 or later.*ftl:lambdaRuntime"),
        ({"snapStart": "yes"}, "ftl:snapStart", "true or false"),
        ({"lambdaRuntime": "python3.9"}, "ftl:lambdaRuntime", "one of python3.11"),
        ({"lambdaRuntime": "python3.11", "snapStart": "true"}, "ftl:snapStart", "3.12"),
    ],
)
def test_bad_lambda_settings_name_the_key(context, key, rule):
    with pytest.raises(ContextError, match=rule) as err:
        PlatformSettings.from_mapping(context)
    assert err.value.key == key
    assert key in str(err.value)


def test_lambda_settings_accept_cli_strings():
    settings = PlatformSettings.from_mapping({"snapStart": "true", "lambdaRuntime": "python3.13"})
    assert settings.lambdas == LambdaSettings(runtime="python3.13", snap_start=True)
