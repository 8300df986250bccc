"""The chat screen's panes: the pictures attached to the next message and the past chats."""
