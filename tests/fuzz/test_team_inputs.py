"""Property: in teams mode an input is accepted exactly when it lies under the team's prefix of
the data bucket or in one of the team's buckets (docs/API.md, Data layout)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from jobmodel import PlatformConfig, ValidationError, shipped_catalog, validate_submit
from jobmodel._rules import bucket_of_s3_uri
from jobmodel.teams import TeamsConfig
from testsupport import TRIGGER_ENV

PLATFORM = PlatformConfig.from_env(TRIGGER_ENV)
CATALOG = shipped_catalog()
# Two teams whose names share a start ("nlp", "nlp2"); names that extend another with "-" are
# refused (TeamsConfig), and keys under "nlp-2/" still must not pass as team nlp's.
TEAMS = TeamsConfig.parse(
    [
        {"name": "nlp", "principals": ["arn:aws:iam::123456789012:role/nlp"], "buckets": ["nlp-x"]},
        {"name": "nlp2", "principals": ["arn:aws:iam::123456789012:role/nlp2"]},
    ]
)
NLP = TEAMS.get("nlp")
KEY = st.text(alphabet="abcnlp-2/._", min_size=0, max_size=20)
BUCKET = st.sampled_from([PLATFORM.data_bucket, "nlp-x", "other-bucket", "nlp-2"])


@settings(max_examples=300, deadline=None)
@given(bucket=BUCKET, key=KEY)
def test_team_inputs(bucket: str, key: str) -> None:
    uri = f"s3://{bucket}/{key}"
    request = {"template": "distilbert-spot", "inputs": {"train": uri}}
    try:
        req = validate_submit(request, CATALOG, PLATFORM, team=NLP)
    except ValidationError as err:
        accepted, field = False, err.field
    else:
        accepted, field = True, None
    own = bucket == PLATFORM.data_bucket and key.startswith("nlp/") and len(key) > len("nlp/")
    if accepted:
        assert own or bucket == "nlp-x", uri
        assert req.inputs["validation"].startswith(f"s3://{PLATFORM.data_bucket}/nlp/")
    else:
        assert field == "inputs.train"
        # A well-formed URI under the team's own prefix or bucket is never refused.
        well_formed = bucket_of_s3_uri(uri)[0] is not None
        assert not (well_formed and (own or bucket == "nlp-x")), uri
