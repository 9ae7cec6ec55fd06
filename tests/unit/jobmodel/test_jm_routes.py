"""The route table against docs/API.md's door table, and its matching and path building."""

from __future__ import annotations

import re
from pathlib import Path

from jobmodel.contract.routes import ACTIONS, ROUTES, match, route_for

API_MD = Path(__file__).resolve().parents[3] / "docs" / "API.md"


def test_the_table_is_the_one_docs_api_lists():
    rows = re.findall(
        r"^\| [^|]+ \| `\{\"action\": \"(\w+)\"[^|]*\| `(GET|POST) ([^`?]+)",
        API_MD.read_text(),
        re.M,
    )
    documented = {
        (action, method, path.replace("{N}", "{job_name}")) for action, method, path in rows
    }
    assert documented == {(r.action, r.method, r.path) for r in ROUTES}
    assert set(ACTIONS) == {r.action for r in ROUTES}


def test_match_takes_path_parameters_and_refuses_the_rest():
    route, params = match("POST", ["jobs", "j-1", "stop"])
    assert (route.action, params) == ("stop", {"job_name": "j-1"})
    assert match("GET", ["jobs", ""]) is None
    assert match("DELETE", ["jobs"]) is None
    assert match("GET", ["jobs", "a", "b"]) is None


def test_url_path_quotes_parameters_and_adds_the_query():
    assert route_for("describe").url_path({"job_name": "a/b c"}) == "/jobs/a%2Fb%20c"
    assert (
        route_for("list").url_path({"status": "Failed", "limit": 5})
        == "/jobs?status=Failed&limit=5"
    )
    assert route_for("submit").body({"template": "t"}) == {"template": "t"}
    assert route_for("stop").body({"job_name": "x"}) is None
    assert route_for("templates").glob == "/templates"
    assert route_for("stop").glob == "/jobs/*/stop"
