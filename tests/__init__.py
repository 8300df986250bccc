"""vramchat's tests. tests/support holds what they share (bench borrows it too)."""
