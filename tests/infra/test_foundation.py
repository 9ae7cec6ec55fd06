"""Security properties of the foundation stack, asserted on the synthesized template."""

from __future__ import annotations

import json

import pytest
from aws_cdk.assertions import Match

from ftl_constructs.settings import ContextError, PlatformSettings
from tests.infra.synth import EXISTING_VPC, template


@pytest.fixture(scope="module")
def foundation():
    return template("foundation")


@pytest.fixture(scope="module")
def foundation_vpc():
    return template("foundation", **{"ftl:network": "new", "ftl:egress": "none"})


def _buckets(t):
    return t.find_resources("AWS::S3::Bucket")


def test_key_rotates_and_is_retained(foundation):
    foundation.has_resource(
        "AWS::KMS::Key",
        {
            "Properties": {"EnableKeyRotation": True},
            "DeletionPolicy": "Retain",
        },
    )


def test_four_buckets_all_retained_private_and_logged(foundation):
    buckets = _buckets(foundation)
    assert len(buckets) == 4
    for bucket in buckets.values():
        assert bucket["DeletionPolicy"] == "Retain"
        assert bucket["UpdateReplacePolicy"] == "Retain"
        assert bucket["Properties"]["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        }


def test_data_buckets_use_the_platform_key_and_log_access(foundation):
    kms_buckets = foundation.find_resources(
        "AWS::S3::Bucket",
        {
            "Properties": {
                "BucketEncryption": {
                    "ServerSideEncryptionConfiguration": [
                        {
                            "ServerSideEncryptionByDefault": {
                                "SSEAlgorithm": "aws:kms",
                                "KMSMasterKeyID": {
                                    "Fn::GetAtt": [Match.string_like_regexp("PlatformKey"), "Arn"]
                                },
                            },
                            "BucketKeyEnabled": True,
                        }
                    ]
                },
                "LoggingConfiguration": {"DestinationBucketName": Match.any_value()},
            }
        },
    )
    assert len(kms_buckets) == 3


def test_access_log_bucket_uses_sse_s3_because_log_delivery_needs_it(foundation):
    foundation.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [
                    {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
                ]
            },
            "LifecycleConfiguration": {"Rules": [Match.object_like({"Status": "Enabled"})]},
        },
    )


def test_every_bucket_denies_insecure_transport(foundation):
    policies = foundation.find_resources(
        "AWS::S3::BucketPolicy",
        {
            "Properties": {
                "PolicyDocument": {
                    "Statement": Match.array_with(
                        [
                            Match.object_like(
                                {
                                    "Effect": "Deny",
                                    "Action": "s3:*",
                                    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                                }
                            )
                        ]
                    )
                }
            }
        },
    )
    assert len(policies) == 4


def test_checkpoints_expire_and_abort_incomplete_uploads():
    t = template("foundation", **{"ftl:checkpointExpiryDays": 7})
    t.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "LifecycleConfiguration": {
                "Rules": [
                    {
                        "Id": "expire-checkpoints",
                        "ExpirationInDays": 7,
                        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
                        "Status": "Enabled",
                    }
                ]
            },
            "BucketEncryption": Match.any_value(),
        },
    )


def test_artifacts_and_data_are_versioned_with_old_data_versions_expiring(foundation):
    versioned = foundation.find_resources(
        "AWS::S3::Bucket", {"Properties": {"VersioningConfiguration": {"Status": "Enabled"}}}
    )
    assert len(versioned) == 2
    foundation.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "VersioningConfiguration": {"Status": "Enabled"},
            "LifecycleConfiguration": {
                "Rules": [
                    Match.object_like(
                        {
                            "Id": "expire-noncurrent-versions",
                            "NoncurrentVersionExpiration": {"NoncurrentDays": 30},
                        }
                    )
                ]
            },
        },
    )


def test_training_role_trusts_only_sagemaker_for_this_account(foundation):
    foundation.has_resource_properties(
        "AWS::IAM::Role",
        {
            "AssumeRolePolicyDocument": {
                "Statement": [
                    Match.object_like(
                        {
                            "Principal": {"Service": "sagemaker.amazonaws.com"},
                            "Condition": {
                                "StringEquals": {"aws:SourceAccount": "123456789012"},
                                "ArnLike": Match.any_value(),
                            },
                        }
                    )
                ]
            },
        },
    )


def _role_statements(t):
    (policy,) = t.find_resources(
        "AWS::IAM::Policy",
        {"Properties": {"PolicyName": Match.string_like_regexp("TrainingRolePolicy")}},
    ).values()
    return {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"] if "Sid" in s}


def _as_list(v):
    return v if isinstance(v, list) else [v]


def test_training_role_statements_are_scoped(foundation):
    s = _role_statements(foundation)
    assert set(_as_list(s["ReadTrainingData"]["Action"])) == {
        "s3:GetObject",
        "s3:ListBucket",
        "s3:GetBucketLocation",
    }
    assert "s3:PutObject" not in _as_list(s["ReadTrainingData"]["Action"])
    assert "s3:DeleteObject" in _as_list(s["ReadWriteCheckpoints"]["Action"])
    assert "s3:DeleteObject" not in _as_list(s["WriteModelArtifacts"]["Action"])
    assert s["GrantPlatformKeyToVolumes"]["Condition"] == {
        "Bool": {"kms:GrantIsForAWSResource": "true"}
    }
    # The only "*" resources are actions that have no resource-level permissions.
    star_actions = set()
    for stmt in s.values():
        if "*" in _as_list(stmt["Resource"]):
            star_actions |= set(_as_list(stmt["Action"]))
    assert star_actions == {"cloudwatch:PutMetricData", "ecr:GetAuthorizationToken"}
    assert s["PutTrainingMetrics"]["Condition"] == {
        "StringLike": {"cloudwatch:namespace": "/aws/sagemaker/*"}
    }
    for sid in (
        "ReadTrainingData",
        "ReadWriteCheckpoints",
        "WriteModelArtifacts",
        "UsePlatformKey",
        "UseTrainingLogGroup",
        "WriteOwnJobsLogStreams",
    ):
        assert "*" not in _as_list(s[sid]["Resource"]), sid


def test_no_vpc_by_default(foundation):
    foundation.resource_count_is("AWS::EC2::VPC", 0)
    foundation.resource_count_is("AWS::EC2::SecurityGroup", 0)


def test_training_security_group_trusts_only_itself(foundation_vpc):
    t = foundation_vpc
    groups = t.find_resources(
        "AWS::EC2::SecurityGroup",
        {"Properties": {"GroupDescription": Match.string_like_regexp("Fine-tuning jobs")}},
    )
    (sg_id,) = groups
    (sg,) = groups.values()
    # No inline CIDR ingress at all; the only ingress is the self-reference.
    assert "SecurityGroupIngress" not in sg["Properties"]
    ingress = t.find_resources(
        "AWS::EC2::SecurityGroupIngress",
        {"Properties": {"GroupId": {"Fn::GetAtt": [sg_id, "GroupId"]}}},
    )
    assert len(ingress) == 1
    (rule,) = ingress.values()
    assert rule["Properties"]["IpProtocol"] == "-1"
    assert rule["Properties"]["SourceSecurityGroupId"] == {"Fn::GetAtt": [sg_id, "GroupId"]}
    t.has_resource_properties(
        "AWS::EC2::SecurityGroupEgress",
        {
            "GroupId": {"Fn::GetAtt": [sg_id, "GroupId"]},
            "IpProtocol": "-1",
            "DestinationSecurityGroupId": {"Fn::GetAtt": [sg_id, "GroupId"]},
        },
    )
    # Anything else outbound is HTTPS only.
    for rule in sg["Properties"].get("SecurityGroupEgress", []):
        assert (rule["IpProtocol"], rule["FromPort"], rule["ToPort"]) == ("tcp", 443, 443)


def test_isolated_vpc_has_endpoints_flow_logs_and_no_nat(foundation_vpc):
    t = foundation_vpc
    t.resource_count_is("AWS::EC2::NatGateway", 0)
    t.resource_count_is("AWS::EC2::InternetGateway", 0)
    t.resource_count_is("AWS::EC2::FlowLog", 1)
    t.has_resource_properties("AWS::EC2::VPCEndpoint", {"VpcEndpointType": "Gateway"})
    interface = t.find_resources(
        "AWS::EC2::VPCEndpoint",
        {"Properties": {"VpcEndpointType": "Interface", "PrivateDnsEnabled": True}},
    )
    services = " ".join(str(e["Properties"]["ServiceName"]) for e in interface.values())
    for name in ("sagemaker.api", "ecr.api", "ecr.dkr", "logs", "sts"):
        assert name in services, name


def test_nat_egress_mode_adds_one_nat_gateway():
    t = template("foundation", **{"ftl:network": "new", "ftl:egress": "nat"})
    t.resource_count_is("AWS::EC2::NatGateway", 1)


def test_vpc_mode_lets_the_role_manage_enis_in_the_platform_vpc_only(foundation_vpc):
    s = _role_statements(foundation_vpc)
    assert s["ManageTrainingEnis"]["Condition"]["ArnEquals"]["ec2:Vpc"]
    assert "ec2:CreateNetworkInterface" in _as_list(s["CreateTrainingEnis"]["Action"])


def test_existing_vpc_mode_synthesizes_without_lookups():
    t = template("foundation", **{"ftl:network": "existing", "ftl:existingVpc": EXISTING_VPC})
    t.resource_count_is("AWS::EC2::VPC", 0)
    t.has_resource_properties(
        "AWS::EC2::VPCEndpoint",
        {"VpcId": "vpc-0123abcd", "RouteTableIds": ["rtb-0aaa1111", "rtb-0bbb2222"]},
    )


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"network": "bogus"}, "ftl:network"),
        ({"egress": "nat"}, "ftl:egress"),
        ({"checkpointExpiryDays": 0}, "ftl:checkpointExpiryDays"),
        ({"checkpointExpiryDays": "soon"}, "ftl:checkpointExpiryDays"),
        ({"logRetentionDays": 42}, "ftl:logRetentionDays"),
        ({"region": "mars-1"}, "ftl:region"),
        ({"account": "12"}, "ftl:account"),
        ({"platformName": "has space"}, "ftl:platformName"),
        ({"network": "existing"}, "ftl:existingVpc"),
        (
            {"network": "existing", "existingVpc": {**EXISTING_VPC, "routeTableIds": []}},
            "ftl:existingVpc",
        ),
        ({"existingVpc": EXISTING_VPC}, "ftl:existingVpc"),
        ({"tags": {"aws:owner": "x"}}, "ftl:tags"),
        ({"extraInputBuckets": ["Not_A_Bucket"]}, "ftl:extraInputBuckets"),
        ({"extraInputBuckets": ["two..dots"]}, "ftl:extraInputBuckets"),
        ({"typo": 1}, "ftl:typo"),
    ],
)
def test_bad_context_fails_naming_the_key(raw, key):
    with pytest.raises(ContextError) as err:
        PlatformSettings.from_mapping(raw)
    assert err.value.key == key
    assert key in str(err.value)


def test_settings_are_frozen():
    s = PlatformSettings.from_mapping({})
    with pytest.raises(AttributeError):
        s.name = "other"  # type: ignore[misc]


# --- issue 9: uploads under the platform key only; the S3 endpoint reaches only what jobs need


def _deny_sids(policy):
    return {
        s.get("Sid"): s
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if s["Effect"] == "Deny" and s["Action"] == "s3:PutObject"
    }


def test_kms_buckets_refuse_uploads_not_under_the_platform_key(foundation):
    policies = foundation.find_resources("AWS::S3::BucketPolicy")
    guarded = [p for p in policies.values() if _deny_sids(p)]
    assert len(guarded) == 3  # data, checkpoints, artifacts; not the SSE-S3 access-log bucket
    sse = "s3:x-amz-server-side-encryption"
    for policy in guarded:
        s = _deny_sids(policy)
        # Each value rule applies only when its header is sent (Null = false): a plain upload
        # gets the bucket default, the platform key (the authorization check tries it).
        assert s["DenyUploadsNotSseKms"]["Condition"] == {
            "StringNotEquals": {sse: "aws:kms"},
            "Null": {sse: "false"},
        }
        other_keys = s["DenyUploadsUnderOtherKeys"]["Condition"]
        assert other_keys["Null"] == {f"{sse}-aws-kms-key-id": "false"}
        key_ids = other_keys["StringNotEquals"][f"{sse}-aws-kms-key-id"]
        assert "PlatformKey" in key_ids[0]["Fn::GetAtt"][0] and "PlatformKey" in key_ids[1]["Ref"]
        assert s["DenyUploadsUnderTheAwsManagedKey"]["Condition"] == {
            "StringEquals": {sse: "aws:kms"},
            "Null": {f"{sse}-aws-kms-key-id": "true"},
        }
        assert s["DenyUploadsWithCustomerKeys"]["Condition"] == {
            "Null": {f"{sse}-customer-algorithm": "false"}
        }
        for stmt in s.values():
            assert stmt["Principal"] == {"AWS": "*"}


def test_s3_gateway_endpoint_reaches_only_platform_buckets_layers_and_assets(foundation_vpc):
    (endpoint,) = foundation_vpc.find_resources(
        "AWS::EC2::VPCEndpoint", {"Properties": {"VpcEndpointType": "Gateway"}}
    ).values()
    statements = {s["Sid"]: s for s in endpoint["Properties"]["PolicyDocument"]["Statement"]}
    assert set(statements) == {"PlatformBuckets", "ImageLayersAndTrainingSource"}
    buckets = json.dumps(statements["PlatformBuckets"]["Resource"])
    for name in ("DataBucket", "CheckpointBucket", "ArtifactBucket"):
        assert name in buckets
    assert "AccessLogs" not in buckets
    assert "s3:PutObject" in statements["PlatformBuckets"]["Action"]
    assert statements["ImageLayersAndTrainingSource"]["Action"] == "s3:GetObject"
    objects = sorted(
        "".join(p if isinstance(p, str) else "<partition>" for p in r["Fn::Join"][1])
        for r in statements["ImageLayersAndTrainingSource"]["Resource"]
    )
    assert objects == [
        "arn:<partition>:s3:::cdk-hnb659fds-assets-123456789012-us-east-1/*",
        "arn:<partition>:s3:::prod-us-east-1-starport-layer-bucket/*",
    ]
    assert all(s["Effect"] == "Allow" for s in statements.values())


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"prices": ["x"]}, "ftl:prices"),
        ({"prices": {"mars-1": {"ml.p4d.24xlarge": 1}}}, "ftl:prices"),
        ({"prices": {"us-east-1": {"ml.nope.large": 1}}}, 'ftl:prices["us-east-1"]'),
        (
            {"prices": {"us-east-1": {"ml.p4d.24xlarge": 0}}},
            'ftl:prices["us-east-1"]["ml.p4d.24xlarge"]',
        ),
        (
            {"prices": {"us-east-1": {"ml.p4d.24xlarge": True}}},
            'ftl:prices["us-east-1"]["ml.p4d.24xlarge"]',
        ),
        ({"prices": "{not json"}, "ftl:prices"),
        ({"teams": [{"name": "A", "principals": []}]}, "ftl:teams[0].name"),
        ({"teams": "[{]"}, "ftl:teams"),
        (
            {
                "teams": [{"name": "team-a", "principals": ["arn:aws:iam::123456789012:role/a"]}],
                "extraInputBuckets": ["shared"],
            },
            "ftl:extraInputBuckets",
        ),
    ],
)
def test_bad_prices_and_teams_fail_naming_the_key(raw, key):
    with pytest.raises(ContextError) as err:
        PlatformSettings.from_mapping(raw)
    assert err.value.key == key
    assert key in str(err.value)


def test_prices_and_teams_accept_json_text_from_the_command_line():
    s = PlatformSettings.from_mapping(
        {
            "prices": '{"us-east-1": {"ml.p4d.24xlarge": 37.688}}',
            "teams": '[{"name": "team-a", "principals": ["arn:aws:iam::123456789012:role/a"]}]',
        }
    )
    assert s.prices == {"us-east-1": {"ml.p4d.24xlarge": 37.688}}
    assert [t.name for t in s.teams.teams] == ["team-a"]


# Every JSON-valued context key, as `-c key=<JSON text>` gives it (text) and as cdk.json does.
JSON_KEYS = {
    "prices": {"us-east-1": {"ml.p4d.24xlarge": 37.688}},
    "teams": [{"name": "team-a", "principals": ["arn:aws:iam::123456789012:role/a"]}],
    "admins": ["arn:aws:iam::123456789012:role/admin"],
    "extraInputBuckets": ["shared-corpus"],
    "tags": {"cost-center": "ml"},
    "existingVpc": {
        "vpcId": "vpc-0123abcd",
        "availabilityZones": ["us-east-1a"],
        "privateSubnetIds": ["subnet-0aaa1111"],
        "routeTableIds": ["rtb-0aaa1111"],
    },
}


def _with(key, value):
    raw = {key: value}
    if key == "admins":
        raw["teams"] = JSON_KEYS["teams"]
    if key == "existingVpc":
        raw["network"] = "existing"
    return raw


@pytest.mark.parametrize("key", list(JSON_KEYS))
def test_every_json_valued_key_accepts_json_text(key):
    import json

    parsed = PlatformSettings.from_mapping(_with(key, JSON_KEYS[key]))
    from_text = PlatformSettings.from_mapping(_with(key, json.dumps(JSON_KEYS[key])))
    assert from_text == parsed


@pytest.mark.parametrize("key", list(JSON_KEYS))
def test_json_text_that_does_not_parse_names_the_key(key):
    with pytest.raises(ContextError) as err:
        PlatformSettings.from_mapping(_with(key, "{not json"))
    assert err.value.key.removeprefix("ftl:") == key
