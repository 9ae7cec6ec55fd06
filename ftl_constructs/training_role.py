"""The SageMaker training execution role, scoped to the platform's buckets and key."""

from __future__ import annotations

from collections.abc import Iterable

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from ftl_constructs.nag import acknowledge, acknowledge_resource
from jobmodel.contract.names import BATCH_TRAINING_JOB_PREFIX, TRAINING_LOG_GROUP

SAGEMAKER_SERVICE = "sagemaker.amazonaws.com"


def role_arn_parameter(platform_name: str, team: str | None = None) -> str:
    """The SSM parameter that holds a training role's ARN for the other stacks: the platform's
    one role, or a team's (separate paths, so a single-team role and a team role never share a
    name while an upgrade creates one and deletes the other)."""
    if team is None:
        return f"/fine-tuning/{platform_name}/training-role-arn"
    return f"/fine-tuning/{platform_name}/teams/{team}/training-role-arn"


def _sagemaker_jobs(stack: Stack) -> iam.ServicePrincipal:
    """SageMaker, for this account's training jobs, or (issue 37) its tuning jobs' trials: AWS
    does not say which of the two SageMaker names when it starts a trial."""
    return iam.ServicePrincipal(
        SAGEMAKER_SERVICE,
        conditions={
            "StringEquals": {"aws:SourceAccount": stack.account},
            "ArnLike": {
                "aws:SourceArn": [
                    stack.format_arn(service="sagemaker", resource=kind, resource_name="*")
                    for kind in ("training-job", "hyper-parameter-tuning-job")
                ]
            },
        },
    )


class TrainingRole(Construct):
    """The role training jobs run as.

    It reads the data bucket, reads and writes checkpoints and artifacts, uses the platform key,
    writes its own logs and metrics and, in VPC mode, manages its network interfaces. Image pull
    rights are added per template with :meth:`allow_image_pull`, so the role can pull only the
    repositories the shipped templates use.

    With ``arn_parameter`` the role's ARN is also written to that SSM parameter, and another
    stack reads it from there (:meth:`arn_for`) instead of importing a CloudFormation export:
    an export cannot be removed while a stack imports it, so an upgrade that removes this role
    (single team to teams, a team removed) could not deploy in one ``cdk deploy --all``.

    Attributes:
        role: the IAM role.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        data_bucket: s3.IBucket,
        checkpoint_bucket: s3.IBucket,
        artifact_bucket: s3.IBucket,
        encryption_key: kms.IKey,
        vpc: ec2.IVpc | None = None,
        subnets: Iterable[ec2.ISubnet] = (),
        security_group: ec2.ISecurityGroup | None = None,
        extra_input_buckets: Iterable[str] = (),
        team: str | None = None,
        team_buckets: Iterable[str] = (),
        arn_parameter: str | None = None,
    ) -> None:
        super().__init__(scope, id)
        stack = Stack.of(self)
        self._pulls: set[str] = set()
        self.arn_parameter = arn_parameter
        self.role = iam.Role(
            self,
            "Role",
            description="SageMaker training jobs started by the fine-tuning platform",
            assumed_by=_sagemaker_jobs(stack),
        )
        self.policy = iam.Policy(self, "Policy", roles=[self.role])
        if arn_parameter is not None:
            ssm.StringParameter(
                self,
                "ArnParameter",
                parameter_name=arn_parameter,
                string_value=self.role.role_arn,
                description="The training role's ARN, read by the launcher stack at deploy",
            )
        log_group_arn = stack.format_arn(
            service="logs",
            resource="log-group",
            resource_name=f"{TRAINING_LOG_GROUP}:*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        # A team role (teams mode) sees only the team's prefix of each platform bucket, plus the
        # team's own input buckets; the platform-wide role sees the whole buckets.
        objects = f"{team}/*" if team else "*"
        whole = [
            f"arn:{stack.partition}:s3:::{name}" for name in (*extra_input_buckets, *team_buckets)
        ]
        self._allow_inputs(data_bucket, checkpoint_bucket, artifact_bucket, objects, team, whole)
        self._allow_outputs(checkpoint_bucket, artifact_bucket, objects, team)
        # SageMaker names each stream ``<job name>/algo-<n>-<epoch>``; a team's jobs are
        # ``<team>-*`` (direct) or ``AWSBatch<team>-*`` (queued), so a team role writes only
        # its own jobs' streams (the platform-wide role: every stream of the group).
        streams = [f"{team}-*", f"{BATCH_TRAINING_JOB_PREFIX}{team}-*"] if team else ["*"]
        self.log_stream_arns = [
            stack.format_arn(
                service="logs",
                resource="log-group",
                resource_name=f"{TRAINING_LOG_GROUP}:log-stream:{name}",
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            )
            for name in streams
        ]
        self._allow_key_logs_and_images(encryption_key, log_group_arn)
        if vpc is not None and security_group is not None:
            self._allow_vpc(stack, vpc, list(subnets), security_group)
        self._acknowledge(
            data_bucket, checkpoint_bucket, artifact_bucket, log_group_arn, objects, team, whole
        )

    def _allow_inputs(
        self,
        data: s3.IBucket,
        ckpt: s3.IBucket,
        art: s3.IBucket,
        objects: str,
        team: str | None,
        whole: list[str],
    ) -> None:
        """Read the training data (a team: its prefix only) and the extra input buckets."""
        if team:
            self.policy.add_statements(
                iam.PolicyStatement(
                    sid="ReadTrainingData",
                    actions=["s3:GetObject"],
                    resources=[data.arn_for_objects(objects)],
                ),
                iam.PolicyStatement(
                    sid="ListTeamPrefixes",
                    actions=["s3:ListBucket"],
                    resources=[b.bucket_arn for b in (data, ckpt, art)],
                    conditions={"StringLike": {"s3:prefix": [objects]}},
                ),
                iam.PolicyStatement(
                    sid="LocateTeamData",
                    actions=["s3:GetBucketLocation"],
                    resources=[data.bucket_arn],
                ),
            )
        input_buckets = whole if team else [data.bucket_arn, *whole]
        if input_buckets:
            self.policy.add_statements(
                iam.PolicyStatement(
                    sid="ReadTeamBuckets" if team else "ReadTrainingData",
                    actions=["s3:GetObject", "s3:ListBucket", "s3:GetBucketLocation"],
                    resources=input_buckets + [f"{arn}/*" for arn in input_buckets],
                )
            )

    def _allow_outputs(
        self, ckpt: s3.IBucket, art: s3.IBucket, objects: str, team: str | None
    ) -> None:
        """Read and write checkpoints, write model artifacts (a team: under its prefix)."""
        listing = [] if team else ["s3:ListBucket"]
        self.policy.add_statements(
            # SageMaker syncs /opt/ml/checkpoints both ways; deleting a local file deletes it in S3.
            iam.PolicyStatement(
                sid="ReadWriteCheckpoints",
                actions=[
                    "s3:GetObject",
                    "s3:PutObject",
                    "s3:DeleteObject",
                    *listing,
                    "s3:GetBucketLocation",
                    "s3:AbortMultipartUpload",
                    "s3:ListMultipartUploadParts",
                ],
                resources=[ckpt.bucket_arn, ckpt.arn_for_objects(objects)],
            ),
            iam.PolicyStatement(
                sid="WriteModelArtifacts",
                actions=[
                    "s3:GetObject",
                    "s3:PutObject",
                    *listing,
                    "s3:GetBucketLocation",
                    "s3:AbortMultipartUpload",
                    "s3:ListMultipartUploadParts",
                ],
                resources=[art.bucket_arn, art.arn_for_objects(objects)],
            ),
        )

    def _allow_key_logs_and_images(self, key: kms.IKey, log_group_arn: str) -> None:
        """Use the platform key, write the jobs' logs and metrics, authenticate to ECR."""
        self.policy.add_statements(
            iam.PolicyStatement(
                sid="UsePlatformKey",
                actions=[
                    "kms:Decrypt",
                    "kms:Encrypt",
                    "kms:GenerateDataKey",
                    "kms:GenerateDataKeyWithoutPlaintext",
                    "kms:ReEncryptFrom",
                    "kms:ReEncryptTo",
                    "kms:DescribeKey",
                ],
                resources=[key.key_arn],
            ),
            # Encrypted training volumes need a grant that SageMaker creates on the job's behalf.
            iam.PolicyStatement(
                sid="GrantPlatformKeyToVolumes",
                actions=["kms:CreateGrant"],
                resources=[key.key_arn],
                conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}},
            ),
            iam.PolicyStatement(
                sid="UseTrainingLogGroup",
                actions=["logs:CreateLogGroup", "logs:DescribeLogStreams"],
                resources=[log_group_arn],
            ),
            iam.PolicyStatement(
                sid="WriteOwnJobsLogStreams",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=self.log_stream_arns,
            ),
            iam.PolicyStatement(
                sid="PutTrainingMetrics",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringLike": {"cloudwatch:namespace": "/aws/sagemaker/*"}},
            ),
            iam.PolicyStatement(
                sid="EcrAuthToken",
                actions=["ecr:GetAuthorizationToken"],
                resources=["*"],
            ),
        )

    def arn_for(self, scope: Construct) -> str:
        """The role's ARN as ``scope``'s stack should refer to it: a reference in this role's
        own stack (or with no ``arn_parameter``); from another stack, the SSM parameter's
        value, which CloudFormation resolves at each deploy of that stack (no export)."""
        if self.arn_parameter is None or Stack.of(scope) is Stack.of(self):
            return self.role.role_arn
        return ssm.StringParameter.value_for_string_parameter(scope, self.arn_parameter)

    def allow_image_pull(self, image_uri: str) -> None:
        """Let jobs pull one ECR image, given as its full URI."""
        registry, _, rest = image_uri.partition("/")
        account, _, tail = registry.partition(".dkr.ecr.")
        region = tail.split(".amazonaws.com")[0]
        repository = rest.split(":")[0].split("@")[0]
        arn = f"arn:{Stack.of(self).partition}:ecr:{region}:{account}:repository/{repository}"
        if arn in self._pulls:
            return
        self._pulls.add(arn)
        self.policy.add_statements(
            iam.PolicyStatement(
                actions=[
                    "ecr:BatchGetImage",
                    "ecr:GetDownloadUrlForLayer",
                    "ecr:BatchCheckLayerAvailability",
                ],
                resources=[arn],
            )
        )

    def allow_source_read(self, object_arn: str) -> None:
        """Let jobs download one training source archive (``sourcedir.tar.gz``)."""
        self.policy.add_statements(
            iam.PolicyStatement(actions=["s3:GetObject"], resources=[object_arn])
        )

    def _allow_vpc(
        self,
        stack: Stack,
        vpc: ec2.IVpc,
        subnets: list[ec2.ISubnet],
        security_group: ec2.ISecurityGroup,
    ) -> None:
        eni_arn = stack.format_arn(service="ec2", resource="network-interface", resource_name="*")
        vpc_arn = stack.format_arn(service="ec2", resource="vpc", resource_name=vpc.vpc_id)
        self.policy.add_statements(
            iam.PolicyStatement(
                sid="CreateTrainingEnis",
                actions=["ec2:CreateNetworkInterface"],
                resources=[
                    eni_arn,
                    stack.format_arn(
                        service="ec2",
                        resource="security-group",
                        resource_name=security_group.security_group_id,
                    ),
                ]
                + [
                    stack.format_arn(service="ec2", resource="subnet", resource_name=s.subnet_id)
                    for s in subnets
                ],
            ),
            iam.PolicyStatement(
                sid="ManageTrainingEnis",
                actions=[
                    "ec2:CreateNetworkInterfacePermission",
                    "ec2:DeleteNetworkInterface",
                    "ec2:DeleteNetworkInterfacePermission",
                ],
                resources=[eni_arn],
                conditions={"ArnEquals": {"ec2:Vpc": vpc_arn}},
            ),
            iam.PolicyStatement(
                sid="DescribeNetwork",
                actions=[
                    "ec2:DescribeNetworkInterfaces",
                    "ec2:DescribeVpcs",
                    "ec2:DescribeDhcpOptions",
                    "ec2:DescribeSubnets",
                    "ec2:DescribeSecurityGroups",
                ],
                resources=["*"],
            ),
        )
        acknowledge_resource(
            self.policy,
            eni_arn,
            "SageMaker creates the training ENIs, so their ids are unknown in advance; "
            "creation is limited to the platform subnets and security group and changes "
            "to ENIs in the platform VPC.",
        )

    def _acknowledge(
        self,
        data: s3.IBucket,
        ckpt: s3.IBucket,
        art: s3.IBucket,
        log_group_arn: str,
        objects: str,
        team: str | None,
        whole: list[str],
    ) -> None:
        where = f" (only under the team's prefix {team}/)" if team else ""
        for bucket, why in (
            (data, "Jobs read any object of the training-data bucket, which holds nothing else."),
            (ckpt, "Each job writes under its own prefix, named per job at run time."),
            (art, "Each job writes its model under its own prefix, named per job at run time."),
        ):
            why = why[:-1] + where + "."
            acknowledge_resource(self.policy, bucket.arn_for_objects(objects), why)
        for arn in whole:
            acknowledge_resource(
                self.policy,
                f"{arn}/*",
                "An input bucket named in context (ftl:extraInputBuckets or the team's buckets) "
                "is read whole: the platform team shares it with these jobs.",
            )
        acknowledge(
            self.policy,
            "AwsSolutions-IAM5[Resource::*]",
            "ecr:GetAuthorizationToken, cloudwatch:PutMetricData and EC2 Describe* do not "
            "support resource-level permissions; PutMetricData is limited to the "
            "/aws/sagemaker/* namespaces by condition.",
        )
        acknowledge_resource(
            self.policy,
            log_group_arn,
            "The one training log group (SageMaker's fixed name); group-level actions only.",
        )
        for arn in self.log_stream_arns:
            acknowledge_resource(
                self.policy,
                arn,
                "SageMaker names one log stream per job and host (<job>/algo-<n>-...); a team "
                "role writes only the streams of its team's job names.",
            )
