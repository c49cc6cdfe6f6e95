#!/usr/bin/env python3
"""The torch.distributed baseline of tileops-bench-collective.

    torchrun --nproc-per-node N tools/bench/collective_torch.py \
        [--ops all_reduce,all_gather,reduce_scatter] [--sizes "BYTES ..."] \
        [--max-bytes B] [--dtype bf16|f16|f32] [--warmup 5] [--window 20] \
        [--rounds 5] [--json FILE]

One process per GPU (rank r on cuda:r), the NCCL backend. Per op and size
(bytes of one rank's tensor, 1 MiB to 1 GiB by powers of 4 by default): one
tensor per rank, --warmup calls, then --rounds rounds of --window calls back
to back, timed with CUDA events on rank 0 around the window; the median time
per call is reported. all_gather and reduce_scatter run in place the way the
daemon's do (all_gather_into_tensor into the whole tensor from its own part,
reduce_scatter_tensor from the whole tensor into its own part), so bytes is
the whole tensor of one rank on both sides. busbw: all_reduce algbw * 2(n-1)/n,
the others algbw * (n-1)/n (nccl-tests). Rank 0 writes one JSON line per
figure, named as tileops-bench-collective names them ("all_reduce x8",
"64 MiB bf16"), with "bench": "collective_torch".
"""
import argparse
import json
import os
import statistics
import sys

import torch
import torch.distributed as dist

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def size_name(n):
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def make_call(op, x, world, rank):
    if op == "all_reduce":
        return lambda: dist.all_reduce(x)
    part = x.numel() // world
    mine = x.narrow(0, rank * part, part)
    if op == "all_gather":
        return lambda: dist.all_gather_into_tensor(x, mine)
    return lambda: dist.reduce_scatter_tensor(mine, x)


def time_case(call, args, rank):
    """The median time per call (us) on rank 0, None elsewhere."""
    for _ in range(args.warmup):
        call()
    torch.cuda.synchronize()
    dist.barrier()
    times = []
    for _ in range(args.rounds):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(args.window):
            call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / args.window)
    dist.barrier()
    return statistics.median(times) if rank == 0 else None


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", default="all_reduce")
    p.add_argument("--sizes", default=None, help="bytes per rank, space or comma separated")
    p.add_argument("--max-bytes", type=int, default=1 << 30)
    p.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--window", type=int, default=20)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json", default=None, help="append the JSON lines here (else stdout)")
    args = p.parse_args()

    ops = args.ops.replace(",", " ").split()
    for o in ops:
        if o not in ("all_reduce", "all_gather", "reduce_scatter"):
            sys.exit(f"collective_torch.py: --ops lists all_reduce, all_gather, reduce_scatter, not {o!r}")
    if args.sizes:
        sizes = [int(s) for s in args.sizes.replace(",", " ").split()]
    else:
        sizes = [1 << 20 << (2 * i) for i in range(6)]
    sizes = [s for s in sizes if s <= args.max_bytes]

    rank = int(os.environ["RANK"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    try:  # device_id (torch >= 2.3) binds the communicator to the GPU at once
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    except TypeError:
        dist.init_process_group("nccl")
    world = dist.get_world_size()
    dtype = DTYPES[args.dtype]
    esize = torch.tensor([], dtype=dtype).element_size()

    out = None
    if rank == 0:
        out = open(args.json, "a") if args.json else sys.stdout
    rows = []
    for op in ops:
        for nbytes in sizes:
            if nbytes % (esize * world):
                sys.exit(f"collective_torch.py: {nbytes} bytes is not a whole number of "
                         f"{args.dtype} elements per part of {world}")
            x = torch.ones(nbytes // esize, dtype=dtype, device="cuda")
            us = time_case(make_call(op, x, world, rank), args, rank)
            del x
            if rank != 0:
                continue
            algbw = nbytes / (us * 1e-6) / 1e9
            factor = 2 * (world - 1) / world if op == "all_reduce" else (world - 1) / world
            busbw = algbw * factor
            name, kernel = f"{op} x{world}", f"{size_name(nbytes)} {args.dtype}"
            for stat, value, unit in (("time", us, "us"), ("algbw", algbw, "GB/s"),
                                      ("busbw", busbw, "GB/s")):
                out.write(json.dumps({"bench": "collective_torch", "backend": "torch.distributed",
                                      "name": name, "kernel": kernel, "stat": stat,
                                      "value": round(value, 4), "unit": unit,
                                      "n": args.window * args.rounds}) + "\n")
            out.flush()
            rows.append((op, world, size_name(nbytes), us, algbw, busbw))
    if rank == 0:
        print("| op | ranks | bytes per rank | dtype | time (us) | algbw (GB/s) | busbw (GB/s) |")
        print("| --- | ---: | ---: | --- | ---: | ---: | ---: |")
        for op, n, size, us, algbw, busbw in rows:
            print(f"| {op} | {n} | {size} | {args.dtype} | {us:.1f} | {algbw:.2f} | {busbw:.2f} |")
        if out is not sys.stdout:
            out.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
