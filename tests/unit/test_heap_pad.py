"""replay.heap_pad: with the pad, memory freed at the top of the heap stays for reuse (glibc)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from tests.cli import ROOT

GLIBC = platform.libc_ver()[0] == "glibc"

# Grows the heap by 40 MiB in 100 KiB blocks (below the mmap threshold: they come from the
# heap), frees them, and prints what the heap keeps at its top (mallinfo2's keepcost); then
# how many more blocks are mapped (hblks) while it holds one of 1 MiB.
PROBE = """
import ctypes, sys
if sys.argv[1] == "pad":  # imported only here: an import that frees a large mapped block raises
    from replay.heap_pad import keep_heap_pad  # glibc's sliding mmap threshold in the default probe
    assert keep_heap_pad()
class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                                     "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.mallinfo2.restype = MallInfo2
blocks = [libc.malloc(100 << 10) for _ in range(400)]
for block in reversed(blocks):
    libc.free(block)
kept, mapped_before = libc.mallinfo2().keepcost, libc.mallinfo2().hblks
block = libc.malloc(1 << 20)
mapped = libc.mallinfo2().hblks - mapped_before
libc.free(block)
print(kept, mapped)
"""


def probe(mode: str) -> tuple[int, int]:
    """(bytes the heap keeps at its top after the frees, blocks mapped while 1 MiB is held)."""
    done = subprocess.run([sys.executable, "-c", PROBE, mode], cwd=ROOT, capture_output=True, text=True, check=True)
    kept, mapped = done.stdout.split()
    return int(kept), int(mapped)


@pytest.mark.skipif(not GLIBC, reason="mallopt and mallinfo2 are glibc's")
def test_freed_heap_top_is_kept_and_large_blocks_come_from_the_heap_with_the_pad() -> None:
    padded, default = probe("pad"), probe("default")
    # How much stays depends on the heap's layout (31-64 MiB seen); glibc's default keeps
    # about 128 KiB.
    assert padded[0] >= 16 << 20
    assert default[0] < 1 << 20
    # 1 MiB: mapped by default (threshold 128 KiB), from the heap with the pad's threshold.
    assert (padded[1], default[1]) == (0, 1)
