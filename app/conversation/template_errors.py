"""What can go wrong rendering a chat template: shared by the renderer's two sides (app/conversation/templates.py
in the template's own process, app/conversation/template_sandbox.py in the app's), so neither imports the other."""

from __future__ import annotations

from app.errors import VramchatError


class TemplateError(VramchatError, RuntimeError):
    """A chat template that cannot be rendered safely (too large, broken, or too much work)."""

    title = "The chat template failed"


class TemplateBudgetError(TemplateError):
    """A template stopped for what it costs (work, time, memory, output), not for what it says."""


class TemplateOverBudget(VramchatError, RuntimeError):
    """A chat template that took too long, too much memory or too much work: stopped."""

    title = "The chat template was stopped"
