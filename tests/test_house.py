"""The job model's rooms (issue 29): a short top level, subpackages by concept that say what
they may import, and no import cycle. Pure ``ast`` and file-system checks."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "jobmodel"
MAX_TOP_LEVEL_MODULES = 12
# The list may wrap over lines; it ends at the first full stop.
MAY_IMPORT = re.compile(r"^May import \(within jobmodel\): ([^.]+?)\.", re.MULTILINE)

# What each top-level module may import (subpackages say it in their docstring). The
# package's own ``__init__`` re-exports the public surface and may import anything.
TOP_LEVEL: dict[str, set[str]] = {
    "_rules": set(),
    "instances": set(),
    "regions": set(),
    "teams": {"contract", "_rules"},
    "platform": {"contract", "_rules"},
    "locations": {"contract", "platform", "_rules"},
    "render": {
        "contract",
        "templates",
        "requests",
        "platform",
        "_rules",
        "instances",
        "locations",
        "capacity",
        "after_training",
    },
    "fleet_metrics": {"money", "jobs", "contract"},
    # a submit's whole decision (issue 35): above the rooms it composes
    "admission": {
        "after_training",
        "capacity",
        "contract",
        "evaluation",
        "jobs",
        "locations",
        "money",
        "platform",
        "render",
        "requests",
        "teams",
        "templates",
    },
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {
        module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts
    }


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The jobmodel modules ``name`` imports, anywhere in it (``TYPE_CHECKING`` blocks and
    function bodies too: a cycle hidden there is still a cycle)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "jobmodel")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "jobmodel":
                continue
            for alias in node.names:
                child = f"{target}.{alias.name}"
                found.add(child if child in known else target)
    return {m for m in found if m in known and m != name}


def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: imports(name, path, known) for name, path in found.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def subpackages() -> list[Path]:
    return sorted(p.parent for p in PACKAGE.glob("*/__init__.py"))


def room(module: str) -> str:
    """The subpackage or top-level module ``jobmodel.x[.y]`` belongs to."""
    return module.split(".")[1] if "." in module else "__init__"


def allowed() -> dict[str, set[str]]:
    rooms = {name: set(deps) for name, deps in TOP_LEVEL.items()}
    for pkg in subpackages():
        doc = ast.get_docstring(ast.parse((pkg / "__init__.py").read_text())) or ""
        match = MAY_IMPORT.search(doc)
        assert match, f"jobmodel/{pkg.name}/__init__.py does not say what it may import"
        said = match.group(1)
        rooms[pkg.name] = set() if said == "nothing" else set(re.split(r",\s*", said))
    return rooms


def test_the_top_level_holds_at_most_twelve_modules():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


def test_every_top_level_module_and_subpackage_has_its_row():
    rooms = allowed()
    top = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    assert top == set(TOP_LEVEL), "add the new top-level module to TOP_LEVEL"
    for name, deps in rooms.items():
        assert deps <= set(rooms), f"{name} names rooms that do not exist: {deps - set(rooms)}"


def test_each_subpackage_says_what_it_holds_and_may_import():
    for pkg in subpackages():
        doc = ast.get_docstring(ast.parse((pkg / "__init__.py").read_text())) or ""
        assert "Holds:" in doc and MAY_IMPORT.search(doc), pkg.name
        held = sorted(p.stem for p in pkg.glob("*.py") if p.stem != "__init__")
        missing = [m for m in held if f"``{m}``" not in doc]
        assert not missing, f"jobmodel/{pkg.name}/__init__.py does not name {missing}"


def test_no_import_cycle_among_job_model_modules():
    assert cycles(graph()) == []


def test_the_rooms_themselves_form_no_cycle():
    rooms = allowed()
    assert cycles({name: deps & set(rooms) for name, deps in rooms.items()}) == []


def test_each_room_imports_only_what_it_says():
    rooms = allowed()
    wrong = [
        f"{a} imports {b}"
        for a, deps in sorted(graph().items())
        for b in sorted(deps)
        if room(a) != "__init__" and room(a) != room(b) and room(b) not in rooms[room(a)]
    ]
    assert wrong == []


def test_no_job_model_module_imports_the_package_root():
    # The root re-exports the public surface from everywhere: importing it from inside
    # would tie every module to every other.
    assert [a for a, deps in graph().items() if "jobmodel" in deps and a != "jobmodel"] == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ({"a": {"b"}, "b": {"a"}, "c": set()}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
    ],
)
def test_the_cycle_check_sees_a_cycle(source, expected):
    assert cycles(source) == expected


def test_the_import_reader_sees_type_checking_and_relative_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "jobmodel" / "rooms"
    pkg.mkdir(parents=True)
    (tmp_path / "jobmodel" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text(
        "from typing import TYPE_CHECKING\nfrom .. import top\n"
        "if TYPE_CHECKING:\n    from .b import X\n"
    )
    (pkg / "b.py").write_text("def f():\n    from jobmodel.rooms import a\n")
    (tmp_path / "jobmodel" / "top.py").write_text("")
    monkeypatch.setattr("tests.test_house.ROOT", tmp_path)
    monkeypatch.setattr("tests.test_house.PACKAGE", tmp_path / "jobmodel")
    edges = graph()
    assert edges["jobmodel.rooms.a"] == {"jobmodel.top", "jobmodel.rooms.b"}
    assert cycles(edges) == [["jobmodel.rooms.a", "jobmodel.rooms.b"]]


# Issue 35: the job record is typed (``jobmodel.jobs.job``) and read through the ledger's
# codec (``ftl_ledger.job_codec``): no string-keyed read of a record (``job["key"]``,
# ``record.get("key")``) anywhere else; 224 in 30 files when the codec came, none since.
# Checked under the names a record goes by in the code; a write (``seen["k"] = v``) is not a
# read. The one exception: the ledger write's merge compares the record as read with an
# observation (a plain update) key by key, with one ranking for both
# (``jobs.queue_state._status_key`` and ``_batch_key``).
RAW_RECORD_READ = re.compile(
    r"\b(?:job|record|current|fresh|before|after|seen|claimed)"
    r"""(?:\.get\(["']|\[(["'])(?![^"']*\1\]\s*=(?!=)))"""
)
RAW_RECORD_READS = {"jobmodel/jobs/queue_state.py": 5}


def raw_record_reads(root: Path) -> dict[str, int]:
    found: dict[str, int] = {}
    for top in ("jobmodel", "lambda"):
        for path in sorted((root / top).rglob("*.py")):
            count = len(RAW_RECORD_READ.findall(path.read_text()))
            if count:
                found[path.relative_to(root).as_posix()] = count
    return found


def test_no_string_keyed_read_of_the_job_record():
    found = raw_record_reads(ROOT)
    assert found == RAW_RECORD_READS, (
        f"read the record through ftl_ledger.job_codec (the typed Job), not job[...]: {found}"
    )


def test_the_record_read_check_sees_a_new_read(tmp_path):
    (tmp_path / "lambda").mkdir()
    (tmp_path / "jobmodel").mkdir()
    (tmp_path / "lambda" / "new.py").write_text(
        'a = job["status"]\nb = job.get("team")\nc = current["attempt"] == 1\n'
        'd = after.get("cost_usd")\nseen["job_name"] = a\ne = token["job_name"]\n'
        "f = f\"{record['job_name']}\"\n"
    )
    assert raw_record_reads(tmp_path) == {"lambda/new.py": 5}
