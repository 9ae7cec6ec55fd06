"""Where a job lives: its name (``<prefix>-YYYYMMDD-HHMM-xxxx``) and its S3 prefixes."""

from __future__ import annotations

from datetime import UTC, datetime

from . import _rules as R
from .contract.errors import ValidationError
from .platform import PlatformConfig

__all__ = ["checkpoint_s3_uri", "make_job_name", "output_s3_uri"]

_NAME_SUFFIX_LEN = len("-YYYYMMDD-HHMM-xxxx")
_MAX_PREFIX_LEN = 63 - _NAME_SUFFIX_LEN
_HEX = frozenset("0123456789abcdef")


def make_job_name(
    prefix: str, *, now: datetime, rand_hex: str, team: str | None = None, reserve: int = 0
) -> str:
    """``<prefix>-YYYYMMDD-HHMM-xxxx``: a valid, unique-enough SageMaker job name.

    The prefix is sanitised (runs outside ``[a-zA-Z0-9-]`` become one ``-``, edge
    dashes dropped) and cut so the name fits 63 characters; ``now`` is taken in
    UTC (a naive datetime is read as UTC); ``rand_hex`` is 4 hex digits. With ``team``
    the name starts ``<team>-`` (a prefix that already starts so is not doubled).
    ``reserve``: characters left free after the name (a chained job's attempts are
    ``<name>-a<n>``, ``jobmodel.capacity.chain.attempt_name``).
    """
    if type(prefix) is not str:
        raise ValidationError("job_name", "job_name must be a string")
    clean = R.sanitize_job_prefix(prefix)
    if not clean:
        raise ValidationError(
            "job_name", f"job_name must contain a letter or digit, got {R.show(prefix)}"
        )
    suffix = rand_hex.lower()
    if len(suffix) != 4 or not _HEX.issuperset(suffix):
        raise ValueError(f"rand_hex must be 4 hex digits, got {rand_hex!r}")
    if team is not None and not (clean == team or clean.startswith(team + "-")):
        clean = f"{team}-{clean}"
    if now.tzinfo is not None:
        now = now.astimezone(UTC)
    clean = clean[: _MAX_PREFIX_LEN - reserve].rstrip("-")
    stamp = f"{now.year:04d}{now.month:02d}{now.day:02d}-{now.hour:02d}{now.minute:02d}"
    return f"{clean}-{stamp}-{suffix}"


def _team_dir(team: str | None) -> str:
    return "" if team is None else f"{team}/"


def checkpoint_s3_uri(platform: PlatformConfig, job_name: str, team: str | None = None) -> str:
    """Where a job's checkpoints live: ``s3://<checkpoint bucket>/[<team>/]<job name>/``."""
    return f"s3://{platform.checkpoint_bucket}/{_team_dir(team)}{job_name}/"


def output_s3_uri(platform: PlatformConfig, job_name: str, team: str | None = None) -> str:
    """Where SageMaker writes a job's output: ``s3://<artifact bucket>/[<team>/]<job name>/``."""
    return f"s3://{platform.artifact_bucket}/{_team_dir(team)}{job_name}/"
