#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Unpaced rate and CPU per frame of cudaipc.Writer's acquire/publish loop, for the comparison
with the C writer (cudaipc-writer-peer write --no-draw) in tests/gpu/run-on-gpu's writer step.

    python_writer_rate.py --path PATH [--frames 3000] [--memory cuda|host] [--width 1920]
                          [--height 1080] [--way acquire|copy|appsrc] --reader CMD...

Serves PATH, starts the reader command (the same C reader the C writer's run uses), waits for
it to attach, then publishes --frames frames, backpressure block so that every frame reaches the
reader:
  acquire  cudaipc.Writer: acquire() and publish() each slot as it is (nothing drawn: the
           transport alone, zero copies)
  copy     cudaipc.Writer.publish(array): a frame the program already has (one NumPy array, or
           a torch CUDA tensor for memory="cuda"), copied into a slot (one copy, counted)
  appsrc   the way before the writer: appsrc ! cudasink-ipc (PyGObject), the same array pushed
           as a wrapped GstBuffer, which the sink copies into a slot (memory=host only)
Prints

    python-writer: RATE frames_per_s=X CPU us_per_frame=Y frames=N memory=M way=W

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
    parser.add_argument("--way", choices=("acquire", "copy", "appsrc"), default="acquire")
    parser.add_argument("--reader", nargs=argparse.REMAINDER, required=True)
    a = parser.parse_args()
    if a.way == "appsrc":
        return appsrc(a)
    source = None
    if a.way == "copy":
        if a.memory == "cuda":
            import torch
            source = torch.zeros((a.height, a.width, 4), dtype=torch.uint8, device="cuda")
        else:
            import numpy
            source = numpy.zeros((a.height, a.width, 4), dtype=numpy.uint8)
    with cudaipc.Writer(a.path, format="BGRx", width=a.width, height=a.height, memory=a.memory,
                        backpressure="block", live=False) as writer:
        reader = subprocess.Popen(a.reader)
        if not writer.wait_for_consumer(60000):
            sys.exit("python-writer: the reader did not attach")
        for n in range(a.frames):
            if n == WARMUP:
                cpu0, wall0 = time.process_time(), time.perf_counter()
            if source is not None:
                writer.publish(source)
            else:
                frame = writer.acquire()
                frame.publish()
        cpu = time.process_time() - cpu0
        wall = time.perf_counter() - wall0
        writer.end_stream()
        rc = reader.wait(timeout=60)
    n = a.frames - WARMUP
    print(f"python-writer: RATE frames_per_s={n / wall:.1f} CPU us_per_frame={cpu / n * 1e6:.2f} "
          f"frames={n} memory={a.memory} way={a.way}")
    sys.exit(rc)


def appsrc(a):
    """appsrc ! cudasink-ipc memory=host: the frame pushed as a wrapped buffer, copied by the
    sink into a slot (what a Python program paid before the writer)."""
    import gi
    gi.require_version("Gst", "1.0")
    from gi.repository import Gst
    Gst.init(None)
    pipeline = Gst.parse_launch(
        f"appsrc name=src format=time block=true max-buffers=2 caps=video/x-raw,format=BGRx,"
        f"width={a.width},height={a.height},framerate=0/1 ! cudasink-ipc memory=host "
        f"socket-path={a.path} wait-for-consumer=true backpressure=block sync=false")
    src = pipeline.get_by_name("src")
    pipeline.set_state(Gst.State.PLAYING)
    reader = subprocess.Popen(a.reader)
    frame = bytes(a.width * a.height * 4)
    for n in range(a.frames):
        if n == WARMUP:
            cpu0, wall0 = time.process_time(), time.perf_counter()
        buffer = Gst.Buffer.new_wrapped(frame)
        buffer.pts = n * 1000000
        if src.emit("push-buffer", buffer) != Gst.FlowReturn.OK:
            sys.exit("python-writer: appsrc refused a buffer")
    cpu = time.process_time() - cpu0
    wall = time.perf_counter() - wall0
    src.emit("end-of-stream")
    rc = reader.wait(timeout=60)
    pipeline.set_state(Gst.State.NULL)
    n = a.frames - WARMUP
    print(f"python-writer: RATE frames_per_s={n / wall:.1f} CPU us_per_frame={cpu / n * 1e6:.2f} "
          f"frames={n} memory={a.memory} way=appsrc")
    sys.exit(rc)


if __name__ == "__main__":
    main()
