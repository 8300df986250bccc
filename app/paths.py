"""Where vramchat keeps things (platformdirs), overridable with VRAMCHAT_HOME for tests."""

from __future__ import annotations

import os
from pathlib import Path

APP_NAME = "vramchat"


def _base(kind: str) -> Path:
    home = os.environ.get("VRAMCHAT_HOME")
    if home:
        return Path(home) / kind
    import platformdirs

    getter = {
        "data": platformdirs.user_data_dir,
        "config": platformdirs.user_config_dir,
        "cache": platformdirs.user_cache_dir,
    }[kind]
    return Path(getter(APP_NAME))


def data_dir() -> Path:
    return _base("data")


def config_dir() -> Path:
    return _base("config")


def cache_dir() -> Path:
    return _base("cache")


def models_dir() -> Path:
    """vramchat's own models folder (the demo model is assembled here)."""
    return data_dir() / "models"
