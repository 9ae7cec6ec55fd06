"""AWS managed policies the platform depends on, as AWS publishes them (only the parts the
platform uses): attached to the stacks' roles, or to a service-linked role AWS owns."""

from __future__ import annotations

from testsupport.authz.template import ACCOUNT

# AWS managed policies the stacks attach, as AWS publishes them (the parts the platform uses).
# The policy of AWS Batch's service-linked role for SageMaker jobs (AWS Managed Policy
# Reference, AWSBatchServiceRolePolicyForSageMaker, version v1 of 2025-07-15): Batch, not the
# trigger, calls CreateTrainingJob in queue mode, with this role.
BATCH_SAGEMAKER_SLR = (
    f"arn:aws:iam::{ACCOUNT}:role/aws-service-role/batch.amazonaws.com/"
    "AWSServiceRoleForAWSBatchWithSagemaker"
)
BATCH_SAGEMAKER_SLR_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Action": [
                "sagemaker:CreateTrainingJob",
                "sagemaker:DescribeTrainingJob",
                "sagemaker:StopTrainingJob",
                "sagemaker:ListTags",
            ],
            "Resource": "arn:aws:sagemaker:*:*:training-job/AWSBatch*",
        },
        {
            "Effect": "Allow",
            "Action": ["sagemaker:CreateTrainingJob"],
            "Resource": [
                "arn:aws:sagemaker:*:*:training-plan/*",
                "arn:aws:sagemaker:*:*:reserved-capacity/*",
            ],
        },
        {
            "Effect": "Allow",
            "Action": ["sagemaker:AddTags"],
            "Resource": "arn:aws:sagemaker:*:*:training-job/AWSBatch*",
            "Condition": {"StringEquals": {"sagemaker:TaggingAction": "CreateTrainingJob"}},
        },
        {
            "Effect": "Allow",
            "Action": ["sagemaker:ListTrainingJobs", "sagemaker:Search"],
            "Resource": "*",
        },
        {
            "Effect": "Allow",
            "Action": "iam:PassRole",
            "Resource": "*",
            "Condition": {"StringEquals": {"iam:PassedToService": ["sagemaker.amazonaws.com"]}},
        },
    ],
}

AWS_MANAGED = {
    "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole": {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
                "Resource": "*",
            }
        ],
    },
}
