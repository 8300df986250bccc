"""Names from outside made into paths only when they stay where they belong.

A hub's file list (`rfilename`), its repository id and an URL's host and file name all become paths
under vramchat's models folder. They come from a server: a mirror, or anyone on the path to a plain-http
one, can answer `../../../../tmp/x/evil-Q4_0.gguf`, an absolute name, or an id of `../../..`. Each is
checked twice: as a name (a relative POSIX path of plain parts) when it is read, and as a path (inside
the folder once every symlink on the way is followed) before a byte is written.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from app.sources.errors import SourceError

# the hub's own rule for a repository id's two parts (huggingface_hub's validate_repo_id, in short)
_REPO_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
MAX_NAME_CHARS = 1024


class UnsafePath(SourceError):
    """A name from a server that would place a file outside vramchat's folders."""

    title = "Refused: an unsafe file name"


def name_problem(name: str) -> str:
    """Why `name` (a path inside a repository, `a/b.gguf`) is not a safe relative path, or ''."""
    if not name:
        return "it is empty"
    if len(name) > MAX_NAME_CHARS:
        return f"it is {len(name):,} characters long"
    if name.startswith("/"):
        return "it is an absolute path"
    if "\\" in name:
        return "it holds a backslash"
    if any(ord(c) < 0x20 or c == "\x7f" for c in name):
        return "it holds a control character"
    if re.match(r"^[A-Za-z]:", name):
        return "it starts with a drive letter"
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "it holds an empty, '.' or '..' part"
    return ""


def repo_id_problem(repo_id: str) -> str:
    """Why `repo_id` is not ORG/REPO as the hub names repositories, or ''."""
    parts = repo_id.split("/")
    if len(parts) != 2 or not all(_REPO_PART.fullmatch(p) for p in parts) or ".." in repo_id:
        return "it is not ORG/REPO (letters, digits, '.', '_' and '-')"
    return ""


def check_name(name: str, where: str) -> str:
    """`name` itself, or UnsafePath saying why it is refused (`where`: who sent it)."""
    problem = name_problem(name)
    if problem:
        raise UnsafePath(f"{where}: refused the file name {name[:200]!r}: {problem}; nothing was written")
    return name


def check_repo_id(repo_id: str, where: str) -> str:
    problem = repo_id_problem(repo_id)
    if problem:
        raise UnsafePath(f"{where}: refused the repository id {repo_id[:200]!r}: {problem}; nothing was written")
    return repo_id


def inside(root: Path, path: Path, what: str) -> Path:
    """`path` if it lies inside `root` once every symlink on the way (the last part too) is followed;
    else UnsafePath. A symlink in the models folder that points out of it is not written through."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if os.path.commonpath([real_root, real]) != real_root or real == real_root:
        raise UnsafePath(
            f"{what}: refused to write {path}: it resolves to {real}, outside the models folder {real_root}"
        )
    return path
