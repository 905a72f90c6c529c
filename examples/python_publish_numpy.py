#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Serves a moving gradient from Python in shared host memory: each frame is drawn with NumPy
straight into the slot consumers read (cudaipc.Writer; no GStreamer, no copy, no GPU needed).

    PYTHONPATH=python CUDAIPC_LIBRARY=build/libcudaipc/libcudaipc.so.0 \\
        python3 examples/python_publish_numpy.py --socket-path /tmp/gradient.sock --frames 0

Watch it, or read it from Python, in another shell:

    gst-launch-1.0 cudasrc-ipc socket-path=/tmp/gradient.sock ! videoconvert ! autovideosink
    PYTHONPATH=python CUDAIPC_LIBRARY=build/libcudaipc/libcudaipc.so.0 \\
        python3 examples/python_frame_stats.py --socket /tmp/gradient.sock --frames 100

(GStreamer finds cudasrc-ipc in `meson devenv -C build`, or with GST_PLUGIN_PATH=build/gst.)
"""

import argparse
import time

import numpy

import cudaipc


def main():
    parser = argparse.ArgumentParser(description="Serve a moving gradient drawn with NumPy")
    parser.add_argument("--socket-path", "--socket", default=None,
                        help="the socket to serve (default: the elements' per-user default)")
    parser.add_argument("--frames", type=int, default=300,
                        help="frames to send (0: until Ctrl-C; default 300)")
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=360)
    parser.add_argument("--fps", type=float, default=30.0)
    args = parser.parse_args()

    # The gradient's pieces, once: a column ramp and a row ramp, broadcast to (H, W).
    columns = numpy.arange(args.width, dtype=numpy.uint32)[None, :] * 256 // args.width
    rows = numpy.arange(args.height, dtype=numpy.uint32)[:, None] * 256 // args.height
    period = 1 / args.fps
    with cudaipc.Writer(args.socket_path, format="BGRx", width=args.width, height=args.height,
                        memory="host", framerate=(round(args.fps * 1000), 1000)) as writer:
        print(f"serving {writer.socket_path or '(the default socket)'}; Ctrl-C stops")
        start = time.monotonic()
        n = 0
        try:
            while args.frames == 0 or n < args.frames:
                with writer.acquire() as frame:  # Ctrl-C in here gives the slot back
                    image = numpy.asarray(frame)  # (H, W, 4) uint8, B G R x, writable, in place
                    image[..., 0] = (columns + n * 4) % 256  # blue moves right
                    image[..., 1] = (rows + n * 2) % 256  # green moves down
                    image[..., 2] = 128
                    del image  # not used after publish: the slot is the consumers' then
                    frame.publish()  # pts: now
                n += 1
                time.sleep(max(0.0, start + n * period - time.monotonic()))
        except KeyboardInterrupt:
            pass
        writer.end_stream()
        print(f"sent {n} frames; writer: {writer.stats}")


if __name__ == "__main__":
    main()
