"""The conversation: from the messages of a chat to the prompt a model reads, and from its reply back
to the saved text; the same for the chat screen, `-p` and the server.

The room, on two floors (tests/test_import_cycles.py): its words, which the session, the store and the
server speak, below them:
- outcome.py: how a reply ended (ok, refused, out of memory, crashed, failed) and the words for it
- recovery.py: what a failed reply calls for (reload smaller, without lost RPC servers, without the CPU's
  extra buffer types, or ask the user); the session carries it out
- reasoning.py: a reply's thoughts told from its answer, and the chat's thinking switch
- sampling.py: what a reply is sampled with (`reply_sampling`: the request's, the chat's own, the user's
  defaults, the model file's, its kind's), presets and the words for them
- templates.py: the chat formats (a GGUF's Jinja template, a family's default, a plain transcript);
  the template is rendered in a sandbox (template_sandbox.py in the app's process, template_child.py
  the process it renders in, template_errors.py what both raise)
and its work, above the session and the store:
- prompt.py: the messages as the chat format sees them, fitted to the context (old turns dropped), and
  what a stored chat takes of the context
- reply.py: one reply, from the conversation to the saved text (`write_reply`: the chat's and -p's)
"""
