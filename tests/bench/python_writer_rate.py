#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Unpaced rate and CPU per frame of cudaipc.Writer's acquire/publish loop, for the comparison
with the C writer (cudaipc-writer-peer write --no-draw) in tests/gpu/run-on-gpu's writer step.

    python_writer_rate.py --path PATH --reader CMD... [--frames 3000] [--memory cuda|host]
                          [--width 1920] [--height 1080]

Serves PATH, starts the reader command (the same C reader the C writer's run uses), waits for
it to attach, then publishes --frames slots as they are (nothing drawn: the transport alone),
backpressure block so that every frame reaches the reader. Prints

    python-writer: RATE frames_per_s=X CPU us_per_frame=Y frames=N memory=M

(CPU: this process's, from the 31st frame on), and exits non-zero if the reader fails.
"""
import argparse
import subprocess
import sys
import time

import cudaipc

WARMUP = 30


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--path", required=True)
    parser.add_argument("--frames", type=int, default=3000)
    parser.add_argument("--memory", choices=("cuda", "host"), default="cuda")
    parser.add_argument("--width", type=int, default=1920)
    parser.add_argument("--height", type=int, default=1080)
    parser.add_argument("--reader", nargs=argparse.REMAINDER, required=True)
    a = parser.parse_args()
    with cudaipc.Writer(a.path, format="BGRx", width=a.width, height=a.height, memory=a.memory,
                        backpressure="block", live=False) as writer:
        reader = subprocess.Popen(a.reader)
        if not writer.wait_for_consumer(60000):
            sys.exit("python-writer: the reader did not attach")
        for n in range(a.frames):
            if n == WARMUP:
                cpu0, wall0 = time.process_time(), time.perf_counter()
            frame = writer.acquire()
            frame.publish()
        cpu = time.process_time() - cpu0
        wall = time.perf_counter() - wall0
        writer.end_stream()
        rc = reader.wait(timeout=60)
    n = a.frames - WARMUP
    print(f"python-writer: RATE frames_per_s={n / wall:.1f} CPU us_per_frame={cpu / n * 1e6:.2f} "
          f"frames={n} memory={a.memory}")
    sys.exit(rc)


if __name__ == "__main__":
    main()
