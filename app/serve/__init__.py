"""`vramchat serve`: the model vramchat planned, behind an OpenAI-compatible API.

A front end beside the TUI and the command line, over the same session and engine process
(app/session.py ModelSession, app/engine/process.py), the plan made through app.planning and the
sampling through app.conversation.sampling.reply_sampling. One idea a module:

    options.py        what the server is told (address, key, slots, limits) and the exposure rule
    errors.py         OpenAI-style error answers
    auth.py           the API key, compared in constant time
    body.py           a request's body read within its size and time limits
    requests.py       the JSON a client sends, checked field by field into typed requests
    prompts.py        messages to the model's prompt (its chat format, images, tools)
    tools.py          tool calls: the families with a published format, their parsing, forced calls
    grammar.py        a JSON schema as a GBNF grammar (a forced tool call's arguments, a JSON reply)
    structured.py     a reply in JSON (response_format): the format asked for, and its grammar
    replies.py        a reply's text as OpenAI's answer: message, reasoning, tool calls, usage, chunks
    lanes.py          the queue and the slots: requests in order, or N at a time, a full queue refused
    runner.py         the engine side: one reply at a time on the session, or parallel slots
    monitor.py        the server's live state (requests, queue, speeds, KV per slot) for the
                      dashboard and /metrics
    metrics.py        /metrics in Prometheus text
    api.py            the routes (Starlette)
    http_protocol.py  uvicorn's HTTP/1.1 with a deadline for a request's head
    server.py         uvicorn started on a socket of our own, in the foreground or a thread
    log.py            one line per request, safe for the terminal
"""
