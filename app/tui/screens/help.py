"""The help screen: keys per screen, and what the picker's badges mean."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

from app.memory_words import glossary
from app.tui.widgets.chat.slash_commands import help_markdown

HELP = (
    """\
# vramchat

vramchat plans how a model will use memory **before** it loads it, then lets you chat
with it while the dashboard shows memory as it is really used.

## Everywhere

| key | does |
|---|---|
| `F1` | this help (`↑` `↓`, `PgUp` `PgDn` scroll it) |
| `F2` | switch between the model list and the chat |
| `F3` | the memory dashboard, full screen (plots, memory maps, planned vs actual per buffer) |
| `Ctrl+P` | command palette: every action, the theme (light or dark), a screenshot |
| `Ctrl+Q` | quit |

## Model list

| key | does |
|---|---|
| `↑` `↓`, `Enter` | choose a model; `Enter` on the chosen one loads it |
| `Ctrl+L` | load with the plan shown (asks first when it does not fit) |
| `F5` | look for models again |
| `F6` | RPC servers: other machines whose GPUs or RAM are planned for beside this one |
| `F7` | the Hugging Face hub: find a model, see every quant's fit here, download one |
| `Delete` | delete a model vramchat downloaded (and its projector), asked first with the space it frees |
| `Tab` | move to the settings: context, KV cache type, GPU layers, flash attention |

Leave a setting blank for the planner to choose; the plan is recomputed as you type.

The model loaded last is selected at the next start. `vramchat --continue` opens the last chat with
its model (the palette's "Start on the last chat" does it at every start). `vramchat hf:ORG/REPO:QUANT`
(or the hub page's URL) runs a model downloaded before, and offers to download one that is not here.

Fit badges: **full GPU · N tok** (every layer on the GPU at N tokens of context; **RPC0 CPU · N tok**
where every layer goes to a CPU an RPC server lends),
**partial · x/y layers**, **CPU only**, **won't fit** (nothing fits even on the CPU;
you can still load anyway). **↻** marks a badge from the cache that is being re-checked
because free memory changed.

## Hugging Face hub (F7)

| key | does |
|---|---|
| type, `Ctrl+F` | search the hub for GGUF models by name (`Enter` searches at once) |
| `Enter` | open the repository: every quant planned for this machine, the best marked **★** with why |
| `Enter`, `Ctrl+D` | on a quant: download it (and its vision projector) into vramchat's models folder |
| `Ctrl+X` | cancel the download: what arrived is kept hidden, to resume (or delete it) |
| `Ctrl+R` | resume the stopped download; **Download again** where nothing of it is kept (a failed checksum) |
| `Delete` | delete what arrived of the stopped download |
| `F5` | ask the hub again (after it could not be reached; coming back with `F7` asks too) |
| `Esc` | from the quants back to the repositories; from there back to the model list |

Each repository is badged with one quant (its Q4_K_M, or the nearest) read from its header alone,
nothing downloaded; **✓** marks a quant already on this machine. A finished download (its sha256
checked) is selected in the model list: `Enter` loads it. A download goes on while other screens
show; their title line gives its progress. Offline, the repositories seen before are planned from
what was kept of them.

## Chat

| key | does |
|---|---|
| `Enter` | send |
| `Ctrl+J` | new line (`Shift+Enter` too where the terminal passes it: not inside tmux, say) |
| `↑` `↓` | on the message box's first (last) row: earlier messages, this chat's first; then your draft |
| `Esc` | stop the reply at once |
| `Ctrl+N` | new chat |
| `Ctrl+R` | retry the last reply (the earlier one is kept: "‹ 1/2 ›" on the reply) |
| `Alt+Left`, `Alt+Right` | step through the alternatives of the last reply (or of the marked message) |
| `Ctrl+E` | edit your last message (or the marked one) and send it again as a new branch; `Esc` drops it |
| `Ctrl+O` | copy the last reply, as written (Markdown, code fences and all) |
| `Ctrl+↑`, `Alt+↑` | select: `↑` `↓` mark a message or one of its code blocks, `c` copies it, \
`←` `→` its alternatives, `e` edits it (yours), `Esc` back to typing |
| `/` | slash commands, listed as you type (`Tab` completes): see below |
| `Ctrl+B` | show or hide the list of chats (below 150 columns it opens over the chat; `Esc` closes it) |
| `Ctrl+G` | show or hide the memory graphs beside the chat (below 100 columns: the full dashboard) |
| `F4` | this chat's own settings: system prompt, sampling (temperature, top-p ... seed, max tokens), presets |
| `F5` | reload the model (after the engine stopped, say) |
| `Ctrl+S` | export this chat as Markdown and JSON, with its plan receipt (the paths are shown) |
| `F8` | the plan receipt of this chat (or of the chat chosen in the list): `c` copies it as JSON |
| `F9` | thinking on or off for this chat (a model whose template has the switch: Qwen3, GLM-4.5) |
| `F6` | rename this chat (in the list: `r`, the highlighted one) |
| `Delete`, `d` in the list | delete the highlighted chat; `Ctrl+Z` brings it back until vramchat is started again |

A reasoning model's thoughts show folded above its answer ("Thought for 12 s, 340 tokens"): `Tab` to
the fold and `Enter`, or a click, unfolds them. They count in the reply's tokens and speed, and stay out
of later prompts, as the models' own templates leave them out.

Copies go to the clipboard the terminal offers (OSC 52: most terminals, tmux with `set-clipboard on`).

Settings are kept with each chat: an empty field is the model's own (its GGUF's `general.sampling`
values where it carries them); the line over the conversation says when a chat has its own.

The search box above the past chats finds every chat whose title or messages hold the text. Each
chat shows when it was last written to; two chats begun with the same text are numbered "(2)".
`Ctrl+E`, `F6` and `Ctrl+Z` act on the chat while the message box is empty; with text in it they
are the box's own (end of line, select the line, undo).

llama.cpp runs in an engine process of its own: if it crashes, the chat and the reply so
far are kept, vramchat says what happened and offers to reload.

When a conversation nears the context length, the oldest turns are left out of the
prompt (the system prompt stays) and vramchat says so. Every message is saved as it
is sent; a reply is saved while it streams, so nothing is lost if the app stops.

## Slash commands

Type `/` in the message box: the matching commands are listed above it (`↑` `↓` choose, `Tab`
completes, `Enter` runs, `Esc` closes the list). A message that starts with `/` and names no
command is asked about before it is sent.

"""
    + help_markdown()
    + """

## Memory dashboard

Beside the chat from 100 columns (`Ctrl+G` hides it), full screen with `F3`. Plots show the last
minutes (`now` at the right), each line named with its figure now; the planned figure is a line
of its own beside the measured one. Fewer plots on a short terminal, never cut words.

- **Runway**: how many more tokens the conversation can take before the context must grow, and
  before it is full; the tokens a turn takes; a warning before the oldest turns are left out.
- **Memory map**: one bar per device, to scale; hover it for each part's meaning.
- **Weights**: the model's parameters. **Mapped weights**: the model file mapped into memory; the
  system keeps it in its file cache (not counted as used) and may read it again from disk.
- **KV cache**: the attention cache that holds the conversation. **KV empty**: the committed part
  the conversation has not filled yet.
- **SWA cache**: the KV cache of sliding-window layers: they look back a fixed window, so it
  stops growing there.
- **Compute arena**: scratch memory llama.cpp reuses for each step's intermediate results.
- **Runtime**: the GPU driver's context and libraries, no buffer of llama.cpp's. **Margin**: kept
  free for other programs.
- **Dry run**: what llama.cpp sized before the load, allocating nothing (✓ agreed with the plan).
- **Plan receipt**: the plan a chat ran with, the dry run and the peaks measured, kept with the
  chat for a bug report.

### Memory words (each means one thing wherever it is shown)

"""
)
HELP += glossary() + "\n\nPress `Esc` to close this help.\n"


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,f1,q", "dismiss", "Close")]

    def __init__(self, text: str = "") -> None:
        """`text`: Markdown to show instead of the whole help (/help shows the slash commands)."""
        super().__init__()
        self.text = text or HELP

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):  # focusable: the arrow and page keys scroll it
            yield Markdown(self.text)

    def on_mount(self) -> None:
        self.query_one("#help-box", VerticalScroll).focus()
