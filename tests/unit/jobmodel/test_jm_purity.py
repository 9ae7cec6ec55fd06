"""The job model stays standard-library only, importable on its own, and fast."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import jobmodel as jm

PACKAGE = Path(jm.__file__).parent


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_only_standard_library_imports() -> None:
    files = sorted(PACKAGE.rglob("*.py"))
    assert files
    for path in files:
        outside = {
            m for m in _imports(path) if m not in sys.stdlib_module_names and m != "__future__"
        }
        assert not outside, f"{path.name} imports {outside}"


def test_import_pulls_in_no_aws_or_cdk() -> None:
    heavy = ("boto3", "botocore", "aws_cdk", "sagemaker", "constructs")
    code = (
        "import sys, jobmodel; jobmodel.shipped_catalog();"
        f"print(','.join(m for m in {heavy!r} if m in sys.modules))"
    )
    root = PACKAGE.parent
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


def test_catalog_file_ships_inside_the_package() -> None:
    assert (PACKAGE / "templates" / "shipped_templates.json").is_file()
    assert (PACKAGE / "money" / "prices.json").is_file()
