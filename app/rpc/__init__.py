"""llama.cpp's RPC backend: lend this machine's devices to another (`vramchat serve-rpc`), or
plan and chat with devices other machines lend (`--rpc HOST:PORT`)."""
