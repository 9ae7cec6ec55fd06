"""The README's worked catalog file (deploy guide, "Adding a template") passes the same
checks synth runs on it, before its image is resolved."""

from __future__ import annotations

from pathlib import Path

from jobmodel.templates.catalog import load_catalog

ROOT = Path(__file__).resolve().parents[3]


def test_the_worked_catalog_file_loads_and_validates():
    specs = load_catalog(ROOT / "docs" / "examples" / "catalog.json")
    assert list(specs) == ["distilbert-news"]
    spec = specs["distilbert-news"]
    assert [c.name for c in spec.inputs if c.required] == ["train"]
    assert "docs/examples/catalog.json" in (ROOT / "README.md").read_text()
