"""The messages between the app and its engine process: pickled tuples, the first item says what.

App to engine: LOAD (path, LoadConfig, ProjectorLoad or None), GENERATE (tokens, text or a MediaPrompt,
GenerationParams), TOKENIZE (text, add_special, parse_special), TOKENIZE_MEDIA (MediaPrompt: answered
with the cells it takes), SPECIAL_TEXT (which), DRY_RUN (path, LoadConfig),
RESIZE (n_ctx, keep: a new context, the conversation carried over; answered with the
ResizeReport, the LoadReport now and the KV cells in use), STOP (acted on at once, even mid-decode) and EXIT.

Engine to app: READY (pid) once started; PROGRESS (fraction) while loading; LOADED (LoadReport);
PREFILLING (tokens read, of how many, KV cells held) as a long prompt's reading starts and after each
batch; PREFILLED (reused tokens, prompt seconds, KV cells) when the prompt is in the cache; ENCODING
(index, count) before an image of the prompt goes through the projector, ENCODED (MediaEncoded,
projector weights, projector compute) after it; PIECE (text, tokens generated, KV cells) for each
piece of the reply; DONE (GenerationStats, KV cells);
RESULT (value) for the other requests; ERROR (message, log lines, decode status).

Pictures cross once: the child keeps the bytes of the images and sounds it was sent (`HeldMedia`), and a
later prompt carries a picture it holds as its key alone (its `Media` with no bytes). A GENERATE or
TOKENIZE_MEDIA naming one it no longer holds is answered MISSING_MEDIA (their keys), and the app sends
that request again with the bytes.
"""

LOAD = "load"
GENERATE = "generate"
TOKENIZE = "tokenize"
TOKENIZE_MEDIA = "tokenize_media"
SPECIAL_TEXT = "special_text"
DRY_RUN = "dry_run"
RESIZE = "resize"
STOP = "stop"
EXIT = "exit"

READY = "ready"
PROGRESS = "progress"
LOADED = "loaded"
PREFILLING = "prefilling"
PREFILLED = "prefilled"
ENCODING = "encoding"
ENCODED = "encoded"
PIECE = "piece"
DONE = "done"
RESULT = "result"
ERROR = "error"
MISSING_MEDIA = "missing_media"
