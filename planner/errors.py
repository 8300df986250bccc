"""Errors the planner raises. Each carries a message meant for the user."""

from __future__ import annotations


class PlannerError(Exception):
    """Base class for every error the planner reports to a user."""


class GGUFError(PlannerError):
    """A GGUF file is missing, unreadable, truncated or malformed."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


class ConfigError(PlannerError):
    """A configuration llama.cpp would refuse (with the reason it gives)."""


class ModelError(PlannerError):
    """The header reads, but describes a model llama.cpp would refuse (missing or ill-fitting tensors)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem
