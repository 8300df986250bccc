"""A regular (not editable) install ships every package and the stylesheet."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def test_every_package_and_the_stylesheet_ship() -> None:
    """Packages are found automatically (no list to forget one in), the stylesheet ships as app.tui's data."""
    from setuptools import find_namespace_packages

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    tool = config["tool"]["setuptools"]
    include = tool["packages"]["find"]["include"]
    shipped = set(find_namespace_packages(str(ROOT), include=include))
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for top in ("app", "planner")
        for p in (ROOT / top).rglob("__init__.py")
    }
    assert found and found <= shipped
    assert tool["package-data"]["app.tui"] == ["*.tcss"] and (ROOT / "app" / "tui" / "app.tcss").exists()
    assert "package-dir" not in tool


def test_the_pin_is_the_build_the_rules_are_keyed_to() -> None:
    from planner import LLAMA_CPP_VERSION

    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert f'"llama-cpp-python=={LLAMA_CPP_VERSION}"' in text
