"""The soak's sweeps (issue 37): some callers start sweeps, the tuner stand-in runs their trials,
and afterwards every sweep is checked against what the tuner ran.

* **Starting**: the first caller of each team (a *sweeper*) starts a sweep when its team has
  none running, while the run's budget of sweeps lasts (the first ones before the other
  callers start, so that the teams' instances are not all taken by jobs already):
  ``distilbert-spot``, 4 trials, 2 at a time, an hour each at most on one ``ml.g5.xlarge``
  (a per-trial maximum of 1.50 USD at the soak's price, a worst case of 6.00 USD), a cap of 1
  to 1.3 times the worst case, early stopping on half of them; a client token, retried with
  the same token after an error, as submits are. Each sweep gets a *plan*, in turn:
  ``complete`` (trials billed within their runtime, now and then one failed), ``cap`` (most
  trials billed past their runtime, as a price that rose or a retried trial would be, so the
  charged spend reaches the cap) and ``stop`` (its trials take ten times as long, and its
  sweeper stops it while they run). Sweepers and the other callers describe sweeps; sweepers
  stop theirs. All of that goes through the deployed trigger, under faults.
* **Trials**: the tuner stand-in (``sandbox/tuner.py``) is SageMaker itself here, so its calls
  are not failed. Each round of a thread of its own ends one running trial of each sweep
  (billed as its plan says), and the next round first describes that sweep through the
  trigger until an answer comes, as the trial's event would reach the platform (the stand-in
  sends none): a trial's end is seen before the next one ends, and a trial that starts
  meanwhile trains only once that describe is in. The trigger moves a sweep on only when it
  is described (or listed).
* **Settling**: faults off, every sweep of the ledger is driven to its end the same way.

Checks (:meth:`Sweeps.check`): each trial the tuner ended is charged in its sweep's record
exactly once, at its billable seconds' cost (none lost, none charged that did not end); the
record's spend is the sum of its trials' charges, and an ended sweep's cost is that spend; a
sweep's cost exceeds its cap by no more than ``max_parallel`` trials (the ones running when
the cap was reached), each at most the larger of the per-trial maximum and the largest trial
the sweep was billed (its trials billed past their runtime exceed that maximum by design);
every Completed sweep has exactly one registered model version, and no other sweep has one; no
tuning job the run created is missing from the ledger, and none runs for a sweep that failed to
start. The team-level checks (``bench/soak.py``: usage, instances given back, the month's
spend against its jobs' and sweeps' charges, announcements, evaluations) cover sweeps too.
"""

from __future__ import annotations

import math
import random
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from jobmodel.contract.statuses import TERMINAL_STATUSES
from jobmodel.money.pricing import cost_usd

TEMPLATE = "distilbert-spot"
TRIALS = 4
PARALLEL = 2
TRIAL_RUNTIME_S = 3600
TRIAL_TYPE = "ml.g5.xlarge"
PLANS = ("complete", "cap", "stop")
ENDED_TRIAL = ("Completed", "Failed", "Stopped")
SLOW = 0.1  # the share of rounds in which a sweep planned to be stopped ends a trial
SETTLE_ROUNDS = 200  # each round ends one trial of each live sweep and describes it

Call = Callable[[str, dict[str, Any]], dict[str, Any]]


def sweep_request(token: str, cap: float, *, early: bool) -> dict[str, Any]:
    return {
        "action": "sweep",
        "template": TEMPLATE,
        "job_name": "sw",
        "client_token": token,
        "instance_type": TRIAL_TYPE,
        "instance_count": 1,
        "max_runtime_seconds": TRIAL_RUNTIME_S,
        "ranges": {
            "learning_rate": {"min": 1e-5, "max": 1e-3, "scale": "Logarithmic"},
            "per_device_train_batch_size": {"values": [8, 16, 32]},
        },
        "objective": "eval_accuracy",
        "direction": "Maximize",
        "strategy": "Random",
        "max_trials": TRIALS,
        "max_parallel": PARALLEL,
        "early_stopping": "Auto" if early else "Off",
        "cap_usd": cap,
    }


class Sweeps:
    """The run's sweeps: who started which, their plans, and the trials the tuner runs."""

    def __init__(
        self,
        tuner: Any,
        *,
        budget: int,
        sweepers: int,
        seed: int,
        price: float,
        call: Call,
        on_answer: Callable[[str, str, str], None],
    ) -> None:
        self.tuner = tuner
        self.budget = budget
        self.sweepers = sweepers  # callers that start sweeps (one a team)
        self.rng = random.Random(seed)  # the trial driver's (the event pump's thread only)
        self.price = price
        self.call = call
        self.on_answer = on_answer  # (team, token, sweep name): a token's answer
        self.lock = threading.Lock()
        self.before = set(tuner.jobs) if tuner is not None else set()
        self.started = 0  # sweep requests that took from the budget
        self.plans: dict[str, str] = {}  # sweep name -> plan
        self.teams: dict[str, str] = {}  # sweep name -> team
        self.status: dict[str, str] = {}  # sweep name -> status in the last answer seen
        self.unobserved: set[str] = set()  # a trial ended; no describe answered since
        self.refused: Counter[str] = Counter()  # refused sweep requests, by error type
        self.refusals: list[str] = []  # their messages (the first few)
        self.rounds = 0  # the trial driver's rounds while the callers ran
        self.ended_under_faults = 0  # trials it ended then (the rest: while settling)
        self.tried: set[str] = set()  # teams whose sweeper's first sweep was answered
        self.opened = threading.Event()  # every team's first sweep was (or none will be)
        if budget <= 0:
            self.opened.set()

    # ------------------------------------------------------------------ callers
    def names(self, team: str) -> list[str]:
        with self.lock:
            return sorted(n for n, t in self.teams.items() if t == team)

    def live(self, team: str) -> list[str]:
        with self.lock:
            return sorted(
                n
                for n, t in self.teams.items()
                if t == team and self.status.get(n) not in TERMINAL_STATUSES
            )

    def wants_turn(self, team: str, rng: random.Random) -> bool:
        """Whether a sweeper's next call is about sweeps: a sweep to start (first thing, and
        whenever its team has none running while the budget lasts), else half its calls
        while one runs."""
        if self.live(team):
            return rng.random() < 0.5
        with self.lock:
            return self.started < self.budget

    def turn(self, team: str, rng: random.Random) -> None:
        """A sweeper's turn: start a sweep when the team has none running (budget left),
        else describe one of its sweeps, and stop it when its plan says so."""
        live = self.live(team)
        if not live:
            self._start(team, rng)
            return
        name = rng.choice(live)
        answer = self.describe(team, name)
        if self.plans.get(name) == "stop" and answer.get("status") == "InProgress":
            self.note(name, self.call(team, {"action": "stop", "job_name": name}))

    def describe(self, team: str, name: str) -> dict[str, Any]:
        answer = self.call(team, {"action": "describe", "job_name": name})
        self.note(name, answer)
        return answer

    def note(self, name: str, answer: Mapping[str, Any]) -> None:
        if "error" not in answer and answer.get("job_name") == name:
            with self.lock:
                self.status[name] = str(answer.get("status"))

    def _start(self, team: str, rng: random.Random) -> None:
        try:
            self._request(team, rng)
        finally:
            with self.lock:
                self.tried.add(team)
                if len(self.tried) >= min(self.budget, self.sweepers):
                    self.opened.set()

    def _request(self, team: str, rng: random.Random) -> None:
        with self.lock:
            if self.started >= self.budget:
                return
            self.started += 1
        token = uuid.UUID(int=rng.getrandbits(128)).hex[:16]
        worst = TRIALS * self.price * TRIAL_RUNTIME_S / 3600
        cap = math.ceil(worst * rng.uniform(1.0, 1.3) * 100) / 100
        request = sweep_request(token, cap, early=rng.random() < 0.5)
        for _ in range(3):  # the caller retries with the same token
            answer = self.call(team, dict(request))
            if "job_name" in answer:
                name = str(answer["job_name"])
                self.on_answer(team, token, name)
                with self.lock:
                    if name not in self.plans:  # each plan in turn, as sweeps are answered
                        self.plans[name] = PLANS[len(self.plans) % len(PLANS)]
                    self.teams[name] = team
                    self.status[name] = str(answer.get("status"))
                if answer.get("status") != "FailedToStart":
                    return
            elif answer.get("error", {}).get("type") in ("QuotaExceeded", "ValidationError"):
                error = answer["error"]
                with self.lock:
                    self.refused[str(error.get("type"))] += 1
                    if len(self.refusals) < 5:
                        self.refusals.append(str(error.get("message")))
                    if error.get("type") == "QuotaExceeded":
                        self.started -= 1  # the team's instances are busy: try later
                return

    # ------------------------------------------------------------------- trials
    def drive(self, *, settle: bool = False) -> None:
        """One round: each live sweep whose last ended trial the platform has seen ends one
        more trial; the others are described until an answer comes."""
        with self.lock:
            names = sorted(n for n in self.teams if self.status.get(n) not in TERMINAL_STATUSES)
            self.rounds += not settle
        for name in names:
            team = self.teams[name]
            if name in self.unobserved:
                if "error" not in self.describe(team, name):
                    self.unobserved.discard(name)
                continue
            if not settle and self.plans.get(name) == "stop" and self.rng.random() >= SLOW:
                continue  # its trials take longer: its sweeper stops it meanwhile
            if self._end_one_trial(name):
                self.ended_under_faults += not settle
            elif settle or self.rng.random() < 0.3:
                self.describe(team, name)  # nothing to end: the tuner's end, or a claim's

    def settle(self, ledger_sweeps: Mapping[str, Mapping[str, Any]]) -> list[str]:
        """Faults off: every sweep of the ledger driven to its end (those whose start's answer
        was lost too); the ones that never end, as problems."""
        with self.lock:
            for name, job in ledger_sweeps.items():
                self.teams.setdefault(name, str(job.get("team")))
                self.plans.setdefault(name, "complete")
                self.status[name] = str(job.get("status"))
        for _ in range(SETTLE_ROUNDS):
            if not any(s not in TERMINAL_STATUSES for s in self.status.values()):
                return []
            self.drive(settle=True)
        return [
            f"sweep {n} still {s} after {SETTLE_ROUNDS} settling rounds"
            for n, s in sorted(self.status.items())
            if s not in TERMINAL_STATUSES
        ]

    def _end_one_trial(self, name: str) -> bool:
        """End one running trial of ``name`` as its plan bills it; False when none runs."""
        tuner = self.tuner
        try:
            tuning = tuner.describe_hyper_parameter_tuning_job(HyperParameterTuningJobName=name)
        except Exception:  # noqa: BLE001 - not created (a start in flight or never made)
            return False
        if tuning["HyperParameterTuningJobStatus"] != "InProgress":
            return False
        training = []
        for trial in tuner.trials(name):
            detail = tuner.describe_training_job(TrainingJobName=trial)
            if detail["TrainingJobStatus"] != "InProgress":
                continue
            try:
                if detail["SecondaryStatus"] == "Starting":
                    tuner.run_trial(trial)  # its instances are up: it trains from now
                training.append(trial)
            except ValueError:
                continue  # ended meanwhile (a stop)
        if not training:
            return False
        trial = self.rng.choice(training)
        status, billable = self._bill(self.plans.get(name, "complete"))
        try:
            tuner.finish_trial(
                trial, round(self.rng.uniform(0.6, 0.95), 4), status=status, billable=billable
            )
        except ValueError:
            return False  # stopped meanwhile
        self.unobserved.add(name)
        return True

    def _bill(self, plan: str) -> tuple[str, int]:
        """A trial's end as its sweep's plan has it: (status, billable seconds)."""
        roll = self.rng.random()
        if plan == "complete" and roll < 0.1:
            return "Failed", int(TRIAL_RUNTIME_S * self.rng.uniform(0.1, 0.5))
        if plan == "cap" and roll < 0.8:  # past its runtime: a price that rose, a retry
            return "Completed", int(TRIAL_RUNTIME_S * self.rng.uniform(2.0, 3.0))
        return "Completed", int(TRIAL_RUNTIME_S * self.rng.uniform(0.3, 1.0))

    # -------------------------------------------------------------------- check
    def check(
        self, jobs: Mapping[str, Mapping[str, Any]], versions: Counter[str], teams: tuple[str, ...]
    ) -> tuple[dict[str, Any], list[str]]:
        """The sweeps' invariants against the tuner: counts, and the problems found.
        ``versions``: registered model versions by the job they are of."""
        problems: list[str] = []
        sweeps = {n: j for n, j in jobs.items() if j.get("kind") == "sweep"}
        counts: dict[str, Any] = {
            "sweeps": len(sweeps),
            "statuses": dict(Counter(str(j["status"]) for j in sweeps.values())),
            "plans": dict(Counter(self.plans.get(n, "?") for n in sweeps)),
            "capped": sum("cap" in str(j.get("failure_reason") or "") for j in sweeps.values()),
            "trials_ended": 0,
            "trials_charged": 0,
            "lost_trials": 0,
            "charge_mismatches": 0,
            "cap_overruns": 0,
            "versions": 0,
            "lost_versions": 0,
            "largest_overrun_usd": 0.0,
            "driver_rounds": self.rounds,
            "trials_ended_under_faults": self.ended_under_faults,
        }
        for name, job in sorted(sweeps.items()):
            ended = self._ended_trials(name)
            if job["status"] == "FailedToStart" and name in self.tuner.jobs:
                problems.append(f"sweep {name} FailedToStart, but its tuning job exists")
            elif job["status"] not in ("FailedToStart", "Submitting") and name not in (
                self.tuner.jobs
            ):
                problems.append(f"sweep {name} is {job['status']}; the tuner never had it")
            self._check_charges(name, job, ended, counts, problems)
            self._check_cap(name, job, counts, problems)
            want = 1 if job["status"] == "Completed" else 0
            if versions.get(name, 0) != want or (want and not job.get("model_package_arn")):
                counts["lost_versions"] += 1
                problems.append(
                    f"sweep {name} {job['status']}: {versions.get(name, 0)} registered versions "
                    f"(record: {job.get('model_package_arn')})"
                )
            elif want:
                counts["versions"] += 1
        for name in sorted(set(self.tuner.jobs) - self.before):
            if name.split("-")[0] in teams and name not in jobs:
                problems.append(f"tuning job {name} started but not in the ledger")
        return counts, problems

    def _ended_trials(self, name: str) -> dict[str, int]:
        """The tuner's ended trials of ``name``: trial -> billable seconds."""
        if name not in self.tuner.jobs:
            return {}
        out = {}
        for trial in self.tuner.trials(name):
            detail = self.tuner.describe_training_job(TrainingJobName=trial)
            if detail["TrainingJobStatus"] in ENDED_TRIAL:
                out[trial] = int(detail.get("BillableTimeInSeconds") or 0)
        return out

    def _check_charges(
        self,
        name: str,
        job: Mapping[str, Any],
        ended: Mapping[str, int],
        counts: dict[str, Any],
        problems: list[str],
    ) -> None:
        """Each ended trial charged once at its cost; the spend their sum."""
        entries = job.get("sweep_trials") or {}
        charged = {t: e for t, e in entries.items() if "cost_usd" in e}
        counts["trials_ended"] += len(ended)
        counts["trials_charged"] += len(charged)
        count = int((job.get("sweep") or {}).get("trial_instance_count") or 1)
        terminal = job["status"] in TERMINAL_STATUSES
        lost = sorted(set(ended) - set(charged)) if terminal else []
        if lost:
            counts["lost_trials"] += len(lost)
            problems.append(f"sweep {name} {job['status']}: trials ended, never charged {lost}")
        for trial, entry in sorted(charged.items()):
            if trial not in ended:
                counts["charge_mismatches"] += 1
                problems.append(f"sweep {name}: {trial} charged but the tuner never ended it")
                continue
            want = cost_usd(self.price, count, ended[trial])
            if entry.get("billable_seconds") != ended[trial] or entry["cost_usd"] != want:
                counts["charge_mismatches"] += 1
                problems.append(
                    f"sweep {name}: {trial} charged {entry['cost_usd']} for "
                    f"{entry.get('billable_seconds')} s; the tuner billed {ended[trial]} s "
                    f"({want} USD)"
                )
        total = round(sum(float(e["cost_usd"]) for e in charged.values()), 4)
        prior = float(job.get("prior_cost_usd") or 0)
        spend = float((job.get("sweep") or {}).get("spend_usd") or 0)
        cost = job.get("cost_usd")
        if abs(prior - total) > 1e-4 or abs(spend - total) > 1e-4:
            counts["charge_mismatches"] += 1
            problems.append(
                f"sweep {name}: charged {prior} (spend {spend}); its trials' charges add up to "
                f"{total}"
            )
        if terminal and (cost is None or abs(float(cost) - total) > 1e-4):
            counts["charge_mismatches"] += 1
            problems.append(f"sweep {name} {job['status']}: cost {cost}, trials {total}")

    def _check_cap(
        self, name: str, job: Mapping[str, Any], counts: dict[str, Any], problems: list[str]
    ) -> None:
        """The cost over the cap: at most max_parallel trials (those running at the cap)."""
        sweep = job.get("sweep") or {}
        cap = sweep.get("cap_usd")
        if cap is None:
            return
        limit = int((sweep.get("trials") or {}).get("parallel") or PARALLEL)
        per_trial = float(sweep.get("worst_case_usd") or 0) / max(
            1, int((sweep.get("trials") or {}).get("max") or TRIALS)
        )
        costs = [
            float(e["cost_usd"])
            for e in (job.get("sweep_trials") or {}).values()
            if "cost_usd" in e
        ]
        largest = max([per_trial, *costs])
        over = round(float(job.get("prior_cost_usd") or 0) - float(cap), 4)
        counts["largest_overrun_usd"] = max(counts["largest_overrun_usd"], over)
        if over > limit * largest + 1e-4:
            counts["cap_overruns"] += 1
            problems.append(
                f"sweep {name}: cost {job.get('prior_cost_usd')} is over its cap {cap} by "
                f"{over}, more than {limit} trials of at most {largest}"
            )
