"""The launcher's IAM-authorised HTTP API: routes to the trigger's ``http`` alias, access
logs, throttling. Built in the launcher's own scope (its construct IDs are the launcher's, as
before this module was split out, so a deployed API is kept on upgrade)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from ftl_constructs.settings import ApiSettings
from jobmodel.contract.routes import ROUTES, Route


@dataclass(frozen=True)
class HttpApiParts:
    api: apigw.HttpApi
    routes: Sequence[Route]
    stage: apigw.CfnStage
    url: str


def http_api(
    scope: Construct,
    *,
    alias: lambda_.IAlias,
    stack: Stack,
    retention: logs.RetentionDays,
    key: kms.IKey,
    settings: ApiSettings,
) -> HttpApiParts:
    api = apigw.HttpApi(
        scope,
        "JobApi",
        description="Fine-tuning launcher (IAM-authorised)",
        create_default_stage=False,
        default_authorizer=authorizers.HttpIamAuthorizer(),
    )
    integration = integrations.HttpLambdaIntegration(
        "TriggerIntegration",
        alias,
        payload_format_version=apigw.PayloadFormatVersion.VERSION_2_0,
    )
    # Every route needs IAM auth and goes to the `http` alias.
    routes = ROUTES
    for route in ROUTES:
        api.add_routes(
            path=route.path, methods=[apigw.HttpMethod(route.method)], integration=integration
        )
    access_logs = logs.LogGroup(
        scope,
        "ApiAccessLogs",
        encryption_key=key,
        retention=retention,
        removal_policy=RemovalPolicy.RETAIN,
    )
    log_format = {
        "requestId": "$context.requestId",
        "time": "$context.requestTime",
        "caller": "$context.identity.userArn",
        "sourceIp": "$context.identity.sourceIp",
        "method": "$context.httpMethod",
        "path": "$context.path",
        "route": "$context.routeKey",
        "status": "$context.status",
        "latencyMs": "$context.responseLatency",
        "integrationError": "$context.integrationErrorMessage",
    }
    stage = apigw.CfnStage(
        scope,
        "DefaultStage",
        api_id=api.api_id,
        stage_name="$default",
        auto_deploy=True,
        access_log_settings=apigw.CfnStage.AccessLogSettingsProperty(
            destination_arn=access_logs.log_group_arn, format=json.dumps(log_format)
        ),
        default_route_settings=apigw.CfnStage.RouteSettingsProperty(
            throttling_rate_limit=settings.throttle_rate,
            throttling_burst_limit=settings.throttle_burst,
            detailed_metrics_enabled=True,
        ),
    )
    url = f"https://{api.api_id}.execute-api.{stack.region}.{stack.url_suffix}/"
    return HttpApiParts(api=api, routes=routes, stage=stage, url=url)
