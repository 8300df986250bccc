"""Limits a user can meet in more than one place (the settings file, the chat dialog, the engine)."""

DEFAULT_MAX_TOKENS = 512  # a reply's length unless the user sets another
MAX_TOKENS = 32768  # the longest reply the settings accept
