"""Deployed asset sizes from a real synth: the trigger, the job-events handler, the training source.

    python -m bench.asset_size [--assembly DIR] [--json PATH]

Without ``--assembly`` it runs ``cdk synth --all -q`` into a temporary folder first. Sizes are
the assembly's own files: a Lambda asset folder is zipped the way it is uploaded (deflate) and
its file count, raw and zipped bytes reported; a file asset is measured as is.

Ratio: the trigger's zip against the ``sagemaker`` package alone (the SageMaker Python SDK's
namespace package, zipped the same way, its dependencies such as pydantic left out), which is
what a launcher built on the SDK would have to ship, since the Lambda runtime only has boto3.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any

from bench._common import fmt_bytes, tempdir, write_json

SKIP_DIRS = {"__pycache__"}


def _files(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and not SKIP_DIRS.intersection(p.relative_to(folder).parts)
    )


def zip_size(folder: Path) -> tuple[int, int, int]:
    """(files, raw bytes, deflated zip bytes) of a folder."""
    files = _files(folder)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for path in files:
            archive.write(path, path.relative_to(folder).as_posix())
    return len(files), sum(p.stat().st_size for p in files), len(buffer.getvalue())


def assets(assembly: Path) -> dict[str, dict[str, Any]]:
    """Every file asset of every stack, by display name."""
    found: dict[str, dict[str, Any]] = {}
    for manifest in sorted(assembly.glob("*.assets.json")):
        for asset_hash, entry in json.loads(manifest.read_text()).get("files", {}).items():
            source = assembly / entry["source"]["path"]
            name = entry.get("displayName") or f"{manifest.stem}/{asset_hash[:12]}"
            if name.endswith(" Template") or source.suffix == ".json":
                continue  # the stacks' own templates, not assets
            if entry["source"].get("packaging") == "zip" and source.is_dir():
                count, raw, zipped = zip_size(source)
                found[name] = {"kind": "zip", "files": count, "raw": raw, "zipped": zipped}
            elif source.is_file():
                size = source.stat().st_size
                found[name] = {"kind": "file", "files": 1, "raw": size, "zipped": size}
    return found


def trigger_asset(found: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The trigger Lambda's code asset among ``found`` (its path has a ``Trigger`` part)."""
    for name, asset in found.items():
        parts = name.split("/")
        if "Trigger" in parts and parts[-1] == "Code":
            return asset
    raise LookupError(f"no trigger code asset among {sorted(found)}")


def sdk_package_size() -> tuple[int, int, int]:
    import importlib.util

    spec = importlib.util.find_spec("sagemaker")
    assert spec is not None and spec.submodule_search_locations
    return zip_size(Path(next(iter(spec.submodule_search_locations))))


def run(assembly: Path | None = None) -> dict[str, Any]:
    work = None
    if assembly is None:
        from bench.synth import ROOT, _synth

        work = tempdir("assets")
        assembly = work / "cdk.out"
        _synth(ROOT, assembly)
    try:
        found = assets(assembly)
        trigger = trigger_asset(found)
        files, raw, zipped = sdk_package_size()
        return {
            "assets": found,
            "trigger_zipped": trigger["zipped"],
            "trigger_raw": trigger["raw"],
            "sdk_files": files,
            "sdk_raw": raw,
            "sdk_zipped": zipped,
            "ratio": zipped / trigger["zipped"],
        }
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)


def report(r: dict[str, Any]) -> str:
    lines = ["deployed assets (from cdk synth):"]
    for name, a in r["assets"].items():
        size = (
            f"{fmt_bytes(a['zipped'])} zipped, {fmt_bytes(a['raw'])} raw"
            if a["kind"] == "zip"
            else fmt_bytes(a["raw"])
        )
        lines.append(f"  {name:<28} {size}, {a['files']} file(s)")
    lines.append(
        f"  sagemaker SDK package alone: {fmt_bytes(r['sdk_zipped'])} zipped, "
        f"{fmt_bytes(r['sdk_raw'])} raw, {r['sdk_files']} files"
    )
    lines.append(f"  ratio SDK package / trigger asset (zipped): {r['ratio']:.0f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--assembly", default=None, help="an existing cdk synth output folder")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    result = run(Path(args.assembly) if args.assembly else None)
    print(report(result))
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
