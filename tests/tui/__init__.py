"""Tests of tui."""
