"""``ftl``: submit, watch, queue and stop fine-tuning jobs from the terminal.

Exit status (docs/CLIENT.md's table): 0 done, 1 the launcher or AWS failed, 2 a bad command
line or a request the caller can fix (validation, unknown name, conflict, forbidden, quota,
configuration), 3 a watched job ended Failed, Stopped or FailedToStart, 4 ``ftl doctor``
found something that blocks, 130 interrupted
(Ctrl-C stops watching, never the job). With ``--json`` an error is a JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from ftl_client import display
from ftl_client.args import (
    GLOBAL_OPTIONS,
    UsageError,
    build_parser,
    parse_value,
    seconds,
    submit_request,
    sweep_request,
)
from ftl_client.client import LauncherClient, LauncherError, Progress
from jobmodel.contract.statuses import TERMINAL_STATUSES

# build_parser and the argument types live in ftl_client.args; imported from here still.
__all__ = ["build_parser", "main", "parse_value", "seconds"]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_JOB_FAILED = 3
EXIT_INTERRUPTED = 130


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
        job = self.client.submit(a.template, **submit_request(a))
        if a.dry_run:
            self.emit(job, display.dry_run(job))
            return EXIT_OK
        prefix, name = self.command_prefix(), job["job_name"]
        hint = f"watch: {prefix} wait {name}    logs: {prefix} logs {name} -f"
        return self.accepted(job, display.submitted, hint)

    def cmd_sweep(self) -> int:
        a = self.args
        answer = self.client.sweep(a.template, **sweep_request(a))
        if a.dry_run:
            self.emit(answer, display.sweep_dry_run(answer))
            return EXIT_OK
        prefix, name = self.command_prefix(), answer["job_name"]
        hint = f"watch: {prefix} wait {name}    stop: {prefix} stop {name}"
        return self.accepted(answer, display.sweep_started, hint)

    def accepted(
        self, job: dict[str, Any], render: Callable[[dict[str, Any], str | None], str], hint: str
    ) -> int:
        """What a submit or sweep the launcher accepted prints: its text (with ``hint`` unless
        ``--wait`` follows), or its JSON; then the watch when ``--wait``."""
        a = self.args
        if not a.json:
            self.emit(job, render(job, None if a.wait else hint))
        elif not a.wait:
            self.emit(job, "")
        return self.watch(job["job_name"]) if a.wait else EXIT_OK

    def cmd_wait(self) -> int:
        return self.watch(self.args.job)

    def cmd_status(self) -> int:
        if self.args.wait:
            return self.watch(self.args.job)
        job = self.client.describe(self.args.job)
        self.emit(job, display.job_detail(job))
        return EXIT_OK

    def cmd_list(self) -> int:
        a = self.args
        jobs = self.client.list_jobs(a.template, a.status, limit=a.limit, team=a.team)
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

    def cmd_models(self) -> int:
        from ftl_client.models_view import models_table

        a = self.args
        models = self.client.models(a.template, limit=a.limit, team=a.team)
        self.emit({"models": models}, models_table(models) if models else "no model versions")
        return EXIT_OK

    def cmd_review(self) -> int:
        from ftl_client.models_view import reviewed

        a = self.args
        answer = self.client.review(a.job, a.decision, a.description)
        self.emit(answer, reviewed(answer))
        return EXIT_OK

    def cmd_doctor(self) -> int:
        from ftl_client import doctor

        report = doctor.run(self.client)
        self.emit(report.to_dict(), doctor.render(report))
        return report.exit_status

    def cmd_stop(self) -> int:
        # The status before the stop tells "this call stopped it" (a queued job is Stopped at
        # once) from "it had already ended" (the launcher answers both with the job object).
        before = self.client.describe(self.args.job)
        if before.get("status") in TERMINAL_STATUSES:
            self.emit(before, display.stop_result(before, before.get("status")))
            return EXIT_OK
        job = self.client.stop(self.args.job)
        self.emit(job, display.stop_result(job, before.get("status")))
        return EXIT_OK

    def cmd_logs(self) -> int:
        a = self.args
        job = self.client.describe(a.job)  # a clear NotFound for a mistyped name
        printed = 0
        for event in self.client.logs(a.job, follow=a.follow, poll_seconds=a.poll):
            printed += 1
            self.out.write((json.dumps(event) if a.json else display.log_line(event)) + "\n")
            self.out.flush()
        if not printed and not a.json:
            if a.follow:  # followed to the end: what the job is now
                job = self.client.describe(a.job)
            self.err.write(display.no_log_lines(job) + "\n")
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
        for flag, *_ in GLOBAL_OPTIONS:
            value = getattr(self.args, flag[2:].replace("-", "_"))
            if value:
                parts += [flag, shlex.quote(value)]
        return " ".join(parts)


def main(argv: Sequence[str] | None = None, client: LauncherClient | None = None) -> int:
    """The ``ftl`` console script; returns the exit status. ``client`` replaces the one the
    global options would build (for embedding and tests)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
    except UsageError as mistake:
        as_json = "--json" in argv[: argv.index("--")] if "--" in argv else "--json" in argv
        return usage_error(mistake, as_json=as_json)
    cli = Cli(args, sys.stdout, sys.stderr, client)
    try:
        return cli.run()
    except UsageError as mistake:  # a rule across options, found once they are parsed
        return usage_error(mistake, as_json=args.json)
    except LauncherError as error:
        code = EXIT_USAGE if error.is_client_error else EXIT_FAILURE
        if args.json:
            body = {"error": error.to_dict(), "exit_status": code}
            sys.stdout.write(json.dumps(body, indent=2) + "\n")
            sys.stdout.flush()
        else:
            sys.stderr.write(error.line() + "\n")
        return code
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK


def usage_error(mistake: UsageError, *, as_json: bool) -> int:
    """A command-line mistake: one line (no usage block) and where to read the usage."""
    hint = f"{mistake.prog} --help"
    if as_json:
        body = {
            "error": {"type": "UsageError", "message": mistake.message, "help": hint},
            "exit_status": EXIT_USAGE,
        }
        sys.stdout.write(json.dumps(body, indent=2) + "\n")
    else:
        sys.stderr.write(f"error: {mistake.prog}: {mistake.message}\n  see: {hint}\n")
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
