"""The submit request's fields, declared once: one row per field in :data:`FIELDS`.

Each row says the field's JSON name and type (the HTTP body's schema), whether it is required,
its rule in words (the ``rule`` cell of docs/API.md's submit table), how it is read and checked
(``read``), whether the request keeps it and under which attribute, whether it is part of the
request's identity (the idempotency fingerprint), and its ``ftl submit`` flag. What reads them:

* ``request.validate_submit``: the allowed fields, then every row's ``read`` in table order
  (so a payload with two mistakes is refused for the first row's), then ``SubmitRequest``;
* ``SubmitRequest.to_dict`` / ``fingerprint``: :func:`form` and :func:`identity`;
* ``ftl_client.args``: the submit command's flags and the request they make;
* docs/API.md's submit table (checked by a test) and the HTTP body's JSON Schema, rendered by
  ``jobmodel.requests.submit_docs`` (``python -m jobmodel.requests.submit_docs --write
  docs/API.md``).

Generic rules (``switch``: a boolean; ``matching``: a patterned string; ``up_to``: an integer
from 1 to a template's bound; with the row types, in ``_fields``) need no code; a field with
structure or rules across fields names its reader in ``submit_parts``. Standard library only.
Adding a field: README, "Adding a submit field".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import _rules as R
from ..after_training.tracking import TrackingConfig
from ..after_training.tracking_job import submit_tracking
from . import submit_parts as P
from ._fields import CliFlag, Reading, SubmitField, matching, switch, up_to

__all__ = [
    "FIELDS",
    "SUBMIT_FIELDS",
    "CliFlag",
    "Reading",
    "SubmitField",
    "form",
    "identity",
    "read_all",
]

MAX_JOB_NAME_PREFIX = 128


# -- readers with more to them (submit_parts) ----------------------------------------------


def _template(r: Reading, name: str) -> str:
    r.template = P.template(r.payload, r.catalog)
    return r.template.name


def _instance_count(r: Reading, name: str) -> int:
    count = P.instance_count(r.payload, r.spec, r.values["instance_type"])
    P.fits_queue(count, r.queue_capacity if r.queued else None)
    return count


def _max_wait(r: Reading, name: str) -> int | None:
    return P.max_wait(
        r.payload, r.spec, spot=r.values["spot"], runtime=r.values["max_runtime_seconds"]
    )


_OBJECT_OF_STRINGS = {"additionalProperties": {"type": "string"}}
_SCALARS = ["string", "number", "boolean", "null"]

# The rows, in the order they are read; ``rule`` is docs/API.md's cell, word for word.
FIELDS: tuple[SubmitField, ...] = (
    SubmitField(
        name="action",
        json_type="string",
        rule="direct door only: `submit` when given (it may be left out); an HTTP body may not "
        "carry it (the route chooses the action)",
        read=lambda r, _: P.action(r.payload),
        kept=False,
        form="never",
        http=False,
        schema={"enum": ["submit"]},
    ),
    SubmitField(
        name="template",
        json_type="string",
        required=True,
        rule="a name the deployed catalog holds (else `NotFound` on `template`)",
        read=_template,
        cli=CliFlag(flag="template", help="template name (see `ftl templates`)"),
        form="always",
    ),
    SubmitField(
        name="job_name",
        json_type="string",
        rule="a prefix of at most 128 characters; every run of characters outside "
        "`[a-zA-Z0-9-]` becomes `-`, edge dashes are dropped, it is cut to fit, and "
        "`-YYYYMMDD-HHMM-xxxx` (UTC, 4 random hex) is appended: the final name is at most 63 "
        "characters, `[a-zA-Z0-9](-*[a-zA-Z0-9])*`. Default: the template name",
        read=lambda r, _: P.job_name_prefix(r.payload, r.spec, MAX_JOB_NAME_PREFIX),
        cli=CliFlag(flag="--name", metavar="PREFIX", help="job name prefix"),
        attribute="job_name_prefix",
        form="always",
        schema={"maxLength": MAX_JOB_NAME_PREFIX},
    ),
    SubmitField(
        name="hyperparameters",
        json_type="object",
        rule="only keys the template lets callers override; JSON scalars; each value checked "
        "against the template's bounds or choices; a string value at most 256 characters "
        '(UTF-16 code units; else "hyperparameters.<key> must be at most 256 characters '
        '(UTF-16 code units), got 300 (template <template>)"), and every value as SageMaker '
        "receives it, JSON-encoded as the SageMaker SDK does (`json.dumps`: quotes around a "
        "string, non-ASCII as `\\uXXXX` escapes), at most 256 characters (else "
        '"hyperparameters.<key> must encode to at most 256 characters, got 258"); both a '
        "`ValidationError` on `hyperparameters.<key>`",
        read=lambda r, _: P.hyperparameters(r.payload, r.spec),
        cli=CliFlag(
            flag="--set",
            dest="hyperparameters",
            metavar="KEY=VALUE",
            value="json-pairs",
            help="override a hyperparameter; the value is JSON when it parses (3e-5, true, 8), "
            "else a string; repeatable",
        ),
        form="always",
        schema={"additionalProperties": {"type": _SCALARS}},
    ),
    SubmitField(
        name="instance_type",
        json_type="string",
        rule="one of the template's allowed types; must support the template's distribution "
        "(smddp types; EFA for more than one instance)",
        read=lambda r, _: P.instance_type(r.payload, r.spec),
        cli=CliFlag(flag="--instance-type", metavar="TYPE", help="e.g. ml.p4d.24xlarge"),
        form="always",
    ),
    SubmitField(
        name="instance_count",
        json_type="integer",
        rule="1 to the template's maximum; more than 1 needs a distributed template",
        read=_instance_count,
        cli=CliFlag(flag="--instances", metavar="N", value="int", help="instance count"),
        form="always",
        schema={"minimum": 1},
    ),
    SubmitField(
        name="spot",
        json_type="boolean",
        rule="defaults to the template's setting (spot is the default for every shipped "
        "template); needs checkpointing",
        read=lambda r, _: P.spot(r.payload, r.spec),
        cli=CliFlag(
            flag="--spot",
            value="bool",
            help="managed spot training (default: the template's setting)",
        ),
        form="always",
    ),
    SubmitField(
        name="max_runtime_seconds",
        json_type="integer",
        rule="1 to the template's maximum (SageMaker's own cap is 28 days)",
        read=up_to(lambda s: s.default_runtime_seconds, lambda s: s.max_runtime_seconds),
        cli=CliFlag(
            flag="--max-runtime", metavar="SECONDS", value="duration", help="e.g. 36000, 10h"
        ),
        form="always",
        schema={"minimum": 1, "maximum": R.MAX_RUNTIME_LIMIT},
    ),
    SubmitField(
        name="max_wait_seconds",
        json_type="integer",
        rule="spot only; at least `max_runtime_seconds`; it covers the wait for capacity plus "
        "run time",
        read=_max_wait,
        cli=CliFlag(
            flag="--max-wait", metavar="SECONDS", value="duration", help="spot only, e.g. 20h"
        ),
        form="always",
        schema={"minimum": 1},
    ),
    SubmitField(
        name="inputs",
        json_type="object",
        rule="channel name to `s3://` URI; channels the template declares; buckets the platform "
        "allows (teams: the team's prefix or buckets); a URI at most 1024 characters, counted "
        'in UTF-16 code units (`ValidationError` on `inputs.<channel>`: "inputs.train must be '
        'at most 1024 characters (UTF-16 code units), got 1214")',
        read=lambda r, _: P.inputs(r.payload, r.spec, r.platform, r.team),
        cli=CliFlag(
            flag="--input",
            dest="inputs",
            metavar="CHANNEL=S3URI",
            value="pairs",
            help="input channel, e.g. train=s3://bucket/prefix/; repeatable",
        ),
        form="always",
        schema=_OBJECT_OF_STRINGS,
    ),
    SubmitField(
        name="tags",
        json_type="object",
        rule="merged with the platform's tags; no `aws:` or `ftl:` keys; at most 50 tags in "
        "all, the launcher's own `ftl:` tags counted (one more, `ftl:job-name`, in queue mode "
        "and for a template with a `capacity_chain`, in either mode) (key 1-128, value 0-256 "
        "characters of letters, digits, spaces and `_.:/=+-@`; lengths are counted in UTF-16 "
        "code units, so a character outside the Basic Multilingual Plane, such as an emoji, "
        "counts 2). The total is checked with or without caller tags. Refused with a "
        "`ValidationError` on `tags`: \"tags: 45 caller tags make 51 with the platform's, "
        "template's and launcher's; SageMaker allows 50\"; on `tags.<key>`: \"tag key must be "
        "1 to 128 characters (UTF-16 code units), got 130\", \"tag 'k' value must be at most "
        '256 characters (UTF-16 code units), got 258"',
        read=lambda r, _: P.tags(r.payload, r.spec, r.platform, r.team, queued=r.queued),
        cli=CliFlag(
            flag="--tag",
            dest="tags",
            metavar="KEY=VALUE",
            value="pairs",
            help="tag the job; repeatable",
        ),
        form="always",
        schema=_OBJECT_OF_STRINGS,
    ),
    SubmitField(
        name="priority",
        json_type="integer",
        rule="queue mode only (see [Queue mode](#queue-mode)): an integer in the template's "
        '`queue_priority_range` (`ValidationError` on `priority`: "priority must be from 0 to '
        "100 for template distilbert-spot, got 101\"); default the template's "
        "`queue_priority`. In direct mode any `priority` is a `ValidationError` on `priority` "
        "(priorities apply only when the platform queues jobs, `ftl:scheduler` = `queue`)",
        read=lambda r, _: P.priority(r.payload, r.spec, queued=r.queued),
        cli=CliFlag(flag="--priority", metavar="N", value="int", help="queue mode only, e.g. 80"),
        schema={"minimum": R.MIN_QUEUE_PRIORITY, "maximum": R.MAX_QUEUE_PRIORITY},
    ),
    SubmitField(
        name="client_token",
        json_type="string",
        rule="1-64 of `[A-Za-z0-9._:-]`; idempotency key: the same token with the same "
        "request returns the first job; with a different request it is a `Conflict`",
        read=matching(R.CLIENT_TOKEN_RE.pattern, "1 to 64 characters of [A-Za-z0-9._:-]"),
        cli=CliFlag(
            flag="--token",
            metavar="TOKEN",
            help="idempotency key (the same token never starts two jobs)",
        ),
        form="always",
        fingerprint=False,  # two submits with one token are one request when the rest matches
        schema={"pattern": f"^{R.CLIENT_TOKEN_RE.pattern}$"},
    ),
    SubmitField(
        name="dry_run",
        json_type="boolean",
        rule="`true`: run every check and return the estimate and the rendered request, start "
        "nothing, write nothing",
        read=switch(False),
        cli=CliFlag(
            flag="--dry-run",
            value="switch",
            help="run every check and print the estimate; start nothing",
        ),
        form="never",  # how this call runs, not what it asks for
    ),
    SubmitField(
        name="capacity",
        json_type="array",
        rule="templates with a capacity chain only (see [Capacity](#capacity)): the steps of "
        'the template\'s `capacity_chain` to use, e.g. `["on-demand", "training-plan"]`, '
        "each once (run in the template's order); default the whole chain. On a template "
        "without a chain, an unknown step or a repeated one: `ValidationError` on `capacity`",
        read=lambda r, _: P.capacity(r.payload, r.spec),
        cli=CliFlag(
            flag="--capacity",
            metavar="STEP",
            value="list",
            help="a step of the template's capacity chain to use (spot, on-demand, "
            "training-plan); repeatable; default: the whole chain",
        ),
        schema={"items": {"type": "string"}, "minItems": 1, "uniqueItems": True},
    ),
    SubmitField(
        name="tracking",
        json_type="boolean",
        rule="`true` or `false`: whether the job logs to its team's MLflow run (see "
        "[Experiment tracking](#experiment-tracking)). Default: the template's `tracking`, else "
        "the platform's `ftl:mlflow` `default`. `false` always works; `true` is a "
        "`ValidationError` on `tracking` when the platform has no MLflow server for the team "
        '("tracking needs an MLflow tracking server and this platform has none (context '
        'ftl:mlflow); leave tracking out"), the template sets `tracking: false` ("template t '
        'turns tracking off (tracking: false); leave tracking out") or the template is '
        'network-isolated ("template t is network-isolated (network_isolation): its container '
        'cannot reach MLflow, so it cannot be tracked; leave tracking out"). Absent, it is left '
        "out of the request's fingerprint",
        read=lambda r, _: submit_tracking(
            r.payload, r.spec, r.tracking or TrackingConfig(), r.team
        ),
        cli=CliFlag(
            flag="--tracking",
            value="bool",
            help="log the job to its MLflow run (default: the template's, else the platform's)",
        ),
    ),
)

SUBMIT_FIELDS: frozenset[str] = frozenset(f.name for f in FIELDS)


def read_all(reading: Reading) -> dict[str, Any]:
    """Every row's value, read in table order; the ``SubmitRequest`` keyword arguments."""
    for row in FIELDS:
        reading.values[row.name] = row.read(reading, row.name)
    return {row.attr: reading.values[row.name] for row in FIELDS if row.kept}


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def _set(value: Any, omit: Any) -> bool:
    """Whether ``value`` is not the row's ``omit`` (``1`` is not ``True`` here)."""
    return value is not omit and not (type(value) is type(omit) and value == omit)


def form(request: object) -> dict[str, Any]:
    """A request's plain JSON-able form: the rows whose ``form`` keeps them (by attribute)."""
    body: dict[str, Any] = {}
    for row in FIELDS:
        value = getattr(request, row.attr, None) if row.kept else None
        if row.form == "always" or (row.form == "when set" and _set(value, row.omit)):
            body[row.attr] = _plain(value)
    return body


def identity(request: object) -> dict[str, Any]:
    """The part of :func:`form` that is the request's identity (what the fingerprint hashes)."""
    return identity_of(form(request))


def identity_of(body: Mapping[str, Any]) -> dict[str, Any]:
    """The identity part of a request's form (:func:`form`'s answer)."""
    leave_out = {row.attr for row in FIELDS if not row.fingerprint}
    return {k: v for k, v in body.items() if k not in leave_out}
