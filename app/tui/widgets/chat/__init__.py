"""The chat screen's panes: the load bar, the pictures attached to the next message, the past chats,
the context line, and the words under a message."""
