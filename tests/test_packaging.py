"""Packaging: setup.py discovers every subpackage; the data folder ships as mgkflow.data."""

from __future__ import annotations

import runpy
import tomllib
from pathlib import Path

import setuptools

ROOT = Path(__file__).resolve().parent.parent


def _config() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)["tool"]["setuptools"]


def _discovered(monkeypatch) -> list[str]:
    seen: dict = {}
    monkeypatch.setattr(setuptools, "setup", lambda **kw: seen.update(kw))
    monkeypatch.chdir(ROOT)
    runpy.run_path(str(ROOT / "setup.py"))
    return seen["packages"]


def test_every_subpackage_is_discovered(monkeypatch):
    listed = set(_discovered(monkeypatch))
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "mgkflow").rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    assert found <= listed
    assert "mgkflow.gpu.strategies" in listed and not any(p.startswith("datasets") for p in listed)


def test_data_package_maps_to_datasets_folder_with_its_files(monkeypatch):
    cfg = _config()
    assert cfg["package-dir"]["mgkflow.data"] == "datasets"
    assert {"mgkflow.data", "mgkflow.data.proteins"} <= set(_discovered(monkeypatch))
    assert any((ROOT / "datasets" / "proteins").glob("*.pdb.gz"))
    assert cfg["package-data"]["mgkflow.data.proteins"] == ["*.pdb.gz"]
