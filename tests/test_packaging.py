"""A regular (not editable) install ships every package: none missing from pyproject.toml."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def test_every_package_is_listed() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for top in ("app", "planner")
        for p in (ROOT / top).rglob("__init__.py")
    }
    assert found - listed == set(), "add these to [tool.setuptools] packages"
    assert "app.assets" in listed and (ROOT / "assets" / "app.tcss").exists()


def test_the_pin_is_the_build_the_rules_are_keyed_to() -> None:
    from planner import LLAMA_CPP_VERSION

    text = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text()
    assert f'"llama-cpp-python=={LLAMA_CPP_VERSION}"' in text
