"""Heap tuning for a replay process: keep freed memory at the top of the heap for reuse.

Why: a re-derived cycle allocates and frees a few megabytes of short-lived objects (decoded
inputs, outputs and their encodings). With glibc's defaults, freeing them shrinks the heap
back to the OS at once (``brk``), and the next cycle faults the same pages in again: about
4% of verifying the first 100,000 inputs of ``benchmarks/verify.py``'s log (five
alternating runs each way, benchmarks/RESULTS.md). A top pad of 64 MiB makes glibc grow the
heap by that much more and trim back only to it, so the churn reuses resident pages.

Asking for a pad switches off glibc's sliding mmap threshold, which would leave every
block over 128 KiB (a read of 1,024 records, the digest's joined state form) mapped and
faulted in anew each time; so the threshold is set where glibc's sliding one stops
(32 MiB): such blocks come from the heap, and its pad, too.

Process-wide and permanent (glibc has no way to undo it), so only the ``replay verify``
command and its worker processes ask for it. A C library without ``mallopt`` (musl, macOS)
leaves it alone: it changes speed, never results. This is shell code; the core never calls it.
"""

from __future__ import annotations

import ctypes

M_TOP_PAD = -2  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
TOP_PAD_BYTES = 64 << 20
MMAP_THRESHOLD_BYTES = 32 << 20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit


def keep_heap_pad() -> bool:
    """Ask the C library to keep ``TOP_PAD_BYTES`` at the top of the heap, and to map only
    blocks of ``MMAP_THRESHOLD_BYTES`` or more; True when it agreed."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the symbols this process has loaded: its C library's
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_TOP_PAD, TOP_PAD_BYTES)) and bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
