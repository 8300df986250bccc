"""The command line's words: `build_parser` (every flag, its group and its check) and the argv as argparse
should read it. argparse is imported when the command line is parsed: a replayed plan needs none of it."""

from __future__ import annotations

from app import __version__
from planner import LLAMA_CPP_BUILD

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a replayed plan's start is short)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence


def _whole_number(text: str, minimum: int) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < minimum:
        rule = f"must be at least {minimum}" if minimum else "must not be negative"
        raise argparse.ArgumentTypeError(f"{value} {rule}")
    return value


def _positive_int(text: str) -> int:
    return _whole_number(text, 1)


def _non_negative_int(text: str) -> int:
    return _whole_number(text, 0)


def _sampling_value(name: str, kind: type):  # -> a parser of one sampling value, its range checked
    def parse(text: str) -> float | int:
        import argparse

        from app.limits import checked

        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {'whole ' if kind is int else ''}number") from None
        try:
            return checked(name, value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def _kv_type(text: str) -> str:
    """--ctk / --ctv: a cache type llama.cpp accepts (an unknown one made the solver find nothing that fits,
    beside a FITS verdict)."""
    import argparse

    from planner.ggml_types import KV_CACHE_TYPES

    if text.lower() not in KV_CACHE_TYPES:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a KV cache type llama.cpp accepts ({', '.join(KV_CACHE_TYPES)})"
        )
    return text.lower()


def _on_off(text: str) -> bool:
    import argparse

    lowered = text.lower()
    if lowered in ("on", "1", "true", "yes"):
        return True
    if lowered in ("off", "0", "false", "no"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r}: use on or off")


def _size(text: str) -> int:
    import argparse

    from planner.hardware import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def terminal_columns() -> int:
    """The terminal's width as shutil.get_terminal_size finds it: $COLUMNS, else stdout's terminal, else 80."""
    import os
    import sys

    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns if sys.__stdout__ else 0
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


# the other commands, said under the app's flags: `vramchat --help` is where a user looks for them
OTHER_COMMANDS = (
    "Other commands: vramchat serve MODEL serves the planned model behind an OpenAI-compatible API "
    "(vramchat serve --help); vramchat serve-rpc lends this machine's devices to another machine's plans "
    "(vramchat serve-rpc --help)."
)


def build_parser() -> argparse.ArgumentParser:
    """The app's command line: MODEL, the modes, -p's sampling, devices, wishes and fixed knobs."""
    p = command_parser(
        "vramchat",
        "Chat with local GGUF models, knowing before you load one how much memory it takes.",
        "Sizes accept binary units: 8GiB, 24G, 12000MiB. "
        "Simulate devices for the whole app with VRAMCHAT_DEVICES (see --devices). " + OTHER_COMMANDS,
    )
    modes = p.add_argument_group("what to do")
    add_modes(modes)
    add_one_question(modes)
    add_sampling(modes, "with -p: ", "(default: the setting; unset: greedy for a base model, 0.2 for chat)")
    add_plan_knobs(p)
    return p


def command_parser(prog: str, description: str, epilog: str) -> argparse.ArgumentParser:
    """A parser with MODEL and --version, as every command that plans a model starts."""
    import argparse

    class Formatter(argparse.HelpFormatter):
        """argparse's own, given the terminal's width: left to find it, argparse imports shutil for it, and shutil
        its archive modules (bz2, lzma): 2-3 ms of every plan's start, for help that a plan never prints."""

        def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width=None) -> None:
            super().__init__(
                prog, indent_increment, max_help_position, terminal_columns() - 2 if width is None else width
            )

    p = argparse.ArgumentParser(prog=prog, description=description, epilog=epilog, formatter_class=Formatter)
    p.add_argument("model", nargs="?", help="a .gguf file (the first shard of a split model), or 'demo'")
    p.add_argument("--version", action="version", version=f"vramchat {__version__} ({LLAMA_CPP_BUILD})")
    return p


def _shown_if(shown: bool, text: str) -> str:
    """A flag's help, or argparse's mark that keeps the flag out of the help."""
    import argparse

    return text if shown else argparse.SUPPRESS


def add_modes(modes: argparse._ArgumentGroup, shown: bool = True) -> None:
    """The modes that print and exit, and --continue, --verify, --models-dir; `shown=False` keeps them out of
    the help (a command that refuses them in words: vramchat serve)."""

    def helped(text: str) -> str:
        return _shown_if(shown, text)

    modes.add_argument("--plan", action="store_true", help=helped("print the memory plan for MODEL and exit"))
    modes.add_argument(
        "--list",
        action="store_true",
        help=helped("print the models the picker would list, with their fit on this machine, and exit"),
    )
    modes.add_argument(
        "--quants",
        action="store_true",
        help=helped(
            "plan every GGUF of MODEL, a Hugging Face repo (ORG/REPO) or a folder, and print one table: "
            "each quant's fit on this machine and the best choice"
        ),
    )
    modes.add_argument(
        "--download",
        action="store_true",
        help=helped(
            "download MODEL (hf:ORG/REPO:QUANT, ORG/REPO/FILE.gguf or an URL) and its projector into the "
            "models folder: resumed if interrupted, checked against the hub's sha256"
        ),
    )
    modes.add_argument(
        "--continue",
        dest="continue_chat",
        action="store_true",
        help=helped(
            "open the app on the last chat, with the model it was held with (MODEL: with that one instead); "
            "the continue_last_chat setting does it at every start"
        ),
    )
    modes.add_argument("--devices", action="store_true", help=helped("print what each device probe found and exit"))
    modes.add_argument("--json", action="store_true", help=helped("with --plan, --list or --devices: print JSON"))
    modes.add_argument(
        "--forget-overhead",
        action="store_true",
        help=helped("forget the GPU overhead vramchat learned on this machine's loads (--devices shows it) and exit"),
    )
    modes.add_argument(
        "--llama-args",
        action="store_true",
        help=helped("with --plan: print the flags that run this configuration in llama-server or llama-cli"),
    )
    modes.add_argument(
        "--verify",
        action="store_true",
        help=helped("with --plan: confirm the plan with llama.cpp's own dry run on this machine (about 1 s)"),
    )
    modes.add_argument(
        "--models-dir",
        action="append",
        default=[],
        metavar="FOLDER",
        help=helped("also look for models in FOLDER (repeat for several)"),
    )


def add_sampling(group: argparse._ArgumentGroup, scope: str, temperature_default: str) -> None:
    """--temp, --top-p ... and -n; `scope` begins each help ("with -p: "), `temperature_default` ends --temp's."""
    from app.limits import RANGES

    group.add_argument("--temp", type=float, metavar="T", help=f"{scope}sampling temperature {temperature_default}")
    for flag, name, kind, metavar in (
        ("--top-p", "top_p", float, "P"),
        ("--top-k", "top_k", int, "K"),
        ("--min-p", "min_p", float, "P"),
        ("--repeat-penalty", "repeat_penalty", float, "R"),
        ("--seed", "seed", int, "N"),
    ):
        low, high = (f"{bound:g}" if kind is float else f"{int(bound)}" for bound in RANGES[name])
        group.add_argument(
            flag,
            type=_sampling_value(name, kind),
            metavar=metavar,
            help=f"{scope}{name.replace('_', ' ')} ({low} to {high}; default: the model file's, else vramchat's)",
        )
    group.add_argument(
        "-n",
        "--n-predict",
        type=_positive_int,
        metavar="N",
        help=f"{scope}most tokens in the answer (default: the setting, 512)",
    )


def add_one_question(modes: argparse._ArgumentGroup, shown: bool = True) -> None:
    """-p and what goes only with it (--verbose, --image, --audio)."""

    def helped(text: str) -> str:
        return _shown_if(shown, text)

    modes.add_argument(
        "-p",
        "--prompt",
        metavar="TEXT",
        help=helped("plan and load MODEL, answer TEXT on stdout and exit (with --json: one object)"),
    )
    modes.add_argument(
        "--verbose",
        action="store_true",
        help=helped("with -p: a reasoning model's thoughts on stderr as it writes them (stdout has the answer alone)"),
    )
    modes.add_argument(
        "--image",
        action="append",
        default=[],
        metavar="FILE",
        help=helped(
            "with -p: show the model this picture (repeat for several); the projector beside MODEL is "
            "loaded, or the one --mmproj names"
        ),
    )
    modes.add_argument(
        "--audio",
        action="append",
        default=[],
        metavar="FILE",
        help=helped("with -p: let the model hear this sound (WAV, MP3, FLAC), for projectors with an audio encoder"),
    )


def add_plan_knobs(p: argparse.ArgumentParser) -> None:
    """What every plan reads: the devices (what-if sizes), the solver's wishes and a fixed configuration."""
    from app.speed import tokens_per_second

    devs = p.add_argument_group("devices (what-if planning)")
    devs.add_argument(
        "--vram",
        metavar="SIZE[,SIZE...]",
        help="plan for simulated GPUs with these sizes instead of this machine's "
        "(a bare number is GiB: --vram 8 or --vram 8GiB,512MiB)",
    )
    devs.add_argument(
        "--gpu",
        action="append",
        default=[],
        metavar="CARD",
        help='plan for a card you do not have, from vramchat\'s table: --gpu "RTX 4090" (repeat for several, '
        '"2x RTX 3090" for two; --gpu list shows the table)',
    )
    devs.add_argument("--ram", metavar="SIZE", help="plan for this much host RAM (a bare number is GiB)")
    devs.add_argument("--margin", metavar="SIZE", type=_size, help="memory to keep free on each GPU (default 256MiB)")
    devs.add_argument("--cpu", action="store_true", help="plan for the host alone (no GPU)")
    devs.add_argument(
        "--rpc",
        metavar="HOST:PORT[,...]",
        help="also use the devices these llama.cpp RPC servers lend (`vramchat serve-rpc` on the other machine); "
        "default: the settings' rpc_servers; --rpc none uses none",
    )

    wish = p.add_argument_group("wishes (the solver honours them)")
    wish.add_argument(
        "--ctx",
        type=_non_negative_int,
        metavar="N",
        help="context length in tokens (default: the trained context, at most 32768)",
    )
    wish.add_argument(
        "--min-speed",
        type=tokens_per_second,
        metavar="N",
        help="prefer a configuration predicted to decode at least N tokens/s at the start of a chat",
    )
    wish.add_argument("--mmproj", metavar="FILE", help="a vision/audio projector (mmproj .gguf) loaded beside MODEL")
    wish.add_argument(
        "--image-max-tokens",
        type=_positive_int,
        metavar="N",
        help="with --mmproj or --image: the most tokens one image may take, as llama-server's flag "
        "(default: the projector's); a larger image is scaled down",
    )
    wish.add_argument(
        "--elastic",
        type=_on_off,
        metavar="on|off",
        help="start with a small context and grow it with the conversation (default: the elastic_context setting, on)",
    )
    wish.add_argument(
        "--repack",
        type=_on_off,
        metavar="on|off",
        help="the CPU's extra buffer types for host weights (CPU_REPACK, AMX; llama.cpp's --repack); "
        "default on, off on CPUs with AMX",
    )

    fixed = p.add_argument_group("fixed configuration (evaluated as given, no solver)")
    fixed.add_argument("--ngl", type=int, metavar="N", help="GPU layers, output layer included (-1: all)")
    fixed.add_argument("--ctk", type=_kv_type, metavar="TYPE", help="K cache type: f16, q8_0, q4_0, ...")
    fixed.add_argument("--ctv", type=_kv_type, metavar="TYPE", help="V cache type (quantized V needs --fa on)")
    fixed.add_argument("--fa", choices=("on", "off", "auto"), help="flash attention")
    fixed.add_argument("--ubatch", type=_positive_int, metavar="N", help="micro-batch size (default 512)")
    fixed.add_argument("--batch", type=_positive_int, metavar="N", help="batch size (default 512)")
    fixed.add_argument("--swa-full", type=_on_off, metavar="on|off", help="full-size sliding-window cache")
    fixed.add_argument("--parallel", type=_positive_int, metavar="N", help="parallel sequences (default 1)")
    fixed.add_argument(
        "--n-cpu-moe",
        type=_non_negative_int,
        metavar="N",
        help="keep the experts of the first N layers in host memory (MoE models)",
    )


def negative_values_attached(argv: Sequence[str]) -> list[str]:
    """`--vram -3GiB` reads to argparse as two options; attach the value so that the
    flag's own check answers ("size must be positive") instead of "expected one argument"."""
    out: list[str] = []
    for arg in argv:
        if (
            out
            and out[-1].startswith("--")
            and "=" not in out[-1]
            and len(arg) > 1
            and arg[0] == "-"
            and (arg[1].isdigit() or arg[1] == ".")
        ):
            out[-1] = f"{out[-1]}={arg}"
        else:
            out.append(arg)
    return out
