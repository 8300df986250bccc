"""Widgets of the vramchat app, one idea per module."""
