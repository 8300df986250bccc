"""Run a child without root's power over file permissions, so that a test of an unreadable file runs as root too.

Root reads every file (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), and CI runs as root: a test that makes a file
unreadable would test nothing there. `drop_file_override` (a subprocess `preexec_fn`) takes the two
capabilities out of the child's effective, permitted, inheritable and bounding sets before it runs its
program, which then meets a file's mode bits as any user does while it keeps its uid (so it still reaches the
interpreter, the venv and the test's folders, wherever they are). Linux only; a no-op for a user who is not
root.
"""

from __future__ import annotations

import ctypes
import os

CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2
_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_file_override() -> None:
    """In the child, before exec: no capability that passes over file permissions, now or after exec."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    header = _Header(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_Data * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget")
    keep = ~((1 << CAP_DAC_OVERRIDE) | (1 << CAP_DAC_READ_SEARCH)) & 0xFFFFFFFF
    for field in ("effective", "permitted", "inheritable"):
        setattr(data[0], field, getattr(data[0], field) & keep)
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for capability in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):  # root's exec would take them back from here
        if libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")
