"""The job launcher: ledger table, trigger Lambda and the IAM-authorised HTTP API."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from ftl_constructs.botocore_models import declared_operations
from ftl_constructs.bundling import ROOT, TRIGGER_OPERATIONS, source_tarball
from ftl_constructs.job_template import TrainingJobTemplate
from ftl_constructs.nag import acknowledge_resource, checkov_skip
from ftl_constructs.platform_function import PlatformFunction
from ftl_constructs.settings import ApiSettings
from ftl_constructs.training_role import TrainingRole
from jobmodel import dump_catalog

PLATFORM_TAG = "ftl:platform"


class JobLauncher(Construct):
    """Starts training jobs from the catalog, for callers with Invoke or HTTP API rights.

    Attributes:
        table: the job ledger.
        function: the trigger Lambda.
        api: the HTTP API; ``api_url`` its invoke URL.
        source_asset: the training source (``sourcedir.tar.gz``) as an S3 asset.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        platform_name: str,
        templates: Sequence[TrainingJobTemplate],
        training_role: TrainingRole,
        data_bucket: s3.IBucket,
        checkpoint_bucket: s3.IBucket,
        artifact_bucket: s3.IBucket,
        encryption_key: kms.IKey,
        subnets: Sequence[ec2.ISubnet] = (),
        security_group: ec2.ISecurityGroup | None = None,
        extra_input_buckets: Sequence[str] = (),
        platform_tags: Mapping[str, str] | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
        api_settings: ApiSettings = ApiSettings(),
    ) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        specs = [t.spec for t in templates]

        source = source_tarball(ROOT / "training", ROOT / "cdk.out" / ".ftl-source")
        self.source_asset = s3_assets.Asset(self, "TrainingSource", path=str(source))
        training_role.allow_source_read(
            self.source_asset.bucket.arn_for_objects(self.source_asset.s3_object_key)
        )
        for spec in specs:
            training_role.allow_image_pull(spec.image_uri)

        self.table = dynamodb.Table(
            self,
            "JobLedger",
            partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED,
            encryption_key=encryption_key,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.table.add_global_secondary_index(
            index_name="by-created",
            partition_key=dynamodb.Attribute(name="gsi_pk", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="gsi_sk", type=dynamodb.AttributeType.STRING),
        )

        environment = {
            "FTL_PLATFORM_NAME": platform_name,
            "FTL_REGION": stack.region,
            "FTL_ROLE_ARN": training_role.role.role_arn,
            "FTL_DATA_BUCKET": data_bucket.bucket_name,
            "FTL_CHECKPOINT_BUCKET": checkpoint_bucket.bucket_name,
            "FTL_ARTIFACT_BUCKET": artifact_bucket.bucket_name,
            "FTL_KMS_KEY_ARN": encryption_key.key_arn,
            "FTL_SOURCE_S3_URI": self.source_asset.s3_object_url,
            "FTL_JOB_TABLE": self.table.table_name,
            "FTL_PLATFORM_TAGS": json.dumps(dict(platform_tags or {}), sort_keys=True),
            "FTL_ALLOWED_INPUT_BUCKETS": ",".join(extra_input_buckets),
        }
        if subnets and security_group is not None:
            environment["FTL_SUBNETS"] = ",".join(s.subnet_id for s in subnets)
            environment["FTL_SECURITY_GROUPS"] = security_group.security_group_id
        self.trigger = PlatformFunction(
            self,
            "Trigger",
            description="Fine-tuning launcher: validate, record and start training jobs",
            code_dir=ROOT / "lambda" / "trigger",
            packages=[ROOT / "jobmodel"],
            files={"catalog.json": dump_catalog(specs)},
            aws_operations=declared_operations(TRIGGER_OPERATIONS),
            encryption_key=encryption_key,
            log_retention=log_retention,
            environment=environment,
            memory_size=512,
        )
        self.function = self.trigger.function
        policy = self.trigger.policy
        self._grant_sagemaker(
            policy,
            stack,
            platform_name,
            specs,
            training_role.role,
            encryption_key,
            subnets,
            security_group,
        )
        policy.add_statements(
            iam.PolicyStatement(
                sid="JobLedger",
                actions=[
                    "dynamodb:GetItem",
                    "dynamodb:PutItem",
                    "dynamodb:UpdateItem",
                    "dynamodb:DeleteItem",
                    "dynamodb:ConditionCheckItem",
                    "dynamodb:Query",
                ],
                resources=[self.table.table_arn, f"{self.table.table_arn}/index/by-created"],
            ),
        )

        checkov_skip(
            self.function,
            "CKV_AWS_116",
            "Invoked synchronously only (Lambda Invoke and the HTTP API); a dead-letter "
            "queue applies to asynchronous invocations.",
        )

        self._http_api(stack, log_retention, encryption_key, api_settings)

    def _grant_sagemaker(
        self,
        policy: iam.Policy,
        stack: Stack,
        platform_name: str,
        specs: Sequence,
        training_role: iam.IRole,
        key: kms.IKey,
        subnets: Sequence[ec2.ISubnet],
        security_group: ec2.ISecurityGroup | None,
    ) -> None:
        jobs = stack.format_arn(service="sagemaker", resource="training-job", resource_name="*")
        instance_types = sorted({t for s in specs for t in s.instance_types})
        conditions: dict[str, dict[str, object]] = {
            "ForAllValues:StringEquals": {"sagemaker:InstanceTypes": instance_types},
            "NumericLessThanEquals": {
                "sagemaker:MaxRuntimeInSeconds": str(max(s.max_runtime_seconds for s in specs))
            },
            "ArnEquals": {"sagemaker:OutputKmsKey": key.key_arn},
            "ArnEqualsIfExists": {"sagemaker:VolumeKmsKey": key.key_arn},
            "StringEquals": {f"aws:RequestTag/{PLATFORM_TAG}": platform_name},
        }
        for flag, attr in (
            ("sagemaker:NetworkIsolation", "network_isolation"),
            ("sagemaker:InterContainerTrafficEncryption", "inter_container_encryption"),
        ):
            allowed = {bool(getattr(s, attr)) for s in specs}
            if len(allowed) == 1:
                conditions.setdefault("Bool", {})[flag] = str(allowed.pop()).lower()
        if subnets and security_group is not None:
            conditions["ForAllValues:StringEquals"]["sagemaker:VpcSubnets"] = [
                s.subnet_id for s in subnets
            ]
            conditions["ForAllValues:StringEquals"]["sagemaker:VpcSecurityGroupIds"] = [
                security_group.security_group_id
            ]
            conditions["Null"] = {
                "sagemaker:VpcSubnets": "false",
                "sagemaker:VpcSecurityGroupIds": "false",
            }
        policy.add_statements(
            iam.PolicyStatement(
                sid="CreateCatalogJobsOnly",
                actions=["sagemaker:CreateTrainingJob"],
                resources=[jobs],
                conditions=conditions,
            ),
            iam.PolicyStatement(
                sid="TagJobsAtCreation", actions=["sagemaker:AddTags"], resources=[jobs]
            ),
            iam.PolicyStatement(
                sid="ReadJobs", actions=["sagemaker:DescribeTrainingJob"], resources=[jobs]
            ),
            iam.PolicyStatement(
                sid="StopPlatformJobs",
                actions=["sagemaker:StopTrainingJob"],
                resources=[jobs],
                conditions={"StringEquals": {f"aws:ResourceTag/{PLATFORM_TAG}": platform_name}},
            ),
            iam.PolicyStatement(
                sid="PassTrainingRoleToSageMaker",
                actions=["iam:PassRole"],
                resources=[training_role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
            ),
        )
        acknowledge_resource(
            policy,
            jobs,
            "Job names are generated per request at run time; "
            "creation is pinned by condition keys to the catalog's instance "
            "types, runtime, KMS key, network settings and the platform tag, "
            "and stopping to jobs tagged by this platform.",
        )

    def _http_api(
        self, stack: Stack, retention: logs.RetentionDays, key: kms.IKey, settings: ApiSettings
    ) -> None:
        self.api = apigw.HttpApi(
            self,
            "JobApi",
            description="Fine-tuning launcher (IAM-authorised)",
            create_default_stage=False,
            default_authorizer=authorizers.HttpIamAuthorizer(),
        )
        integration = integrations.HttpLambdaIntegration(
            "TriggerIntegration",
            self.function,
            payload_format_version=apigw.PayloadFormatVersion.VERSION_2_0,
        )
        routes = (
            ("/jobs", apigw.HttpMethod.POST),
            ("/jobs", apigw.HttpMethod.GET),
            ("/jobs/{job_name}", apigw.HttpMethod.GET),
            ("/jobs/{job_name}/stop", apigw.HttpMethod.POST),
            ("/templates", apigw.HttpMethod.GET),
        )
        for path, method in routes:
            self.api.add_routes(path=path, methods=[method], integration=integration)
        access_logs = logs.LogGroup(
            self,
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
        self.stage = apigw.CfnStage(
            self,
            "DefaultStage",
            api_id=self.api.api_id,
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
        self.api_url = f"https://{self.api.api_id}.execute-api.{stack.region}.{stack.url_suffix}/"
