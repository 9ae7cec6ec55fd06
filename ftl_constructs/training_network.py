"""The network training jobs run in: no VPC, a new VPC, or an existing one."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import DefaultStackSynthesizer, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from ftl_constructs.nag import acknowledge
from ftl_constructs.settings import NetworkSettings

# What jobs do with the platform's buckets (inputs, checkpoints both ways, model uploads).
S3_JOB_ACTIONS = (
    "s3:GetObject",
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:ListBucket",
    "s3:GetBucketLocation",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
    "s3:ListBucketMultipartUploads",
)


def image_and_source_objects(stack: Stack) -> list[str]:
    """Objects a job reads from buckets the platform does not own, in the stack's region.

    * ``prod-<region>-starport-layer-bucket``: where ECR serves image layers from (ECR's
      documented minimum S3 permission for pulls through a VPC endpoint).
    * the CDK bootstrap asset bucket: it holds ``sourcedir.tar.gz`` (the training source).
    """
    qualifier = (
        stack.node.try_get_context("@aws-cdk/core:bootstrapQualifier")
        or DefaultStackSynthesizer.DEFAULT_QUALIFIER
    )
    return [
        f"arn:{stack.partition}:s3:::prod-{stack.region}-starport-layer-bucket/*",
        f"arn:{stack.partition}:s3:::cdk-{qualifier}-assets-{stack.account}-{stack.region}/*",
    ]


# Interface endpoints a training job in a VPC without internet access needs.
INTERFACE_ENDPOINTS = {
    "SageMakerApi": ec2.InterfaceVpcEndpointAwsService.SAGEMAKER_API,
    "EcrApi": ec2.InterfaceVpcEndpointAwsService.ECR,
    "EcrDocker": ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER,
    "CloudWatchLogs": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
    "CloudWatchMetrics": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_MONITORING,
    "Sts": ec2.InterfaceVpcEndpointAwsService.STS,
}


class TrainingNetwork(Construct):
    """Private subnets, endpoints and the EFA-ready training security group.

    The training security group allows all traffic from and to itself (NCCL over EFA opens
    arbitrary ports between every pair of hosts) and nothing else inbound. Outbound it also
    allows HTTPS, which in isolated subnets reaches only the VPC endpoints and S3, and with
    ``egress='nat'`` also model hubs on the internet.

    The S3 gateway endpoint's policy allows only the platform's buckets (``job_bucket_arns``)
    and the objects of :func:`image_and_source_objects`, so a job in the VPC cannot reach any
    other bucket through it.

    Attributes:
        vpc: the VPC.
        subnets: the private subnets jobs are placed in.
        security_group: the training security group.
        s3_endpoint: the S3 gateway endpoint (None without endpoints).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        settings: NetworkSettings,
        encryption_key: kms.IKey,
        log_retention: logs.RetentionDays,
        job_bucket_arns: Sequence[str] = (),
    ) -> None:
        super().__init__(scope, id)
        if not settings.enabled:
            raise ValueError("TrainingNetwork needs network mode 'new' or 'existing'")
        if settings.mode == "new":
            self.vpc, self.subnets = self._new_vpc(settings, encryption_key, log_retention)
        else:
            self.vpc, self.subnets = self._existing_vpc(settings)
        self.security_group = self._training_security_group()
        self.endpoint_security_group = None
        self.s3_endpoint: ec2.GatewayVpcEndpoint | None = None
        if settings.create_endpoints:
            self._add_endpoints(list(job_bucket_arns))
        acknowledge(
            self.security_group,
            "AwsSolutions-EC23",
            "Inbound traffic is allowed only from this security group itself.",
        )

    def _new_vpc(
        self,
        settings: NetworkSettings,
        encryption_key: kms.IKey,
        log_retention: logs.RetentionDays,
    ) -> tuple[ec2.IVpc, list[ec2.ISubnet]]:
        """Private subnets (isolated, or with a NAT gateway for ``egress='nat'``), flow logs."""
        nat = settings.egress == "nat"
        private_type = (
            ec2.SubnetType.PRIVATE_WITH_EGRESS if nat else ec2.SubnetType.PRIVATE_ISOLATED
        )
        subnet_config = [
            ec2.SubnetConfiguration(name="training", subnet_type=private_type, cidr_mask=20)
        ]
        if nat:
            subnet_config.append(
                ec2.SubnetConfiguration(
                    name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24
                )
            )
        vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(settings.vpc_cidr),
            max_azs=settings.max_azs,
            nat_gateways=1 if nat else 0,
            subnet_configuration=subnet_config,
            restrict_default_security_group=False,
        )
        flow_logs = logs.LogGroup(
            self,
            "FlowLogs",
            encryption_key=encryption_key,
            retention=log_retention,
            removal_policy=RemovalPolicy.RETAIN,
        )
        vpc.add_flow_log(
            "FlowLog", destination=ec2.FlowLogDestination.to_cloud_watch_logs(flow_logs)
        )
        return vpc, vpc.select_subnets(subnet_type=private_type).subnets

    def _existing_vpc(self, settings: NetworkSettings) -> tuple[ec2.IVpc, list[ec2.ISubnet]]:
        existing = settings.existing
        assert existing is not None
        vpc = ec2.Vpc.from_vpc_attributes(
            self,
            "Vpc",
            vpc_id=existing.vpc_id,
            availability_zones=list(existing.availability_zones),
            private_subnet_ids=list(existing.private_subnet_ids),
            private_subnet_route_table_ids=list(existing.route_table_ids) or None,
        )
        return vpc, vpc.private_subnets

    def _training_security_group(self) -> ec2.SecurityGroup:
        sg = ec2.SecurityGroup(
            self,
            "TrainingSecurityGroup",
            vpc=self.vpc,
            description="Fine-tuning jobs: all traffic between job hosts (NCCL/EFA), HTTPS out",
            allow_all_outbound=False,
        )
        sg.add_ingress_rule(sg, ec2.Port.all_traffic(), "All traffic between training hosts")
        sg.add_egress_rule(sg, ec2.Port.all_traffic(), "All traffic between training hosts")
        # HTTPS out: to the interface endpoints and S3 (gateway endpoint routes carry no fixed
        # CIDR, and its prefix-list id would need an account lookup at synth). In isolated
        # subnets nothing else is routable; with a NAT gateway this also reaches model hubs.
        sg.add_egress_rule(
            ec2.Peer.any_ipv4(),
            ec2.Port.tcp(443),
            "HTTPS to VPC endpoints, S3 and (with NAT) model hubs",
        )
        return sg

    def _add_endpoints(self, job_bucket_arns: list[str]) -> None:
        """The S3 gateway endpoint (limited to the platform's buckets) and the interface
        endpoints, reachable over HTTPS from training jobs only."""
        self.s3_endpoint = self.vpc.add_gateway_endpoint(
            "S3Endpoint",
            service=ec2.GatewayVpcEndpointAwsService.S3,
            subnets=[ec2.SubnetSelection(subnets=self.subnets)],
        )
        self._limit_s3_endpoint(self.s3_endpoint, job_bucket_arns)
        self.endpoint_security_group = ec2.SecurityGroup(
            self,
            "EndpointSecurityGroup",
            vpc=self.vpc,
            description="Interface endpoints: HTTPS from training jobs only",
            allow_all_outbound=False,
        )
        self.endpoint_security_group.add_ingress_rule(
            self.security_group, ec2.Port.tcp(443), "HTTPS from training jobs"
        )
        for name, service in INTERFACE_ENDPOINTS.items():
            self.vpc.add_interface_endpoint(
                name,
                service=service,
                subnets=ec2.SubnetSelection(subnets=self.subnets),
                security_groups=[self.endpoint_security_group],
                private_dns_enabled=True,
                open=False,
            )

    def _limit_s3_endpoint(self, endpoint: ec2.GatewayVpcEndpoint, buckets: list[str]) -> None:
        if buckets:
            endpoint.add_to_policy(
                iam.PolicyStatement(
                    sid="PlatformBuckets",
                    principals=[iam.AnyPrincipal()],
                    actions=list(S3_JOB_ACTIONS),
                    resources=buckets + [f"{arn}/*" for arn in buckets],
                )
            )
        endpoint.add_to_policy(
            iam.PolicyStatement(
                sid="ImageLayersAndTrainingSource",
                principals=[iam.AnyPrincipal()],
                actions=["s3:GetObject"],
                resources=image_and_source_objects(Stack.of(self)),
            )
        )
