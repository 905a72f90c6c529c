#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Serves frames drawn on the GPU by PyTorch (CuPy if PyTorch is missing) straight into the CUDA
slots consumers read: cudaipc.Writer with memory="cuda", no copy on either side, no CPU wait.

    PYTHONPATH=python CUDAIPC_LIBRARY=build/libcudaipc/libcudaipc.so.0 \\
        python3 examples/python_publish_torch.py --socket-path /tmp/torch.sock --frames 0

Each acquired slot becomes a tensor in place (torch.from_dlpack, or torch.as_tensor of its
__cuda_array_interface__), is drawn on torch's current stream, and is published on that stream:
consumers receive it once the GPU has finished drawing. Watch or read it in another shell:

    gst-launch-1.0 cudasrc-ipc socket-path=/tmp/torch.sock ! videoconvert ! autovideosink
    PYTHONPATH=python CUDAIPC_LIBRARY=build/libcudaipc/libcudaipc.so.0 \\
        python3 examples/python_frame_stats.py --socket /tmp/torch.sock --frames 100
"""

import argparse
import time

import cudaipc

try:
    import torch
except ImportError:
    torch = None
    try:
        import cupy
    except ImportError:
        raise SystemExit("python_publish_torch.py draws with PyTorch, or CuPy: install one") \
            from None


def main():
    parser = argparse.ArgumentParser(description="Serve frames drawn on the GPU by PyTorch")
    parser.add_argument("--socket-path", "--socket", default=None,
                        help="the socket to serve (default: the elements' per-user default)")
    parser.add_argument("--frames", type=int, default=300,
                        help="frames to send (0: until Ctrl-C; default 300)")
    parser.add_argument("--width", type=int, default=1920)
    parser.add_argument("--height", type=int, default=1080)
    args = parser.parse_args()

    xp = torch if torch is not None else cupy
    device = {"device": "cuda"} if torch is not None else {}
    columns = xp.arange(args.width, **device).reshape(1, -1)  # int64 ramps, broadcast to (H, W)
    rows = xp.arange(args.height, **device).reshape(-1, 1)
    with cudaipc.Writer(args.socket_path, format="BGRx", width=args.width, height=args.height,
                        memory="cuda") as writer:
        print(f"serving {writer.socket_path or '(the default socket)'} from "
              f"{'PyTorch' if torch is not None else 'CuPy'}; Ctrl-C stops")
        n = 0
        started = time.monotonic()
        try:
            while args.frames == 0 or n < args.frames:
                with writer.acquire() as frame:  # Ctrl-C in here gives the slot back
                    if torch is not None:
                        stream = torch.cuda.current_stream()
                        image = torch.from_dlpack(frame)  # (H, W, 4) uint8 on the GPU, in place
                    else:
                        stream = cupy.cuda.get_current_stream()
                        image = cupy.asarray(frame)  # through __cuda_array_interface__
                    # B G R x: a diagonal wave moving over a gradient, drawn on `stream`
                    wave = (columns + rows + n * 8) % 256
                    image[..., 0] = wave
                    image[..., 1] = (rows * 255 // args.height)
                    image[..., 2] = 255 - wave
                    del image  # not used after publish: the slot is the consumers' then
                    frame.publish(stream=stream)  # sent once `stream` has drawn it
                n += 1
        except KeyboardInterrupt:
            pass
        writer.end_stream()
        elapsed = time.monotonic() - started
        print(f"sent {n} frames ({n / elapsed:.0f} fps); writer: {writer.stats}")


if __name__ == "__main__":
    main()
