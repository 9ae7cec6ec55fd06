"""Rules shared by template validation (synth time) and request validation (run time).

Each check returns ``None`` when the value is fine, or a short phrase saying what
is wrong; the callers wrap it into ``TemplateError`` or ``ValidationError`` with
the template and field names. Regular expressions are compiled once, here.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from typing import Any

# SageMaker / CreateTrainingJob limits (the botocore sagemaker 2017-07-24 model; SageMaker's
# MaxRuntimeInSeconds cap is 28 days).
MAX_RUNTIME_LIMIT = 2_419_200  # 28 days
MAX_HYPERPARAMETERS = 100
MAX_HYPERPARAMETER_LENGTH = 256  # key and encoded value
MAX_TAGS = 50
MAX_TAG_KEY = 128
MAX_TAG_VALUE = 256
MAX_ENVIRONMENT = 100
MAX_ENVIRONMENT_LENGTH = 512
MAX_CHANNELS = 20
MAX_METRICS = 40
MAX_RETRY_ATTEMPTS = 30
# The API (botocore model) allows up to 21600 s; the platform keeps warm pools to one hour.
MAX_KEEP_ALIVE = 3600
MAX_S3_URI = 1024
RESERVED_TAG_PREFIX = "ftl:"
# AWS Batch SubmitServiceJob's schedulingPriority (queue mode; higher runs first in a share).
MIN_QUEUE_PRIORITY = 0
MAX_QUEUE_PRIORITY = 9999

JOB_NAME_RE = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")
TEMPLATE_NAME_RE = re.compile(r"[a-z0-9](-?[a-z0-9]){0,39}")
CHANNEL_NAME_RE = re.compile(r"[A-Za-z0-9.\-_]+")
METRIC_NAME_RE = re.compile(r"[a-z0-9_]+")
ENV_KEY_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
ASCII_TAG_RE = re.compile(r"[A-Za-z0-9 _.:/=+\-@]*")
CLIENT_TOKEN_RE = re.compile(r"[A-Za-z0-9._:\-]{1,64}")
BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]")
ECR_IMAGE_RE = re.compile(
    r"\d{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(\.cn)?/"
    r"[a-z0-9]+(?:[._\-/][a-z0-9]+)*(?::[\w][\w.\-]{0,127}|@sha256:[0-9a-f]{64})"
)

_TAG_EXTRA = frozenset("_.:/=+-@")

HP_TYPES = ("int", "float", "bool", "str")


def aws_len(text: str) -> int:
    """A string's length as the platform measures it against AWS's limits: UTF-16 code units
    (a character outside the Basic Multilingual Plane counts 2). The AWS API reference pages
    do not say how they count; UTF-16 is never fewer than the code points Smithy's ``length``
    trait names, so a string within it is within either reading (docs/DECISIONS.md)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def cut_to(text: str, limit: int) -> str:
    """The longest start of ``text`` within ``limit`` UTF-16 code units (:func:`aws_len`)."""
    if aws_len(text) <= limit:
        return text
    out, used = [], 0
    for ch in text:
        used += 2 if ord(ch) > 0xFFFF else 1
        if used > limit:
            break
        out.append(ch)
    return "".join(out)


def is_bucket_name(name: str) -> bool:
    """An S3 bucket name: 3-63 of lowercase letters, digits, '.' and '-', no '..'."""
    return BUCKET_RE.fullmatch(name) is not None and ".." not in name


def is_json_scalar(value: Any) -> bool:
    """A JSON scalar: str, int, finite float, bool or None."""
    t = type(value)
    if t is float:
        return math.isfinite(value)
    return t is str or t is int or t is bool or value is None


def encode_value(value: Any) -> str:
    """How SageMaker SDK v2 encodes a hyperparameter value (``json.dumps``)."""
    return json.dumps(value)


def tag_text_ok(text: str) -> bool:
    """Characters allowed in tag keys and values: ``[\\p{L}\\p{Z}\\p{N}_.:/=+\\-@]``."""
    if text.isascii():
        return ASCII_TAG_RE.fullmatch(text) is not None
    for ch in text:
        if ch in _TAG_EXTRA:
            continue
        if unicodedata.category(ch)[0] not in "LZN":
            return False
    return True


def tag_problem(key: Any, value: Any) -> str | None:
    """Why ``key: value`` is not an acceptable tag, or None."""
    if type(key) is not str:
        return "tag keys must be strings"
    if type(value) is not str:
        return f"tag {key!r} must have a string value"
    if not 1 <= aws_len(key) <= MAX_TAG_KEY:
        return (
            f"tag key must be 1 to {MAX_TAG_KEY} characters (UTF-16 code units), got {aws_len(key)}"
        )
    if aws_len(value) > MAX_TAG_VALUE:
        return (
            f"tag {key!r} value must be at most {MAX_TAG_VALUE} characters (UTF-16 code units), "
            f"got {aws_len(value)}"
        )
    if key[:4].lower() == "aws:":
        return f"tag key {key!r} uses the reserved prefix 'aws:'"
    if not tag_text_ok(key):
        return f"tag key {key!r} has characters outside letters, digits, spaces and _.:/=+-@"
    if not tag_text_ok(value):
        return f"tag {key!r} value has characters outside letters, digits, spaces and _.:/=+-@"
    return None


def env_problem(key: Any, value: Any) -> str | None:
    """Why ``key=value`` is not an acceptable container environment entry, or None."""
    if type(key) is not str or ENV_KEY_RE.fullmatch(key) is None:
        return f"environment key {key!r} must match [a-zA-Z_][a-zA-Z0-9_]*"
    if aws_len(key) > MAX_ENVIRONMENT_LENGTH:
        return f"environment key {key!r} is longer than {MAX_ENVIRONMENT_LENGTH} characters"
    if type(value) is not str:
        return f"environment variable {key} must have a string value"
    if aws_len(value) > MAX_ENVIRONMENT_LENGTH:
        return (
            f"environment variable {key} value is longer than {MAX_ENVIRONMENT_LENGTH} "
            "characters (UTF-16 code units)"
        )
    return None


def s3_prefix_problem(prefix: Any) -> str | None:
    """Why ``prefix`` is not an acceptable key prefix inside a bucket, or None."""
    if type(prefix) is not str:
        return "must be a string"
    if prefix.startswith("/"):
        return "must not start with '/'"
    if not prefix.isprintable() or " " in prefix:
        return "must not contain whitespace or control characters"
    for segment in prefix.split("/"):
        if segment in (".", ".."):
            return "must not contain '.' or '..' path segments"
    return None


def bucket_of_s3_uri(uri: str) -> tuple[str | None, str]:
    """Parse ``s3://bucket/key``: ``(bucket, problem)``; bucket is None when invalid."""
    if aws_len(uri) > MAX_S3_URI:
        return (
            None,
            f"must be at most {MAX_S3_URI} characters (UTF-16 code units), got {aws_len(uri)}",
        )
    if not uri.startswith("s3://"):
        return None, "must be an s3:// URI (s3://<bucket>/<prefix>)"
    rest = uri[5:]
    bucket, slash, key = rest.partition("/")
    if not slash:
        return None, "must be s3://<bucket>/<prefix> (a '/' after the bucket name)"
    if not is_bucket_name(bucket):
        return None, f"has an invalid bucket name {bucket!r}"
    problem = s3_prefix_problem(key)
    if problem is not None:
        return None, problem
    return bucket, ""


_JOB_PREFIX_JUNK_RE = re.compile(r"[^a-zA-Z0-9-]+")
_ASCII_TAG_JUNK_RE = re.compile(r"[^A-Za-z0-9 _.:/=+\-@]")


def sanitize_job_prefix(prefix: str) -> str:
    """Every run of characters outside ``[a-zA-Z0-9-]`` becomes one ``-``; edge dashes go."""
    return _JOB_PREFIX_JUNK_RE.sub("-", prefix).strip("-")


def sanitize_tag_value(text: str) -> str:
    """``text`` with every character a tag may not hold replaced by ``_``, cut to 256 UTF-16
    code units."""
    text = cut_to(text, MAX_TAG_VALUE)
    if text.isascii():
        return _ASCII_TAG_JUNK_RE.sub("_", text)
    return "".join(
        ch if ch in _TAG_EXTRA or unicodedata.category(ch)[0] in "LZN" else "_" for ch in text
    )


def show(value: object, limit: int = 80) -> str:
    """A short, safe rendering of a caller's value for error messages."""
    t = type(value)
    if t is int and value.bit_length() > 128:  # type: ignore[attr-defined]
        return "<a very large integer>"
    if value is None or t in (str, int, float, bool):
        text = repr(value)
    else:
        text = f"<{t.__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
