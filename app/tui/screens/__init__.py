"""Screens of the vramchat app."""
