"""The local hub of the remote-model tests, for the app's hub view (tests/tui/test_hub_view.py)."""

from tests.remote.conftest import hub, repo_files  # noqa: F401
