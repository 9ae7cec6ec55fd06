"""``ftl``: submit, watch, queue and stop fine-tuning jobs from the terminal.

Exit status: 0 done, 1 the launcher or AWS failed, 2 a bad command line or a request the
launcher rejected (validation, unknown name, conflict, configuration), 3 a watched job ended
Failed or Stopped, 130 interrupted (Ctrl-C stops watching, never the job).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shlex
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from ftl_client import display
from ftl_client.client import (
    DEFAULT_STACK,
    TRANSPORTS,
    LauncherClient,
    LauncherError,
    Progress,
)
from jobmodel.contract import JOB_STATUSES

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_JOB_FAILED = 3
EXIT_INTERRUPTED = 130
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


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


# ---------------------------------------------------------------------- the parser
# The global options: flag, metavar, choices, help. On sub-commands they default to SUPPRESS
# so that ``ftl --json list`` and ``ftl list --json`` both work.
_GLOBALS: tuple[tuple[str, str | None, Sequence[str] | None, str], ...] = (
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
    for flag, metavar, choices, help_text in _GLOBALS:
        default = None if top else argparse.SUPPRESS
        group.add_argument(flag, metavar=metavar, choices=choices, default=default, help=help_text)
    parser.add_argument(
        "--json",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="print JSON for scripts",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ftl",
        description="Submit, watch and stop fine-tuning jobs on the deployed launcher.",
        epilog="exit status: 0 ok, 1 launcher/AWS failure, 2 bad command or rejected request, "
        "3 watched job failed or stopped, 130 interrupted",
    )
    _add_globals(parser, top=True)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        _add_globals(sub, top=False)
        return sub

    command("templates", "list the job templates, their instance types and overridable settings")
    _add_submit(command("submit", "start a job from a template"))

    status = command("status", "describe a job")
    status.add_argument("job", metavar="JOB")

    wait = command("wait", "watch a job until it ends (Ctrl-C stops watching, not the job)")
    wait.add_argument("job", metavar="JOB")
    _poll(wait)

    listing = command("list", "list jobs, newest first")
    listing.add_argument("--template", metavar="TEMPLATE")
    listing.add_argument("--status", choices=JOB_STATUSES)
    listing.add_argument("--limit", type=int, default=50, metavar="N", help="default 50")
    listing.add_argument("--team", metavar="TEAM", help="only this team's jobs (admins)")

    queue = command("queue", "show the job queue: position, team, instances, wait and reason")
    queue.add_argument("--team", metavar="TEAM", help="only this team's jobs (admins)")

    command("whoami", "show your team, its limits and current use")

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


# ----------------------------------------------------------------------- commands
class Cli:
    def __init__(
        self,
        args: argparse.Namespace,
        out: TextIO,
        err: TextIO,
        client: LauncherClient | None = None,
    ) -> None:
        self.args = args
        self.out = out
        self.err = err
        self._client = client

    @property
    def client(self) -> LauncherClient:
        if self._client is None:
            a = self.args
            self._client = LauncherClient(
                a.stack,
                function_name=a.function,
                api_url=a.api_url,
                transport=a.via,
                region=a.region,
            )
        return self._client

    def emit(self, value: Any, text: str) -> None:
        if self.args.json:
            self.out.write(json.dumps(value, indent=2, default=str) + "\n")
        elif text:
            self.out.write(text + "\n")
        self.out.flush()

    def run(self) -> int:
        return getattr(self, "cmd_" + self.args.command)()

    def cmd_templates(self) -> int:
        templates = self.client.templates()
        self.emit({"templates": templates}, display.templates_table(templates))
        return EXIT_OK

    def cmd_submit(self) -> int:
        a = self.args
        job = self.client.submit(
            a.template,
            job_name=a.name,
            hyperparameters=dict(a.hyperparameters) or None,
            instance_type=a.instance_type,
            instance_count=a.instances,
            spot=a.spot,
            max_runtime_seconds=a.max_runtime,
            max_wait_seconds=a.max_wait,
            inputs=dict(a.inputs) or None,
            tags=dict(a.tags) or None,
            client_token=a.token,
            dry_run=True if a.dry_run else None,
            priority=a.priority,
        )
        if a.dry_run:
            self.emit(job, display.dry_run(job))
            return EXIT_OK
        name = job["job_name"]
        if not a.json:
            hint = None
            if not a.wait:
                prefix = self.command_prefix()
                hint = f"watch: {prefix} wait {name}    logs: {prefix} logs {name} -f"
            self.emit(job, display.submitted(job, hint))
        elif not a.wait:
            self.emit(job, "")
        return self.watch(name) if a.wait else EXIT_OK

    def cmd_wait(self) -> int:
        return self.watch(self.args.job)

    def cmd_status(self) -> int:
        job = self.client.describe(self.args.job)
        self.emit(job, display.job_detail(job))
        return EXIT_OK

    def cmd_list(self) -> int:
        a = self.args
        jobs = self.client.list_jobs(a.template, a.status, limit=max(1, a.limit), team=a.team)
        self.emit({"jobs": jobs}, display.jobs_table(jobs) if jobs else "no jobs")
        return EXIT_OK

    def cmd_queue(self) -> int:
        jobs = self.client.queue(team=self.args.team)
        self.emit({"jobs": jobs}, display.queue_table(jobs) if jobs else "queue is empty")
        return EXIT_OK

    def cmd_whoami(self) -> int:
        me = self.client.whoami()
        self.emit(me, display.whoami(me))
        return EXIT_OK

    def cmd_stop(self) -> int:
        job = self.client.stop(self.args.job)
        self.emit(job, display.stop_result(job))
        return EXIT_OK

    def cmd_logs(self) -> int:
        a = self.args
        self.client.describe(a.job)  # a clear NotFound for a mistyped name
        printed = 0
        for event in self.client.logs(a.job, follow=a.follow, poll_seconds=a.poll):
            printed += 1
            self.out.write((json.dumps(event) if a.json else display.log_line(event)) + "\n")
            self.out.flush()
        if not printed and not a.json:
            self.err.write(f"no log lines for {a.job} yet\n")
        return EXIT_OK

    # ---------------------------------------------------------------- watching
    def watch(self, name: str) -> int:
        stream = self.err if self.args.json else self.out
        live = display.ProgressDisplay(stream)
        try:
            progress = self.client.wait(name, self.args.poll, live.update, sleep=live.sleep)
        except KeyboardInterrupt:
            live.finish()
            self.err.write("\n" + display.stopped_watching(name, self.command_prefix()) + "\n")
            self.err.flush()
            return EXIT_INTERRUPTED
        finally:
            live.finish()
        return self.report(progress)

    def report(self, progress: Progress) -> int:
        """The outcome, from the launcher's last ``describe`` only (no SageMaker call)."""
        metrics = progress.final_metrics
        result = {
            **progress.job,
            "final_metrics": metrics,
            "spot_interruptions": progress.interruptions,
        }
        self.emit(result, display.outcome(progress, metrics))
        return EXIT_OK if progress.succeeded else EXIT_JOB_FAILED

    def command_prefix(self) -> str:
        """``ftl`` with the global options this run was given, to repeat in hints."""
        parts = ["ftl"]
        for flag, *_ in _GLOBALS:
            value = getattr(self.args, flag[2:].replace("-", "_"))
            if value:
                parts += [flag, shlex.quote(value)]
        return " ".join(parts)


def main(argv: Sequence[str] | None = None, client: LauncherClient | None = None) -> int:
    """The ``ftl`` console script; returns the exit status. ``client`` replaces the one the
    global options would build (for embedding and tests)."""
    args = build_parser().parse_args(argv)
    cli = Cli(args, sys.stdout, sys.stderr, client)
    try:
        return cli.run()
    except LauncherError as error:
        sys.stderr.write(error.line() + "\n")
        return EXIT_USAGE if error.is_client_error else EXIT_FAILURE
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
