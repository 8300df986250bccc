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
projector weights, projector compute) after it; PIECE (text, tokens generated, the new tokens'
log-probabilities, KV cells) for each piece of the reply; DONE (GenerationStats, KV cells);
RESULT (value) for the other requests; ERROR (message, log lines, decode status).

Parallel sequences (a context loaded with n_seq_max > 1, app/engine/slots.py): SLOTS_OPEN (answered RESULT
with a slot's context) starts them; then SLOT_START (request id, tokens, GenerationParams), SLOT_CANCEL
(request id: acted on at once), SLOT_TOKENIZE (request id, text, add_special, parse_special: answered
SLOT_RESULT (request id, tokens)) and SLOTS_CLOSE (the replies still running stopped; answered RESULT).
Meanwhile the engine sends, each with its request id, SLOT_PREFILLED (reused tokens, prompt seconds),
SLOT_PIECE (text, tokens generated, the new tokens' log-probabilities, KV cells), SLOT_DONE
(GenerationStats, KV cells) and SLOT_ERROR (message, log lines, decode status); any other request is
answered ERROR until SLOTS_CLOSE.

Pictures cross once: the child keeps the bytes of the images and sounds it was sent (`MediaCache`), and a
later prompt carries a picture it keeps as its key alone (its `Media` with no bytes). A GENERATE or
TOKENIZE_MEDIA naming one it no longer keeps is answered MISSING_MEDIA (their keys), and the app sends
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
SLOTS_OPEN = "slots_open"
SLOT_START = "slot_start"
SLOT_CANCEL = "slot_cancel"
SLOT_TOKENIZE = "slot_tokenize"
SLOTS_CLOSE = "slots_close"

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
SLOT_PREFILLED = "slot_prefilled"
SLOT_PIECE = "slot_piece"
SLOT_DONE = "slot_done"
SLOT_ERROR = "slot_error"
SLOT_RESULT = "slot_result"
