"""CUDA IPC handles as torch shares them (tileops.pytorch), without torch:
kept apart so that what it accepts and refuses is tested where torch is not
installed."""

# The CUDA runtime's cudaIpcMemHandle_t.
MEM_HANDLE_BYTES = 64


def torch_mem_handle(handle):
    """The cudaIpcMemHandle_t inside what torch's _share_cuda_ returns.

    Older torch gives the 64 bytes of the handle; newer torch (c10's
    CUDACachingAllocator) a version byte, a type byte ('c' for a block from
    cudaMalloc, 'e' for an expandable segment), then the type's payload,
    which for 'c' is the handle. An expandable segment is a cuMemCreate
    mapping that cudaIpcOpenMemHandle cannot open.
    """
    raw = bytes(handle)
    if len(raw) == MEM_HANDLE_BYTES:
        return raw
    if len(raw) == MEM_HANDLE_BYTES + 2 and raw[1:2] == b"c":
        return raw[2:]
    if len(raw) >= 2 and raw[1:2] == b"e":
        raise ValueError("from_torch: the tensor lives in an expandable segment of torch's "
                         "caching allocator, which CUDA IPC handles cannot name; run with "
                         "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False")
    raise ValueError("from_torch: torch shared a CUDA handle of %d bytes that is neither a "
                     "cudaIpcMemHandle_t nor a versioned cudaMalloc handle" % len(raw))
