#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Reads CUDA frames as torch tensors (torch.from_dlpack, in place) and checksums them on the GPU.

    gpu_torch_consumer.py --socket PATH --frames N [--record FILE] [--hold K]
                          [--max-in-flight N] [--memory cuda|any] [--timeout-ms MS]
                          [--warmup N] [--verify-cpu N]

For a GPU machine (not a CI test). Per frame it computes, on the GPU, the checksum of the visible
bytes of plane 0 that cuda/test_pattern.h defines (its image_checksum_cpu() is the reference):

    sum over rows r, bytes c of the row:  byte(r, c) * (c + 1) * ((r + 1) * 0x9E3779B97F4A7C15)

mod 2^64, in torch.int64 arithmetic (which wraps; the result is printed as unsigned), and with
--record writes `offset checksum` per frame to FILE (offset: the producer's GstBuffer offset,
"none" if unset).

At most K tensors (--hold, default 2) are alive at once, in a ring: each new frame pushes the
oldest tensor out, and freeing it is what releases that frame's slot (the DLPack deleter drops
the Frame; the release is ordered after the GPU work queued on the legacy default stream, which
is torch's default stream). The reader's max_in_flight must exceed K, or it would stop receiving;
the largest frames_held seen proves the slots come back. Its default, 8, is as many frames as
cudaipc-cuda-peer's producer has slots: a producer that does not wait for its consumers (a live
one, or that peer's) drops frames for a consumer at its max_in_flight; with 8 that peer waits for
a free slot instead, and every frame arrives.

Ends with one JSON line: frames, fps (receive rate) and latency (now - send_time_ns, when each
frame reaches Python) p50/p99 in µs, both over the frames after the first --warmup (30: torch's
and CUDA's start-up is not the transport's), the largest frames_held seen, and the reader's stats
after the ring is emptied (frames_held 0). Exit status: 0 done, 1 a failure.
"""

import argparse
import collections
import contextlib
import json
import sys
import time

import torch

import cudaipc

ROW_WEIGHT = 0x9E3779B97F4A7C15
ROW_WEIGHT_INT64 = ROW_WEIGHT - (1 << 64)  # the same 64 bits as a signed int64
MASK64 = (1 << 64) - 1
FLUSH_EVERY = 1024  # checksums brought to the host in batches: one synchronisation per batch


def plane0_bytes(frame):
    """Plane 0's visible bytes as a (rows, row_bytes) uint8 tensor, in place on the GPU."""
    tensor = torch.from_dlpack(frame.planes[0])  # the stream waits for the producer's writes
    if tensor.dtype != torch.uint8:
        tensor = tensor.view(torch.uint8)  # e.g. 16-bit samples: their bytes, in memory order
    return tensor.reshape(tensor.shape[0], -1)  # (H, W, C) -> (H, W*C): still a view


class Checksum:
    """The test-pattern checksum on the GPU; weights cached per shape."""

    def __init__(self):
        self._weights = {}

    def __call__(self, rows):
        shape = tuple(rows.shape)
        if shape not in self._weights:
            n_rows, row_bytes = shape
            column = torch.arange(1, row_bytes + 1, dtype=torch.int64, device=rows.device)
            row = torch.arange(1, n_rows + 1, dtype=torch.int64, device=rows.device)
            self._weights[shape] = (column, row * ROW_WEIGHT_INT64)  # wraps mod 2^64
        column, row = self._weights[shape]
        row_sums = (rows.to(torch.int64) * column).sum(dim=1)  # < 2^63: no wrap needed
        return (row_sums * row).sum()  # wraps mod 2^64


def checksum_cpu(rows):
    """The same checksum from a host copy, with NumPy's uint64 (an independent reference)."""
    import numpy

    values = rows.cpu().numpy().astype(numpy.uint64)
    n_rows, row_bytes = values.shape
    row_sums = (values * numpy.arange(1, row_bytes + 1, dtype=numpy.uint64)).sum(
        axis=1, dtype=numpy.uint64)
    with numpy.errstate(over="ignore"):
        row_weights = numpy.arange(1, n_rows + 1, dtype=numpy.uint64) * numpy.uint64(ROW_WEIGHT)
        return int((row_sums * row_weights).sum(dtype=numpy.uint64))


def percentile(sorted_values, fraction):
    return sorted_values[min(len(sorted_values) - 1, round(fraction * (len(sorted_values) - 1)))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--socket", required=True, help="the producer's socket path")
    parser.add_argument("--frames", type=int, required=True, help="how many frames to read")
    parser.add_argument("--record", help="file to write `offset checksum` lines to")
    parser.add_argument("--hold", type=int, default=2, metavar="K",
                        help="tensors kept alive at once, in a ring (default 2)")
    parser.add_argument("--max-in-flight", type=int, default=None,
                        help="the reader's max_in_flight (default: max(8, K + 2))")
    parser.add_argument("--timeout-ms", type=int, default=10000,
                        help="longest wait for one frame (default 10000)")
    parser.add_argument("--warmup", type=int, default=30, metavar="N",
                        help="frames left out of fps and latency (default 30; fewer if there "
                             "are not that many)")
    parser.add_argument("--memory", choices=("cuda", "any"), default="cuda",
                        help="frames to accept (default cuda: a host-memory producer is refused)")
    parser.add_argument("--verify-cpu", type=int, default=0, metavar="N",
                        help="also checksum the first N frames on the CPU (needs NumPy) and "
                             "fail on a mismatch")
    args = parser.parse_args()
    if args.hold < 1:
        parser.error("--hold must be at least 1")
    max_in_flight = args.max_in_flight or min(64, max(8, args.hold + 2))
    if max_in_flight <= args.hold:
        parser.error(f"--max-in-flight ({max_in_flight}) must exceed --hold ({args.hold}): a "
                     f"reader holding max_in_flight frames receives nothing more")

    checksum = Checksum()
    ring = collections.deque(maxlen=args.hold)  # the oldest tensor falls out, its slot returns
    pending = []  # (offset, checksum tensor on the GPU), not yet written
    latencies_ns = []
    receive_times = []
    max_frames_held = 0
    mismatches = 0

    def flush():
        if pending:
            values = torch.stack([value for _, value in pending]).cpu().tolist()  # waits for them
            if record:
                for (offset, _), value in zip(pending, values):
                    record.write(f"{'none' if offset is None else offset} {value & MASK64}\n")
            pending.clear()

    with contextlib.ExitStack() as stack:
        record = stack.enter_context(open(args.record, "w")) if args.record else None
        reader = stack.enter_context(
            cudaipc.Reader(args.socket, memory=args.memory, max_in_flight=max_in_flight))
        print("ATTACHED", flush=True)  # for scripts that start another consumer after this one
        while len(receive_times) < args.frames:
            try:
                frame = reader.next(args.timeout_ms)
            except cudaipc.EndOfStream:
                print(f"the stream ended after {len(receive_times)} frames", file=sys.stderr)
                break
            if frame is None:
                print(f"no frame within {args.timeout_ms} ms, holding "
                      f"{reader.stats['frames_held']} (the producer may grant fewer than "
                      f"max_in_flight={max_in_flight}: its own max-in-flight caps it)",
                      file=sys.stderr)
                return 1
            now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            receive_times.append(now)
            latencies_ns.append(now - frame.send_time_ns)
            offset = frame.offset
            rows = plane0_bytes(frame)
            del frame  # from here on only the tensor keeps the slot claimed
            value = checksum(rows)
            if len(receive_times) <= args.verify_cpu:
                expected = checksum_cpu(rows)
                if int(value) & MASK64 != expected:
                    mismatches += 1
                    print(f"frame {offset}: GPU checksum {int(value) & MASK64} != CPU {expected}",
                          file=sys.stderr)
            pending.append((offset, value))
            ring.append(rows)
            del rows
            max_frames_held = max(max_frames_held, reader.stats["frames_held"])
            if len(pending) >= FLUSH_EVERY:
                flush()
        flush()
        ring.clear()  # the last tensors go: their frames are released
        torch.cuda.synchronize()
        stats = reader.stats

    frames = len(receive_times)
    warmup = min(max(args.warmup, 0), max(frames - 2, 0))  # keep two frames for a rate
    measured = receive_times[warmup:]
    elapsed_s = (measured[-1] - measured[0]) / 1e9 if len(measured) > 1 else 0.0
    latencies_ns = sorted(latencies_ns[warmup:])
    summary = {
        "frames": frames,
        "measured_frames": len(measured),
        "fps": round((len(measured) - 1) / elapsed_s, 1) if elapsed_s > 0 else None,
        "latency_p50_us": round(percentile(latencies_ns, 0.50) / 1000, 1) if measured else None,
        "latency_p99_us": round(percentile(latencies_ns, 0.99) / 1000, 1) if measured else None,
        "hold": args.hold,
        "max_in_flight": max_in_flight,
        "max_frames_held": max_frames_held,
        "cpu_verified": min(frames, args.verify_cpu),
        "cpu_mismatches": mismatches,
        "reader": stats,
    }
    print(json.dumps(summary))
    ok = frames == args.frames and mismatches == 0 and stats["frames_held"] == 0 and \
        max_frames_held <= args.hold
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except cudaipc.Error as e:  # no producer, refused, ...: the library's sentence says why
        sys.exit(f"gpu_torch_consumer: {e}")
