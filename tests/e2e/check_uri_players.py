#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Players that take a URI open a cudaipc:// stream (issue 25, item 8), in host memory.

Two real processes:

  producer  gst-launch-1.0 videotestsrc is-live=true pattern=smpte horizontal-speed=1 num-buffers=N
              ! BGRA 320x240 30/1 ! tee ! queue ! cudasink-ipc memory=host socket-path=S
              tee. ! queue ! checksumsink                  (the checksum of every frame sent)
            or, with --producer writer (issue 45: consumers cannot tell a writer from the
            element), a Python program publishing N frames of its own through cudaipc.Writer
            (memory="host", BGRA 320x240 at 30 frames/s), printing the same checksum lines
  consumer  one of (--player):
    gst-play  gst-play-1.0 --videosink=checksumsink cudaipc://S?connect-timeout=10000
    playbin   gst-launch-1.0 playbin uri=cudaipc://S?connect-timeout=10000 video-sink=checksumsink
    opencv    cv2.VideoCapture("cudaipc://S", cv2.CAP_GSTREAMER) in this process, frames read

The socket's name has a space, so the URI carries it percent-encoded (cam%200.sock). The
players pick cudasrc-ipc for the URI, playbin's uridecodebin finds its raw video and renders it
with the given sink. Every player passes when at least --min-frames distinct frames arrive,
every one bit-for-bit a frame the producer sent (OpenCV's BGR frames are compared as the BGRA
frames they were made from: alpha 255), in the order it sent them, and the player ends by
itself at the producer's EOS without an error. Exit 0 pass, 1 fail, 77 skip (gst-play-1.0 or cv2 not
installed; the built plugin missing is a failure).
"""

import argparse
import atexit
import hashlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from gst_processes import (SKIP, installed, start, stop, tail,  # noqa: E402
                           tools_and_plugin, wait_for_socket)

WIDTH, HEIGHT, FPS = 320, 240, 30
VIDEO_CAPS = f"video/x-raw,format=BGRA,width={WIDTH},height={HEIGHT},framerate={FPS}/1"
# checksumsink prints "<timestamp> <sha1>" for each buffer
CHECKSUM_LINE = re.compile(r"(\d+:\d\d:\d\d\.\d+) ([0-9a-f]{40})")


def checksums(path):
    with open(path, errors="replace") as f:
        return [m.group(2) for m in CHECKSUM_LINE.finditer(f.read())]


def read_with_opencv(uri, deadline):
    """Frames cv2.VideoCapture reads from `uri` until the stream ends: (shape, checksums), each
    checksum the SHA-1 of the BGRA frame the BGR one came from (alpha 255), as checksumsink
    computes it for the producer's frames."""
    import cv2  # noqa: the caller checked that it imports
    import numpy
    capture = cv2.VideoCapture(uri, cv2.CAP_GSTREAMER)
    if not capture.isOpened():
        return None, []
    shape, sums = None, []
    while time.monotonic() < deadline:
        ok, frame = capture.read()
        if not ok:
            break
        shape = frame.shape
        if shape == (HEIGHT, WIDTH, 3):
            alpha = numpy.full((HEIGHT, WIDTH, 1), 255, dtype=numpy.uint8)
            bgra = numpy.ascontiguousarray(numpy.concatenate([frame, alpha], axis=2))
            sums.append(hashlib.sha1(bgra.tobytes()).hexdigest())
    capture.release()
    return shape, sums


# The --producer writer program: N distinct BGRA frames drawn into the writer's slots through
# ctypes (no NumPy needed), 30 per second, each one's SHA-1 printed as checksumsink prints it.
WRITER_PROGRAM = f"""
import ctypes, hashlib, sys, time
import cudaipc
path, frames = sys.argv[1], int(sys.argv[2])
size = {WIDTH} * {HEIGHT} * 4
with cudaipc.Writer(path, format="BGRA", width={WIDTH}, height={HEIGHT}, memory="host",
                    framerate=({FPS}, 1)) as writer:
    start = time.monotonic()
    for n in range(frames):
        time.sleep(max(0.0, start + n / {FPS} - time.monotonic()))
        row = bytes((x * 3 + n * 5 + c) % 256 for x in range({WIDTH}) for c in range(4))
        content = b"".join(row[(y * 4) % len(row):] + row[:(y * 4) % len(row)]
                           for y in range({HEIGHT}))
        with writer.acquire() as frame:
            ctypes.memmove(frame.data_ptr, content, size)
            frame.publish(duration_ns=1000000000 // {FPS})
        print(f"0:00:00.{{n:09d}} {{hashlib.sha1(content).hexdigest()}}", flush=True)
    writer.end_stream()
    time.sleep(1)  # the players read the last frames and the EOS before the writer goes
"""


def in_sent_order(received, sent):
    """Whether every received checksum is a sent frame's and they come in the order sent."""
    position = {}
    for i, c in enumerate(sent):
        position.setdefault(c, i)
    last = -1
    for c in received:
        if c not in position or position[c] < last:
            return False
        last = position[c]
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--player", choices=["gst-play", "playbin", "opencv"], required=True)
    ap.add_argument("--producer", choices=["cudasink-ipc", "writer"], default="cudasink-ipc",
                    help="the element, or an application publishing through cudaipc.Writer")
    ap.add_argument("--frames", type=int, default=150, help="frames the producer sends (30/s)")
    ap.add_argument("--min-frames", type=int, default=75,
                    help="distinct frames that must arrive (half of what is sent)")
    ap.add_argument("--deadline", type=float, default=60.0, help="seconds for the whole run")
    args = ap.parse_args()
    name = f"uri-{args.player}" + ("-writer" if args.producer == "writer" else "")

    launch, inspect, status = tools_and_plugin(name)
    if status is not None:
        return status
    if not installed(inspect, "checksumsink"):
        print(f"SKIP {name}: checksumsink is not installed (gstreamer1.0-plugins-bad)")
        return SKIP
    # The players are built on playbin/uridecodebin (gst-plugins-base's playback plugin), which a
    # minimal GStreamer (scripts/build-gstreamer's prefixes) does not have.
    for element in ("playbin", "uridecodebin"):
        if not installed(inspect, element):
            print(f"SKIP {name}: this GStreamer has no {element} (gst-plugins-base's playback)")
            return SKIP
    play = shutil.which("gst-play-1.0")
    if args.player == "gst-play" and not play:
        print(f"SKIP {name}: gst-play-1.0 is not installed (gstreamer1.0-plugins-base-apps)")
        return SKIP
    if args.player == "opencv":
        try:
            import cv2
        except ImportError:
            print(f"SKIP {name}: OpenCV's Python module cv2 is not installed for {sys.executable} "
                  "(python3-opencv)")
            return SKIP
        if "GStreamer:                   YES" not in cv2.getBuildInformation():
            print(f"SKIP {name}: this OpenCV ({cv2.__version__}) is built without GStreamer")
            return SKIP

    workdir = tempfile.mkdtemp(prefix="cudaipc-uri-")
    atexit.register(shutil.rmtree, workdir, True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # meson's timeout: clean up below
    socket_path = os.path.join(workdir, "cam 0.sock")
    uri = "cudaipc://" + urllib.parse.quote(socket_path)  # "cam%200.sock"
    query = "?connect-timeout=10000"
    producer_cmd = [launch, "-q", "videotestsrc", "is-live=true", "pattern=smpte",
                    "horizontal-speed=1", f"num-buffers={args.frames}", "!", VIDEO_CAPS, "!",
                    "tee", "name=t", "!", "queue", "!", "cudasink-ipc", "memory=host",
                    f"socket-path={socket_path}", "t.", "!", "queue", "!", "checksumsink"]
    if args.producer == "writer":
        producer_cmd = [sys.executable, "-c", WRITER_PROGRAM, socket_path, str(args.frames)]
    if args.player == "gst-play":
        consumer_cmd = [play, "--no-interactive", "--videosink=checksumsink", uri + query]
    else:
        consumer_cmd = [launch, "-q", "playbin", f"uri={uri + query}", "video-sink=checksumsink"]

    deadline = time.monotonic() + args.deadline
    problems = []
    producer = consumer = None
    producer_out = os.path.join(workdir, "producer.out")
    consumer_out = os.path.join(workdir, "consumer.out")
    opencv = None
    try:
        producer = start(producer_cmd, producer_out)
        if not wait_for_socket(producer, socket_path):
            problems.append("the producer never served its socket")
            raise RuntimeError
        if args.player == "opencv":
            opencv = read_with_opencv(uri, deadline)
        else:
            consumer = start(consumer_cmd, consumer_out)
            try:
                rc = consumer.wait(max(0.0, deadline - time.monotonic()))
                if rc != 0:
                    problems.append(f"the player exited with status {rc}")
            except subprocess.TimeoutExpired:
                problems.append("the player did not end after the producer's EOS")
        try:
            rc = producer.wait(max(0.0, min(10.0, deadline - time.monotonic())))
            if rc != 0:
                problems.append(f"the producer exited with status {rc}")
        except subprocess.TimeoutExpired:
            problems.append("the producer did not finish")
    except RuntimeError:
        pass
    finally:
        for process in (consumer, producer):
            if process:
                stop(process)

    sent = checksums(producer_out)
    if len(sent) < args.frames:
        problems.append(f"the producer reported {len(sent)} of {args.frames} frames")
    if args.player == "opencv":
        shape, received = opencv or (None, [])
        if shape is not None and shape != (HEIGHT, WIDTH, 3):
            problems.append(f"frames of shape {shape}, not {(HEIGHT, WIDTH, 3)}")
    else:
        received = checksums(consumer_out) if os.path.exists(consumer_out) else []
        with open(consumer_out, errors="replace") as f:
            if "ERROR" in f.read():
                problems.append("the player printed an error")
    unknown = [c for c in received if c not in set(sent)]
    distinct = len(set(received))
    summary = (f"{name}: {len(received)}/{len(sent)} frames received ({distinct} distinct), "
               f"{len(unknown)} not a frame sent")
    if distinct < args.min_frames:
        problems.append(f"only {distinct} distinct frames arrived (need {args.min_frames})")
    if unknown:
        problems.append(f"{len(unknown)} frame(s) differ from every frame sent")
    elif not in_sent_order(received, sent):
        problems.append("frames arrived out of the order they were sent in")
    if problems:
        print(f"FAIL {summary}: " + "; ".join(problems))
        print(f"--- producer: {shlex.join(producer_cmd)}\n{tail(producer_out, 5)}")
        if consumer:
            print(f"--- player: {shlex.join(consumer_cmd)}\n{tail(consumer_out)}")
        return 1
    print(f"PASS {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
