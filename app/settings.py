"""User settings: a small JSON file in the user config folder.

Unknown keys are ignored and bad values fall back to the defaults, so a hand-edited
or older settings file never stops the app from starting.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from app.limits import DEFAULT_MAX_TOKENS, MAX_TOKENS
from app.paths import config_dir

SETTINGS_FILE = "settings.json"
SETTINGS_VERSION = 2  # 2: the temperature may be null (the model's own)
LEGACY_DEFAULT_TEMPERATURE = 0.2


@dataclass
class Settings:
    models_dirs: list[str] = field(default_factory=list)  # extra folders to scan for GGUF files
    scan_known_caches: bool = True  # LM Studio, llama.cpp and Hugging Face caches, Ollama's models
    system_prompt: str = ""
    # None: the model's own (app.conversation.sampling): greedy for a base model talked to as a transcript, low
    # for a chat model; a number: the user's choice, for every model
    temperature: float | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS
    theme: str = "vramchat-dark"
    show_dashboard: bool = True
    # load a small context and grow it with the conversation (False: the whole context at load)
    elastic_context: bool = True
    # llama.cpp RPC servers (HOST:PORT) whose devices are used beside this machine's (--rpc wins)
    rpc_servers: list[str] = field(default_factory=list)
    # a start that finds no models of the user's own opens the hub view; once (then False)
    hub_on_first_start: bool = True
    # the model loaded last: selected in the model list at the next start ('' before any load)
    last_model: str = ""
    # every start opens the last chat with its model, as `vramchat --continue` does
    continue_last_chat: bool = False

    def clamp(self) -> Settings:
        """Bring values into sane ranges (a hand-edited file may hold anything)."""
        if self.temperature is not None:
            self.temperature = min(max(float(self.temperature), 0.0), 2.0)
        self.max_tokens = min(max(int(self.max_tokens), 1), MAX_TOKENS)
        self.models_dirs = [str(d) for d in self.models_dirs if str(d).strip()]
        self.rpc_servers = [str(e).strip() for e in self.rpc_servers if str(e).strip()]
        return self


def settings_path() -> Path:
    return config_dir() / SETTINGS_FILE


def load_settings(path: Path | None = None) -> tuple[Settings, str | None]:
    """The saved settings (or the defaults) and a warning when the file could not be used."""
    path = path or settings_path()
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Settings(), None
    except (OSError, ValueError) as exc:
        return Settings(), f"settings file {path} is unreadable ({exc}); using defaults"
    if not isinstance(raw, dict):
        return Settings(), f"settings file {path} does not hold an object; using defaults"
    defaults = Settings()
    if raw.get("version", 1) < SETTINGS_VERSION and raw.get("temperature") == LEGACY_DEFAULT_TEMPERATURE:
        # version 1 wrote its default temperature with every save: not a choice the user made
        raw = {k: v for k, v in raw.items() if k != "temperature"}
    values: dict[str, Any] = {}
    problems: list[str] = []
    for f in fields(Settings):
        if f.name not in raw:
            continue
        value, default = raw[f.name], getattr(defaults, f.name)
        ok = isinstance(value, type(default)) or (isinstance(default, float) and isinstance(value, int))
        if f.name == "temperature":  # a number, or null for the model's own
            ok = value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))
        if isinstance(default, list):
            ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        if isinstance(value, bool) != isinstance(default, bool):
            ok = False
        if ok:
            values[f.name] = value
        else:
            problems.append(f.name)
    settings = Settings(**values).clamp()
    for name in ("temperature", "max_tokens"):
        if values.get(name) is not None and getattr(settings, name) != values[name]:
            problems.append(f"{name} {values[name]} (out of range: using {getattr(settings, name)})")
    warning = f"ignored bad values in {path}: {', '.join(problems)}" if problems else None
    return settings, warning


def save_settings(settings: Settings, path: Path | None = None) -> None:
    """Write atomically: a crash mid-write leaves the previous file intact."""
    path = path or settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    import tempfile  # only when writing: its import costs every start 5 ms

    fd, tmp = tempfile.mkstemp(prefix=".settings-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"version": SETTINGS_VERSION, **asdict(settings)}, handle, indent=2)
            handle.write("\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
