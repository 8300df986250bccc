"""vramchat: plan GPU and RAM use for GGUF models, then chat with them."""

__version__ = "0.1.0"
