"""What the tests share, and what bench borrows from them: tiny models, fakes, the oracle and the
comparisons with llama.cpp. bench imports from here; nothing here imports bench."""
