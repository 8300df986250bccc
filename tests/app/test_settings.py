"""Settings: defaults, round trip, and a hand-edited file that holds nonsense."""

from __future__ import annotations

import json
from pathlib import Path

from app.settings import Settings, load_settings, save_settings, settings_path


def test_defaults_when_missing() -> None:
    settings, warning = load_settings()
    assert settings == Settings() and warning is None


def test_round_trip_in_the_config_folder(_private_home: Path) -> None:
    settings = Settings(models_dirs=["/models"], system_prompt="Be brief.", temperature=0.5, max_tokens=64)
    save_settings(settings)
    assert settings_path().is_relative_to(_private_home)
    loaded, warning = load_settings()
    assert loaded == settings and warning is None


def test_bad_values_fall_back(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"temperature": "hot", "max_tokens": 10**9, "models_dirs": [1], "unknown": 1}))
    settings, warning = load_settings(path)
    assert settings.temperature == Settings().temperature
    assert settings.max_tokens == 32768  # clamped
    assert settings.models_dirs == []
    assert warning and "temperature" in warning and "models_dirs" in warning


def test_unreadable_file_gives_defaults(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text("{not json")
    settings, warning = load_settings(path)
    assert settings == Settings() and "unreadable" in (warning or "")


def test_values_out_of_range_are_clamped_and_said(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"max_tokens": -4, "temperature": 9}))
    settings, warning = load_settings(path)
    assert (settings.max_tokens, settings.temperature) == (1, 2.0)
    assert warning is not None and "max_tokens -4 (out of range: using 1)" in warning
    assert "temperature 9 (out of range: using 2.0)" in warning


def test_an_unset_temperature_is_the_models_own_and_a_saved_one_is_kept(tmp_path: Path) -> None:
    from app.conversation.sampling import describe_temperature, temperature_for
    from app.conversation.templates import ChatFormat

    transcript = ChatFormat("transcript", "transcript")
    chat = ChatFormat("chatml", "builtin")
    assert Settings().temperature is None
    assert temperature_for(None, transcript) == 0.0 and describe_temperature(None, transcript) == "greedy (base model)"
    assert temperature_for(None, chat) == 0.2 and temperature_for(0.7, transcript) == 0.7
    # version 1 wrote its default (0.2) with every save, whatever the user did: not a choice
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"temperature": 0.2, "theme": "vramchat-light"}))
    assert load_settings(path)[0].temperature is None
    save_settings(Settings(temperature=0.2), path)  # now a choice, and saved as one
    assert load_settings(path)[0].temperature == 0.2
    save_settings(Settings(), path)
    assert json.loads(path.read_text())["temperature"] is None and load_settings(path)[0].temperature is None
