"""``ftl``'s command line: the argument types, the parser that raises instead of exiting, the
global options and every command's arguments (``cli`` runs what they parse to)."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any, NoReturn

from ftl_client.client import DEFAULT_STACK, TRANSPORTS
from ftl_client.sweep_args import Ranges, number_of, parse_value, strategy, sweep_range
from jobmodel.contract.statuses import JOB_STATUSES
from jobmodel.requests.submit_fields import FIELDS

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


# ----------------------------------------------------------------- argument types
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


def positive_usd(text: str) -> float:
    """An amount of money (``--cap``): a positive number of USD, ``$`` allowed in front."""
    try:
        value = float(text.strip().removeprefix("$"))
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive amount in USD, got {text!r}")
    return value


def finite_number(text: str) -> int | float:
    """A number (``--target``): an int or a float, not NaN or infinite."""
    value = number_of(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}")
    return value


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
    _add_sweep(
        command(
            "sweep",
            "start a hyperparameter sweep (a SageMaker tuning job) from a template, within a "
            "cost cap",
        )
    )

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

    models = command("models", "list your team's model versions with their lineage")
    models.add_argument("--template", metavar="TEMPLATE")
    models.add_argument(
        "--limit", type=positive_int, default=20, metavar="N", help="at most N (default 20)"
    )
    models.add_argument("--team", metavar="TEAM", help="only this team's versions (admins)")
    review = command("review", "approve or reject a job's model version (admins)")
    review.add_argument("job", metavar="JOB")
    decision = review.add_mutually_exclusive_group(required=True)
    decision.add_argument("--approve", dest="decision", action="store_const", const="Approved")
    decision.add_argument("--reject", dest="decision", action="store_const", const="Rejected")
    review.add_argument("--description", metavar="TEXT", help="why (ApprovalDescription)")
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


# How ``ftl`` reads each kind of ``CliFlag.value`` (jobmodel.requests.submit_fields).
_FLAG_VALUES: dict[str, dict[str, Any]] = {
    "text": {},
    "int": {"type": int},
    "duration": {"type": seconds},
    "pairs": {"type": assignment, "action": "append", "default": []},
    "json-pairs": {"type": hyperparameter, "action": "append", "default": []},
    "list": {"action": "append", "default": []},
    "bool": {"action": argparse.BooleanOptionalAction, "default": None},
    "switch": {"action": "store_true"},
}


def _add_fields(
    parser: argparse.ArgumentParser,
    names: Collection[str] | None = None,
    helps: Mapping[str, str] | None = None,
) -> None:
    """One flag per submit field that has one (``submit_fields.FIELDS``, in its order); only
    the fields ``names`` lists when given, with ``helps``' text for a field where it has one."""
    for row in FIELDS:
        cli = row.cli
        if cli is None or (names is not None and row.name not in names):
            continue
        kwargs = dict(_FLAG_VALUES[cli.value], help=(helps or {}).get(row.name, cli.help))
        if cli.metavar is not None:
            kwargs["metavar"] = cli.metavar
        if cli.dest is not None:
            kwargs["dest"] = cli.dest
        parser.add_argument(cli.flag, **kwargs)


def _add_submit(submit: argparse.ArgumentParser) -> None:
    _add_fields(submit)
    submit.add_argument("--wait", action="store_true", help="watch the job until it ends")
    _poll(submit)


def submit_request(
    args: argparse.Namespace, names: Collection[str] | None = None
) -> dict[str, Any]:
    """The submit fields ``ftl submit``'s flags set (None: not set), template left out; only
    the fields ``names`` lists when given."""
    fields: dict[str, Any] = {}
    for row in FIELDS:
        cli = row.cli
        if cli is None or row.name == "template":
            continue
        if names is not None and row.name not in names:
            continue
        value = getattr(args, cli.dest or cli.flag.lstrip("-").replace("-", "_"))
        if cli.value in ("pairs", "json-pairs"):
            value = dict(value) or None
        elif cli.value == "list":
            value = list(value) or None
        elif cli.value == "switch":
            value = True if value else None
        fields[row.name] = value
    return fields


# The submit fields a sweep takes too (its trials' hardware, run time and tags), with
# submit's flags and what each means for a sweep. ``job_name`` is not among them: a sweep's
# ``--name`` has its own help (its prefix is cut to fit a tuning job's 32 characters).
SWEEP_SUBMIT_FIELDS: dict[str, str] = {
    "template": "template name (see `ftl templates`)",
    "hyperparameters": "fix a hyperparameter for every trial; the value is JSON when it parses "
    "(3e-5, true, 8), else a string; repeatable",
    "instance_type": "each trial's instance type, e.g. ml.g5.2xlarge",
    "instance_count": "instances per trial",
    "max_runtime_seconds": "each trial's run time limit, e.g. 36000, 10h",
    "tags": "tag the sweep; repeatable",
    "client_token": "idempotency key (the same token never starts two sweeps)",
    "dry_run": "run every check and print the worst case against the cap; start nothing",
}


def _add_sweep(sweep: argparse.ArgumentParser) -> None:
    _add_fields(sweep, SWEEP_SUBMIT_FIELDS, SWEEP_SUBMIT_FIELDS)
    sweep.add_argument(
        "--range",
        dest="ranges",
        metavar="NAME=RANGE",
        type=sweep_range,
        action=Ranges,
        required=True,
        help="a hyperparameter to sweep: NAME=MIN:MAX[:SCALE] (numbers; SCALE linear, log, "
        "reverse-log or auto, the default) or NAME=V1,V2,... (values, JSON when they parse; "
        'NAME=["a,b","c"] for values with commas); repeatable, one per hyperparameter',
    )
    sweep.add_argument(
        "--objective", metavar="METRIC", required=True, help="the template metric to optimise"
    )
    direction = sweep.add_mutually_exclusive_group()
    direction.add_argument(
        "--maximize", dest="direction", action="store_const", const="Maximize",
        help="the higher the objective the better",
    )  # fmt: skip
    direction.add_argument(
        "--minimize", dest="direction", action="store_const", const="Minimize",
        help="the lower the objective the better (the default)",
    )  # fmt: skip
    sweep.add_argument(
        "--strategy",
        type=strategy,
        metavar="STRATEGY",
        help="bayesian (default), random, hyperband or grid",
    )
    sweep.add_argument(
        "--trials", type=positive_int, metavar="N", required=True, help="at most N trials"
    )
    sweep.add_argument(
        "--parallel", type=positive_int, metavar="N", help="trials at a time (default 1)"
    )
    sweep.add_argument(
        "--early-stopping",
        action="store_const",
        const="Auto",
        help="let the tuner stop trials that are unlikely to beat the best (default off)",
    )
    sweep.add_argument(
        "--cap",
        type=positive_usd,
        metavar="USD",
        required=True,
        help="the most the sweep may cost; refused before anything starts when its worst "
        "case is over it",
    )
    sweep.add_argument(
        "--target",
        type=finite_number,
        metavar="X",
        help="stop the sweep once a trial's objective reaches X",
    )
    sweep.add_argument(
        "--name",
        metavar="NAME",
        help="the sweep's name prefix: the launcher cuts it to fit and adds the date and 4 "
        "random hex digits (at most 32 characters in all, SageMaker's limit for tuning jobs)",
    )
    sweep.add_argument("--wait", action="store_true", help="watch the sweep until it ends")
    _poll(sweep)


def sweep_request(args: argparse.Namespace) -> dict[str, Any]:
    """The sweep fields ``ftl sweep``'s flags set (None: not set), template left out.

    A hyperparameter given both a fixed value (``--set``) and a range is a usage error."""
    fields = submit_request(args, SWEEP_SUBMIT_FIELDS)
    both = sorted(set(fields.get("hyperparameters") or {}) & set(args.ranges))
    if both:
        raise UsageError(
            f"argument --set: {', '.join(both)} also has a --range; fix it or sweep it, not both",
            "ftl sweep",
        )
    fields.update(
        job_name=args.name,
        ranges=dict(args.ranges),
        objective=args.objective,
        direction=args.direction,
        strategy=args.strategy,
        max_trials=args.trials,
        max_parallel=args.parallel,
        early_stopping=args.early_stopping,
        cap_usd=args.cap,
        target=args.target,
    )
    return fields


def _poll(parser: argparse.ArgumentParser, default: float = 15.0) -> None:
    parser.add_argument(
        "--poll",
        metavar="SECONDS",
        type=positive_float,
        default=default,
        help=f"seconds between polls (default {default:g})",
    )
