"""`make demo` prints moto's unsupported-resource notices once, as one summary line."""

from __future__ import annotations

import logging
import threading
import warnings

from sandbox.moto_notices import summary, unsupported_notices


def _moto_like(resource_type: str) -> None:
    warnings.warn(
        f"Tried to parse {resource_type} but it's not supported by moto's CloudFormation "
        "implementation",
        stacklevel=2,
    )


def test_notices_from_any_thread_become_one_summary(recwarn):
    with unsupported_notices() as skipped:
        for kind in ("AWS::CDK::Metadata", "AWS::ApiGatewayV2::Api", "AWS::CDK::Metadata"):
            worker = threading.Thread(target=_moto_like, args=(kind,))
            worker.start()
            worker.join()
    assert skipped == {"AWS::CDK::Metadata", "AWS::ApiGatewayV2::Api"}
    assert summary(skipped) == (
        "the sandbox (moto) does not model 2 resource types, skipped: "
        "AWS::ApiGatewayV2::Api, AWS::CDK::Metadata"
    )


def test_motos_log_lines_join_the_summary(caplog):
    """moto's CloudFormation also logs "No Moto CloudFormation support for <type>"."""
    moto = logging.getLogger("moto")
    with caplog.at_level(logging.WARNING, logger="moto"), unsupported_notices() as skipped:
        moto.warning("No Moto CloudFormation support for %s", "AWS::CloudWatch::Alarm")
        moto.warning("something else moto says")
    assert skipped == {"AWS::CloudWatch::Alarm"}
    assert [r.getMessage() for r in caplog.records] == ["something else moto says"]
    moto.warning("No Moto CloudFormation support for %s", "AWS::SNS::TopicPolicy")
    assert skipped == {"AWS::CloudWatch::Alarm"}  # only inside the block
