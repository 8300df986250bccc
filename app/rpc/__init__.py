"""llama.cpp's RPC backend: lend this machine's devices to another (the server process, which the
`vramchat serve-rpc` command, app/cli/serve_rpc.py, starts), or plan and chat with devices other
machines lend (`--rpc HOST:PORT`)."""
