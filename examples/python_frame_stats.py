#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Per-frame statistics of a cudasink-ipc stream, computed in place in the producer's memory:
with PyTorch on the GPU for CUDA frames (torch.from_dlpack), with NumPy for host frames.

    PYTHONPATH=python CUDAIPC_LIBRARY=build/libcudaipc/libcudaipc.so.0 \\
        python3 examples/python_frame_stats.py --socket /tmp/cam0.sock --frames 100

Prints, per frame: its sequence number, format and memory, the mean of each channel, the
minimum and maximum of each channel, and the latency from the producer sending the frame to the
statistics being ready (both CLOCK_MONOTONIC). Planar formats (NV12, I420, ...): the luma plane.
"""

import argparse
import time

import cudaipc

try:  # imported up front, so that the first frame's latency does not include it
    import torch
except ImportError:
    torch = None
try:
    import numpy
except ImportError:
    numpy = None


def torch_stats(pixels_source):
    pixels = torch.from_dlpack(pixels_source)  # (H, W[, C]) on the producer's GPU, no copy
    mean = pixels.float().mean(dim=(0, 1))
    low, high = pixels.amin(dim=(0, 1)), pixels.amax(dim=(0, 1))
    # .tolist() waits for the GPU: the statistics are ready when this returns
    return [t.flatten().tolist() for t in (mean, low, high)]


def numpy_stats(pixels_source):
    pixels = numpy.asarray(pixels_source)  # read-only view of the producer's memory, no copy
    return [a.ravel().tolist() for a in (pixels.mean(axis=(0, 1)), pixels.min(axis=(0, 1)),
                                         pixels.max(axis=(0, 1)))]


def main():
    parser = argparse.ArgumentParser(description="Per-frame statistics of a cudasink-ipc stream")
    parser.add_argument("--socket", default=None,
                        help="the producer's socket (default: the elements' per-user default)")
    parser.add_argument("--frames", type=int, default=100,
                        help="frames to read (0: until the stream ends; default 100)")
    args = parser.parse_args()

    with cudaipc.Reader(args.socket) as reader:
        for count, frame in enumerate(reader, start=1):
            with frame:  # released at the end of the block (after the GPU work, on the GPU)
                source = frame if len(frame.planes) == 1 else frame.planes[0]
                stats = torch_stats if frame.memory == "cuda" or numpy is None else numpy_stats
                if stats is torch_stats and torch is None:
                    raise SystemExit(f"reading {frame.memory} frames needs PyTorch" +
                                     ("" if frame.memory == "cuda" else " or NumPy"))
                mean, low, high = stats(source)
                latency_us = (time.clock_gettime_ns(time.CLOCK_MONOTONIC) -
                              frame.send_time_ns) / 1000
                print(f"#{frame.sequence} {frame.format} {frame.width}x{frame.height} "
                      f"{frame.memory}: mean {[round(m, 1) for m in mean]} min {low} max {high} "
                      f"latency {latency_us:.0f} us")
            if count == args.frames:
                break
        print("reader:", reader.stats)


if __name__ == "__main__":
    main()
