"""The evaluator against the examples of AWS's policy evaluation documentation (IAM User Guide:
"Policy evaluation logic", "Condition operators", "...IfExists", "Single-valued vs.
multivalued context keys"), restated here on the documented inputs and outcomes."""

from __future__ import annotations

from testsupport.authz.evaluate import Policy, Request, condition_holds, evaluate

ACCT = "123456789012"
USER = f"arn:aws:iam::{ACCT}:user/carlos"


def allow(action, resource, condition=None, **extra):
    st = {"Effect": "Allow", "Action": action, "Resource": resource, **extra}
    if condition:
        st["Condition"] = condition
    return st


def decide(request, identity=(), resource=None):
    policies = [Policy({"Statement": identity_}, "id") for identity_ in [list(identity)]]
    return evaluate(request, policies, resource or {}, account=ACCT).allowed


def test_default_deny_allow_and_explicit_deny_wins():
    req = Request(USER, "s3:GetObject", ("arn:aws:s3:::bucket/key",))
    assert not decide(req)  # no statement: implicit deny
    assert decide(req, [allow("s3:Get*", "arn:aws:s3:::bucket/*")])
    deny = {"Effect": "Deny", "Action": "s3:*", "Resource": "*"}
    assert not decide(req, [allow("s3:GetObject", "*"), deny])


def test_resource_policy_alone_allows_within_the_account_when_it_names_the_principal():
    req = Request(USER, "s3:GetObject", ("arn:aws:s3:::bucket/key",))
    bucket = Policy(
        {"Statement": [allow("s3:GetObject", "arn:aws:s3:::bucket/*", Principal={"AWS": USER})]},
        "b",
        "resource",
    )
    assert decide(req, resource={"arn:aws:s3:::bucket/*": [bucket]})
    deny = Policy(
        {
            "Statement": [
                {
                    "Effect": "Deny",
                    "Principal": "*",
                    "Action": "s3:*",
                    "Resource": "arn:aws:s3:::bucket/*",
                }
            ]
        },
        "d",
        "resource",
    )
    assert not decide(req, [allow("s3:*", "*")], {"arn:aws:s3:::bucket/*": [deny]})


def test_kms_key_policy_must_allow_or_delegate_to_iam():
    key = f"arn:aws:kms:us-east-1:{ACCT}:key/k"
    req = Request(USER, "kms:Decrypt", (key,))
    delegate = Policy(
        {"Statement": [allow("kms:*", "*", Principal={"AWS": f"arn:aws:iam::{ACCT}:root"})]},
        "k",
        "kms",
    )
    silent = Policy({"Statement": []}, "k", "kms")
    assert decide(req, [allow("kms:Decrypt", key)], {key: [delegate]})
    assert not decide(req, [allow("kms:Decrypt", key)], {key: [silent]})
    assert not decide(req, [], {key: [delegate]})  # delegation needs the IAM allow too


def test_every_resource_of_the_request_must_be_allowed():
    queue = f"arn:aws:batch:us-east-1:{ACCT}:job-queue/q"
    job = f"arn:aws:batch:us-east-1:{ACCT}:service-job/1"
    req = Request(USER, "batch:SubmitServiceJob", (queue, job))
    assert not decide(req, [allow("batch:SubmitServiceJob", queue)])
    assert decide(
        req,
        [allow("batch:SubmitServiceJob", [queue, f"arn:aws:batch:us-east-1:{ACCT}:service-job/*"])],
    )


def test_missing_keys_and_if_exists():
    ctx: dict = {}
    # a positive operator on a missing key is false; a negated one true; ...IfExists true
    assert not condition_holds("StringEquals", "aws:RequestTag/team", "a", ctx)
    assert condition_holds("StringNotEquals", "aws:RequestTag/team", "a", ctx)
    assert condition_holds("StringEqualsIfExists", "aws:RequestTag/team", "a", ctx)
    assert condition_holds(
        "StringNotEqualsIfExists", "s3:x-amz-server-side-encryption", "aws:kms", ctx
    )
    # Null: true means "absent"
    assert condition_holds("Null", "aws:TokenIssueTime", "true", ctx)
    assert not condition_holds("Null", "aws:TokenIssueTime", "false", ctx)


def test_set_operators_on_multivalued_keys():
    tags = {"aws:TagKeys": ["environment", "cost-center"]}
    allowed = ["environment", "cost-center", "owner"]
    assert condition_holds("ForAllValues:StringEquals", "aws:TagKeys", allowed, tags)
    assert not condition_holds("ForAllValues:StringEquals", "aws:TagKeys", ["environment"], tags)
    assert condition_holds("ForAnyValue:StringEquals", "aws:TagKeys", ["environment"], tags)
    # ForAllValues is true for an absent key (why a Null guard is needed); ForAnyValue false
    assert condition_holds("ForAllValues:StringEquals", "aws:TagKeys", allowed, {})
    assert not condition_holds("ForAnyValue:StringEquals", "aws:TagKeys", allowed, {})
    # ForAnyValue:StringNotEquals: true when at least one value differs from every listed one
    assert condition_holds("ForAnyValue:StringNotEquals", "aws:TagKeys", ["environment"], tags)


def test_values_of_one_key_are_ored_and_keys_are_anded():
    ctx = {"aws:PrincipalTag/dept": "eng", "aws:RequestedRegion": "us-east-1"}
    st = allow(
        "ec2:RunInstances",
        "*",
        {
            "StringEquals": {
                "aws:PrincipalTag/dept": ["eng", "ops"],
                "aws:RequestedRegion": "us-east-1",
            }
        },
    )
    assert decide(Request(USER, "ec2:RunInstances", ("*",), ctx), [st])
    assert not decide(
        Request(USER, "ec2:RunInstances", ("*",), {**ctx, "aws:RequestedRegion": "eu-west-1"}), [st]
    )


def test_wildcards_and_arn_segments():
    assert decide(
        Request(USER, "s3:PutObject", ("arn:aws:s3:::b/team-a/x",)),
        [allow("s3:PutObject", "arn:aws:s3:::b/team-a/*")],
    )
    assert not decide(
        Request(USER, "s3:PutObject", ("arn:aws:s3:::b/team-b/x",)),
        [allow("s3:PutObject", "arn:aws:s3:::b/team-a/*")],
    )
    # ARN matching is case-sensitive (SageMaker's ARNs are lower-case)
    arn = f"arn:aws:sagemaker:us-east-1:{ACCT}:training-job/awsbatchteam-a-x"
    assert not decide(
        Request(USER, "sagemaker:DescribeTrainingJob", (arn,)),
        [
            allow(
                "sagemaker:DescribeTrainingJob",
                f"arn:aws:sagemaker:us-east-1:{ACCT}:training-job/AWSBatchteam-a-*",
            )
        ],
    )
    # action names are case-insensitive
    assert decide(
        Request(USER, "s3:getobject", ("arn:aws:s3:::b/k",)), [allow("S3:GetObject", "*")]
    )


def test_numeric_bool_and_arn_operators():
    assert condition_holds(
        "NumericLessThanEquals",
        "sagemaker:MaxRuntimeInSeconds",
        "3600",
        {"sagemaker:MaxRuntimeInSeconds": 3600},
    )
    assert not condition_holds(
        "NumericLessThanEquals",
        "sagemaker:MaxRuntimeInSeconds",
        "3600",
        {"sagemaker:MaxRuntimeInSeconds": 3601},
    )
    assert condition_holds("Bool", "aws:SecureTransport", "false", {"aws:SecureTransport": False})
    assert condition_holds(
        "ArnLike",
        "aws:SourceArn",
        "arn:aws:events:*:1:rule/x-*",
        {"aws:SourceArn": "arn:aws:events:us-east-1:1:rule/x-1"},
    )
    assert not condition_holds(
        "ArnEquals",
        "aws:SourceArn",
        "arn:aws:events:us-east-1:1:rule/x",
        {"aws:SourceArn": "arn:aws:events:us-east-1:1:rule/y"},
    )
