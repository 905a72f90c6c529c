#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""cudaipc.Writer on the GPU, every frame checked bit-exact by a Reader in a child process.

Frames are drawn by PyTorch (CuPy if PyTorch is missing) in this process and compared on the GPU
by a cudaipc.Reader in a child process.

    gpu_torch_writer.py --path PATH [--frames 600] [--width 1920] [--height 1080] [--copy]
                        [--result-timeout 120]

For a GPU machine (not a CI test). The writer (CUDA memory, backpressure="block", live=False:
every frame reaches the reader) draws frame n - a BGRx pattern computed from n - on a stream of
its own and publishes it with that stream (no CPU wait):

- default (mode=acquire): into the slot acquire() lends, in place, through torch.from_dlpack()
  for even frames and torch.as_tensor() of __cuda_array_interface__ for odd ones (CuPy:
  cupy.from_dlpack() / cupy.asarray());
- --copy (mode=copy): into a tensor of its own, then writer.publish(tensor): one GPU copy per
  frame, counted in the writer's stats["copies"].

The reader (this script again, --role reader) receives every frame in CUDA memory
(torch.from_dlpack, in place), recomputes the pattern of the frame its pts names and counts
differing bytes on the GPU. Prints one line,

    gpu-torch-writer: N/N frames bit-exact WxH mode=acquire backend=torch

and exits 0, or prints what went wrong and exits 1.
"""

import argparse
import importlib.util
import json
import os
import faulthandler
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time

import cudaipc

BASE_PTS = 1000000000
PTS_STEP = 1000000
ATTACH_TIMEOUT_S = 60  # the reader's start: Python, torch, CUDA


def pts_of(n):
    return BASE_PTS + n * PTS_STEP


def frame_number(pts_ns):
    return (pts_ns - BASE_PTS) // PTS_STEP


class TorchBackend:
    name = "torch"

    def __init__(self, width, height):
        import torch

        self.torch = torch
        y = torch.arange(height, device="cuda", dtype=torch.int32).view(-1, 1, 1)
        x = torch.arange(width, device="cuda", dtype=torch.int32).view(1, -1, 1)
        c = torch.arange(4, device="cuda", dtype=torch.int32).view(1, 1, -1)
        self.base = (x * 7 + y * 13 + c * 61) & 255  # (H, W, 4)
        self.xy = (x * y) & 255  # (H, W, 1)
        torch.cuda.synchronize()  # used on other streams from here on

    def pattern(self, n):
        """Frame n as an (H, W, 4) uint8 tensor, on the current stream."""
        return (((self.base + n * 29) ^ (self.xy + n)) & 255).to(self.torch.uint8)

    def new_stream(self):
        return self.torch.cuda.Stream()

    def on_stream(self, stream):
        return self.torch.cuda.stream(stream)

    def writable(self, frame, n):
        """The lent slot as a tensor, in place: DLPack or __cuda_array_interface__."""
        if n % 2 == 0:
            return self.torch.from_dlpack(frame)
        return self.torch.as_tensor(frame, device="cuda")

    def readable(self, frame):
        return self.torch.from_dlpack(frame)

    def differing(self, image, expected):
        return (image != expected).sum()

    def total(self, counts):
        return int(self.torch.stack(counts).sum().item()) if counts else 0

    def pointer(self, tensor):
        return tensor.data_ptr()


class CupyBackend:
    name = "cupy"

    def __init__(self, width, height):
        import cupy

        self.cupy = cupy
        y = cupy.arange(height, dtype=cupy.int32).reshape(-1, 1, 1)
        x = cupy.arange(width, dtype=cupy.int32).reshape(1, -1, 1)
        c = cupy.arange(4, dtype=cupy.int32).reshape(1, 1, -1)
        self.base = (x * 7 + y * 13 + c * 61) & 255
        self.xy = (x * y) & 255
        cupy.cuda.Device().synchronize()

    def pattern(self, n):
        return (((self.base + n * 29) ^ (self.xy + n)) & 255).astype(self.cupy.uint8)

    def new_stream(self):
        return self.cupy.cuda.Stream(non_blocking=True)

    def on_stream(self, stream):
        return stream  # a CuPy stream is its own context manager

    def writable(self, frame, n):
        if n % 2 == 0:
            return self.cupy.from_dlpack(frame)
        return self.cupy.asarray(frame)

    def readable(self, frame):
        return self.cupy.from_dlpack(frame)

    def differing(self, image, expected):
        return (image != expected).sum()

    def total(self, counts):
        return int(self.cupy.stack(counts).sum().get()) if counts else 0

    def pointer(self, array):
        return array.data.ptr


def backend_for(width, height):
    if importlib.util.find_spec("torch") is None:
        return CupyBackend(width, height)
    return TorchBackend(width, height)


def read(args):
    """The reader: every frame until the stream ends, compared on the GPU."""
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the writer asks when it waits long
    backend = backend_for(args.width, args.height)
    received, out_of_order, bad_duration, counts = 0, [], [], []
    with cudaipc.Reader(args.path, memory="cuda", max_in_flight=4) as reader:
        # Its counters on stderr when the writer waits long (connects > 1: it lost the producer
        # and attached again).
        signal.signal(signal.SIGUSR2, lambda *_: print(
            "reader stats:", json.dumps(reader.stats), f"received {received}", file=sys.stderr, flush=True))
        print("ATTACHED", flush=True)
        for frame in reader:  # until EndOfStream
            with frame:  # released after the GPU work queued on the legacy default stream
                n = frame_number(frame.pts_ns)
                if n != received:
                    out_of_order.append([received, n])
                if frame.duration_ns != 1000 + n:
                    bad_duration.append(n)
                if (frame.format, frame.width, frame.height) != ("BGRx", args.width,
                                                                 args.height):
                    raise SystemExit(f"frame {n} is {frame.format} {frame.width}x{frame.height}")
                image = backend.readable(frame)  # waits for the writer on the GPU
                counts.append(backend.differing(image, backend.pattern(n)))
                del image
            received += 1
            if received % 100 == 0:
                print(f"PROGRESS {received}", flush=True)  # what a timeout message names
        print("ENDED", flush=True)  # the stream's end reached the reader
        stats = reader.stats
    print("CLOSED", flush=True)
    total = backend.total(counts)  # waits for the comparisons on the GPU
    print("RESULT", json.dumps({"received": received, "differing_bytes": total,
                                "out_of_order": out_of_order[:10],
                                "bad_duration": bad_duration[:10], "stats": stats}), flush=True)
    return 0


def show_reader_stacks(child):
    """What a reader that stopped talking is doing: its counters (SIGUSR2), its Python threads
    (faulthandler, SIGUSR1) and, where gdb is installed, its native threads. On stderr."""
    if child.poll() is not None:
        return
    child.send_signal(signal.SIGUSR2)
    time.sleep(0.5)
    child.send_signal(signal.SIGUSR1)
    time.sleep(1)
    gdb = shutil.which("gdb") or shutil.which("cuda-gdb")
    if gdb:
        subprocess.run([gdb, "-batch", "-p", str(child.pid), "-ex", "thread apply all bt"],
                       stdout=sys.stderr, stderr=subprocess.STDOUT, timeout=120, check=False)


def write(args):
    """The writer, and the reader in a child process."""
    backend = backend_for(args.width, args.height)
    mode = "copy" if args.copy else "acquire"
    command = [sys.executable, os.path.abspath(__file__), "--role", "reader", "--path",
               args.path, "--frames", str(args.frames), "--width", str(args.width),
               "--height", str(args.height)]
    problems = []
    with cudaipc.Writer(args.path, format="BGRx", width=args.width, height=args.height,
                        memory="cuda", backpressure="block", live=False) as writer:
        child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        lines = queue.Queue()

        def pump():
            for line in child.stdout:
                lines.put(line.rstrip("\n"))
            lines.put(None)

        last = ["nothing"]

        def next_line(timeout_s, waiting_for):
            try:
                line = lines.get(timeout=timeout_s)
            except queue.Empty:
                show_reader_stacks(child)
                raise SystemExit(f"gpu-torch-writer: no {waiting_for} from the reader within "
                                 f"{timeout_s} s (its last line: {last[0]}; the writer's stats: "
                                 f"{json.dumps(writer.stats)})") from None
            last[0] = line
            return line

        threading.Thread(target=pump, daemon=True).start()
        try:
            if next_line(ATTACH_TIMEOUT_S, "ATTACHED") != "ATTACHED" or \
                    not writer.wait_for_consumer(10000):
                raise SystemExit("gpu-torch-writer: the reader did not attach")
            stream = backend.new_stream()
            for n in range(args.frames):
                if args.copy:
                    with backend.on_stream(stream):
                        image = backend.pattern(n)  # made on `stream`: copied after it
                    if not writer.publish(image, stream=stream, pts_ns=pts_of(n),
                                          duration_ns=1000 + n, timeout_ms=10000):
                        raise SystemExit(f"gpu-torch-writer: no slot for frame {n} in 10 s")
                    del image
                    continue
                frame = writer.acquire(10000)
                if frame is None:
                    raise SystemExit(f"gpu-torch-writer: no slot for frame {n} in 10 s")
                with frame:
                    with backend.on_stream(stream):
                        target = backend.writable(frame, n)
                        if backend.pointer(target) != frame.data_ptr:
                            raise SystemExit(f"frame {n}: the tensor is not the slot's memory")
                        target[...] = backend.pattern(n)  # drawn into the slot, on `stream`
                        del target
                    frame.publish(stream=stream, pts_ns=pts_of(n), duration_ns=1000 + n)
            writer.end_stream()
            stats = writer.stats
            result = None
            while True:
                line = next_line(args.result_timeout, "result")
                if line is None:
                    break
                if line.startswith("RESULT "):
                    result = json.loads(line.split(" ", 1)[1])
            status = child.wait(timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    if status != 0 or result is None:
        problems.append(f"the reader exited with {status} and no result")
        result = {"received": 0, "differing_bytes": None}
    else:
        if result["received"] != args.frames:
            problems.append(f"the reader received {result['received']} of {args.frames} frames")
        if result["differing_bytes"]:
            problems.append(f"{result['differing_bytes']} bytes differ from what was drawn")
        if result["out_of_order"]:
            problems.append(f"frames out of order (index, frame): {result['out_of_order']}")
        if result["bad_duration"]:
            problems.append(f"durations not passed through: frames {result['bad_duration']}")
    expected_copies = args.frames if args.copy else 0
    if stats["copies"] != expected_copies or stats["frames_published"] != args.frames:
        problems.append(f"writer stats: {stats['frames_published']} published, "
                        f"{stats['copies']} copies (expected {args.frames}, {expected_copies})")
    exact = result["received"] if not problems else 0
    print(f"gpu-torch-writer: {exact}/{args.frames} frames bit-exact {args.width}x{args.height} "
          f"mode={mode} backend={backend.name}")
    for problem in problems:
        print(f"gpu-torch-writer: FAIL: {problem}", file=sys.stderr)
    print(json.dumps({"writer": stats, "reader": result.get("stats")}), file=sys.stderr)
    return 1 if problems else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--path", required=True, help="the socket path to serve")
    parser.add_argument("--frames", type=int, default=600, help="frames to send (600)")
    parser.add_argument("--width", type=int, default=1920)
    parser.add_argument("--height", type=int, default=1080)
    parser.add_argument("--copy", action="store_true",
                        help="draw into tensors of its own and publish copies (writer.publish)")
    parser.add_argument("--result-timeout", type=int, default=120,
                        help="seconds to wait for the reader's result after the last frame (120); "
                             "then the reader's stacks are shown")
    parser.add_argument("--role", choices=("writer", "reader"), default="writer",
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.frames < 1 or args.width < 1 or args.height < 1:
        parser.error("--frames, --width and --height must be positive")
    return read(args) if args.role == "reader" else write(args)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except cudaipc.Error as e:  # busy, no GPU, ...: the library's sentence says why
        sys.exit(f"gpu-torch-writer: {e}")
