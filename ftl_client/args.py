"""``ftl``'s command line: the argument types, the parser that raises instead of exiting, the
global options and every command's arguments (``cli`` runs what they parse to)."""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Sequence
from typing import Any, NoReturn

from ftl_client.client import DEFAULT_STACK, TRANSPORTS
from jobmodel.contract.statuses import JOB_STATUSES

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


# ----------------------------------------------------------------- argument types
def parse_value(text: str) -> Any:
    """A ``--set`` value: JSON when it parses (``3e-5``, ``true``, ``8``), else the string.

    ``NaN`` and ``Infinity`` stay strings: they are not JSON the launcher could accept.
    """

    def reject(constant: str) -> Any:
        raise ValueError(constant)

    try:
        return json.loads(text, parse_constant=reject)
    except ValueError:
        return text


def assignment(text: str) -> tuple[str, str]:
    """``key=value`` (the value may hold more ``=``); the key may not be empty."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def hyperparameter(text: str) -> tuple[str, Any]:
    key, value = assignment(text)
    return key, parse_value(value)


def seconds(text: str) -> int:
    """A duration: plain seconds (``3600``) or with a unit (``90m``, ``10h``, ``2d``)."""
    match = _DURATION_RE.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"expected seconds or a duration like 90m, got {text!r}")
    value = float(match.group(1)) * _UNITS[match.group(2).lower()]
    if not math.isfinite(value) or value != int(value):
        raise argparse.ArgumentTypeError(f"expected a whole number of seconds, got {text!r}")
    return int(value)


def positive_int(text: str) -> int:
    """A whole number of 1 or more (``--limit``): 0 and negatives are mistakes, not 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of 1 or more, got {text!r}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


# ---------------------------------------------------------------------- the parser
class UsageError(Exception):
    """A mistake on the command line: the message, and the command whose help to read."""

    def __init__(self, message: str, prog: str) -> None:
        super().__init__(message)
        self.message = message
        self.prog = prog


class Parser(argparse.ArgumentParser):
    """argparse, except that a mistake raises :class:`UsageError` (one line, then a pointer to
    ``--help``) instead of printing the whole usage block and exiting."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        raise UsageError(message, self.prog)


# The global options: flag, metavar, choices, help. On sub-commands they default to SUPPRESS
# so that ``ftl --json list`` and ``ftl list --json`` both work.
GLOBAL_OPTIONS: tuple[tuple[str, str | None, Sequence[str] | None, str], ...] = (
    (
        "--stack",
        "NAME",
        None,
        f"launcher stack to read outputs from (env FTL_STACK, default {DEFAULT_STACK})",
    ),
    ("--function", "NAME", None, "trigger function name or ARN (env FTL_FUNCTION_NAME)"),
    ("--api-url", "URL", None, "the job HTTP API URL, for --via http (env FTL_API_URL)"),
    ("--via", None, TRANSPORTS, "call by Lambda invoke (default) or the IAM-signed HTTP API"),
    ("--region", None, None, "AWS region"),
)


def _add_globals(parser: argparse.ArgumentParser, *, top: bool) -> None:
    group = parser.add_argument_group("where the launcher is")
    for flag, metavar, choices, help_text in GLOBAL_OPTIONS:
        default = None if top else argparse.SUPPRESS
        group.add_argument(flag, metavar=metavar, choices=choices, default=default, help=help_text)
    parser.add_argument(
        "--json",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="print JSON for scripts",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="ftl",
        description="Submit, watch and stop fine-tuning jobs on the deployed launcher.",
        epilog="exit status: 0 ok, 1 launcher/AWS failure, 2 bad command or a request you can "
        "fix, 3 watched job failed, stopped or failed to start, 4 doctor found a blocker, "
        "130 interrupted",
    )
    _add_globals(parser, top=True)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        _add_globals(sub, top=False)
        return sub

    command("templates", "list the job templates, their instance types and overridable settings")
    _add_submit(command("submit", "start a job from a template"))

    status = command("status", "describe a job; --wait watches it until it ends")
    status.add_argument("job", metavar="JOB")
    status.add_argument("--wait", action="store_true", help="watch the job until it ends")
    _poll(status)

    wait = command("wait", "watch a job until it ends (Ctrl-C stops watching, not the job)")
    wait.add_argument("job", metavar="JOB")
    _poll(wait)

    listing = command("list", "list jobs, newest first")
    listing.add_argument("--template", metavar="TEMPLATE")
    listing.add_argument("--status", choices=JOB_STATUSES)
    listing.add_argument(
        "--limit", type=positive_int, default=50, metavar="N", help="at most N jobs (default 50)"
    )
    listing.add_argument("--team", metavar="TEAM", help="only this team's jobs (admins)")

    queue = command("queue", "show the job queue: position, team, instances, wait and reason")
    queue.add_argument("--team", metavar="TEAM", help="only this team's jobs (admins)")

    command("whoami", "show your team, its limits and current use")
    command(
        "doctor",
        "read-only preflight: regions, SageMaker quotas, the queue's service-linked role, "
        "prices and the deployed versions (exit 4 when something blocks)",
    )

    stop = command("stop", "stop a job")
    stop.add_argument("job", metavar="JOB")

    logs = command("logs", "print a job's CloudWatch logs")
    logs.add_argument("job", metavar="JOB")
    logs.add_argument("--follow", "-f", action="store_true", help="keep printing until it ends")
    _poll(logs, default=5.0)
    return parser


def _add_submit(submit: argparse.ArgumentParser) -> None:
    submit.add_argument("template", help="template name (see `ftl templates`)")
    submit.add_argument(
        "--set",
        dest="hyperparameters",
        metavar="KEY=VALUE",
        type=hyperparameter,
        action="append",
        default=[],
        help="override a hyperparameter; the value is JSON when it parses (3e-5, true, 8), "
        "else a string; repeatable",
    )
    submit.add_argument("--instances", metavar="N", type=int, help="instance count")
    submit.add_argument("--instance-type", metavar="TYPE", help="e.g. ml.p4d.24xlarge")
    submit.add_argument(
        "--spot",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="managed spot training (default: the template's setting)",
    )
    submit.add_argument("--max-runtime", metavar="SECONDS", type=seconds, help="e.g. 36000, 10h")
    submit.add_argument("--max-wait", metavar="SECONDS", type=seconds, help="spot only, e.g. 20h")
    submit.add_argument(
        "--input",
        dest="inputs",
        metavar="CHANNEL=S3URI",
        type=assignment,
        action="append",
        default=[],
        help="input channel, e.g. train=s3://bucket/prefix/; repeatable",
    )
    submit.add_argument(
        "--tag",
        dest="tags",
        metavar="KEY=VALUE",
        type=assignment,
        action="append",
        default=[],
        help="tag the job; repeatable",
    )
    submit.add_argument("--name", metavar="PREFIX", help="job name prefix")
    submit.add_argument(
        "--token", metavar="TOKEN", help="idempotency key (the same token never starts two jobs)"
    )
    submit.add_argument("--priority", metavar="N", type=int, help="queue mode only, e.g. 80")
    submit.add_argument(
        "--capacity",
        metavar="STEP",
        action="append",
        default=[],
        help="a step of the template's capacity chain to use (spot, on-demand, training-plan); "
        "repeatable; default: the whole chain",
    )
    submit.add_argument("--wait", action="store_true", help="watch the job until it ends")
    submit.add_argument(
        "--dry-run",
        action="store_true",
        help="run every check and print the estimate; start nothing",
    )
    _poll(submit)


def _poll(parser: argparse.ArgumentParser, default: float = 15.0) -> None:
    parser.add_argument(
        "--poll",
        metavar="SECONDS",
        type=positive_float,
        default=default,
        help=f"seconds between polls (default {default:g})",
    )
