"""The bpf(2) calls fecbench makes from Python: open a pinned object, read a map's shape, memory-map it.

The loaders (`dropper/`, `schedlat/`) create and pin BPF objects; the harness then reads and writes their
memory-mapped maps in place (a dropper's live configuration, the scheduler tracer's histograms), which
costs no process start per run.
"""

from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path

SYS_BPF = {"x86_64": 321, "aarch64": 280}
BPF_MAP_CREATE, BPF_OBJ_GET, BPF_PROG_QUERY, BPF_OBJ_GET_INFO_BY_FD = 0, 7, 16, 15


class BpfUnavailable(OSError):
    """No bpf(2) on this machine type (fecbench knows its number on x86-64 and arm64)."""


def syscall(cmd: int, attr: ctypes.Array) -> int:
    """bpf(cmd, attr); the result, or OSError with the call's errno."""
    number = SYS_BPF.get(os.uname().machine)
    if number is None:
        raise BpfUnavailable(0, f"bpf(2) on {os.uname().machine}: unknown system call number")
    libc = ctypes.CDLL(None, use_errno=True)
    result = libc.syscall(number, cmd, ctypes.byref(attr), ctypes.sizeof(attr))
    if result < 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return int(result)


def obj_get(path: str | Path) -> int:
    """A file descriptor of the BPF object pinned at `path` (OSError if there is none)."""
    name = ctypes.create_string_buffer(str(path).encode())
    attr = (ctypes.c_uint64 * 4)()
    attr[0] = ctypes.addressof(name)
    return syscall(BPF_OBJ_GET, attr)


def map_shape(fd: int) -> tuple[int, int, int, int]:
    """(type, key size, value size, max entries) of the map behind `fd`."""
    info = (ctypes.c_uint32 * 64)()                       # struct bpf_map_info: type, id, key_size, value_size,
    attr = (ctypes.c_uint64 * 4)()                        # max_entries, map_flags, ...
    attr[0] = fd | (ctypes.sizeof(info) << 32)            # bpf_fd, info_len
    attr[1] = ctypes.addressof(info)
    syscall(BPF_OBJ_GET_INFO_BY_FD, attr)
    return int(info[0]), int(info[2]), int(info[3]), int(info[4])


def mmap_pinned(path: str | Path, value_size: int, max_entries: int = 1) -> mmap.mmap:
    """Memory-map the array map pinned at `path` (created with BPF_F_MMAPABLE), read and write. ValueError
    if its values are not `value_size` bytes × `max_entries` (another build of its loader pinned it)."""
    fd = obj_get(path)
    try:
        _, _, size, entries = map_shape(fd)
        if (size, entries) != (value_size, max_entries):
            raise ValueError(f"{path}: map of {entries} × {size} bytes, expected {max_entries} × {value_size}")
        length = -(-value_size * max_entries // mmap.PAGESIZE) * mmap.PAGESIZE
        return mmap.mmap(fd, length, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)
