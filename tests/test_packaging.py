"""The wheel configuration lists every subpackage (setuptools cannot discover mgkflow.data)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _config() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)["tool"]["setuptools"]


def test_every_subpackage_is_packaged():
    listed = set(_config()["packages"])
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "mgkflow").rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    assert found <= listed, f"add {sorted(found - listed)} to [tool.setuptools] packages in pyproject.toml"


def test_data_package_maps_to_datasets_folder_with_its_files():
    cfg = _config()
    assert cfg["package-dir"]["mgkflow.data"] == "datasets"
    assert {"mgkflow.data", "mgkflow.data.proteins"} <= set(cfg["packages"])
    assert any((ROOT / "datasets" / "proteins").glob("*.pdb.gz"))
    assert cfg["package-data"]["mgkflow.data.proteins"] == ["*.pdb.gz"]
