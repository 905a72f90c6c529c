#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Frames shared with cudasink-ipc leave the machine through GStreamer's own network elements.

Three real gst-launch-1.0 processes on loopback (127.0.0.1 only):

  producer  videotestsrc is-live=true pattern=smpte horizontal-speed=1 num-buffers=N ! I420 320x240 30/1 ! tee
              ! queue ! cudasink-ipc memory=host socket-path=S
              tee. ! queue ! checksumsink                      (the checksum of every frame sent)
  relay     cudasrc-ipc socket-path=S ! <payloader> ! <network sink>
  receiver  <network source> ! <depayloader> ! checksumsink     (the checksum of every frame received)

Transports (--transport):
  rtp      rtpvrawpay ! udpsink            |  udpsrc ! rtpvrawdepay
  srt      rtpvrawpay mtu=1316 ! srtsink   |  srtsrc ! rtpvrawdepay      (RTP packets in SRT)
  srt-gdp  gdppay ! srtsink                |  srtsrc ! gdpdepay          (caps travel in-band)

The SMPTE bars scroll one pixel a frame: 320 distinct frames, none a mirror image of another
(the ball pattern is symmetric: a flipped frame would still match). Passes when at least
--min-frames distinct frames arrive, every frame received is bit-for-bit one the producer sent,
and they arrive in the order sent (frames may be missing: those sent before the relay connected,
or lost at the end). Exit 0 pass, 1 fail, 77 skip (an element of the transport is not
installed). Every process is bounded by timeouts and killed at the end.
CUDAIPC_NETWORK_REQUIRE=name[,name] adds elements that must exist (a name that does not exist
simulates a machine without them: the test skips).
"""

import argparse
import atexit
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
WIDTH, HEIGHT, FPS = 320, 240, 30
VIDEO_CAPS = f"video/x-raw,format=I420,width={WIDTH},height={HEIGHT},framerate={FPS}/1"
RTP_CAPS = ("application/x-rtp,media=video,clock-rate=90000,encoding-name=RAW,"
            "sampling=YCbCr-4:2:0,depth=(string)8,"
            f"width=(string){WIDTH},height=(string){HEIGHT},"
            "colorimetry=(string)BT601-5,payload=96")
CHECKSUM_LINE = re.compile(r"^\d+:\d\d:\d\d\.\d+ ([0-9a-f]{40})$")

COMMON = ["videotestsrc", "tee", "queue", "checksumsink", "cudasink-ipc", "cudasrc-ipc"]
TRANSPORT_ELEMENTS = {
    "rtp": ["rtpvrawpay", "rtpvrawdepay", "udpsink", "udpsrc"],
    "srt": ["rtpvrawpay", "rtpvrawdepay", "srtsink", "srtsrc"],
    "srt-gdp": ["gdppay", "gdpdepay", "srtsink", "srtsrc"],
}
OURS = {"cudasink-ipc", "cudasrc-ipc"}  # missing: the build is broken, a failure, not a skip


def pipelines(transport, socket_path, port, frames):
    producer = (f"videotestsrc is-live=true pattern=smpte horizontal-speed=1 num-buffers={frames} ! {VIDEO_CAPS} "
                f"! tee name=t ! queue ! cudasink-ipc memory=host socket-path={socket_path} "
                f"t. ! queue ! checksumsink")
    source = f"cudasrc-ipc socket-path={socket_path} connect-timeout=20000"
    srt_listener = f"srtsink uri=srt://127.0.0.1:{port}?mode=listener"
    srt_caller = f"srtsrc uri=srt://127.0.0.1:{port}?mode=caller"
    if transport == "rtp":
        relay = f"{source} ! rtpvrawpay ! udpsink host=127.0.0.1 port={port}"
        receiver = (f"udpsrc address=127.0.0.1 port={port} buffer-size=4194304 caps=\"{RTP_CAPS}\" "
                    "! rtpvrawdepay ! checksumsink")
    elif transport == "srt":
        relay = f"{source} ! rtpvrawpay mtu=1316 ! {srt_listener}"
        receiver = f"{srt_caller} ! {RTP_CAPS} ! rtpvrawdepay ! checksumsink"
    else:
        relay = f"{source} ! gdppay ! {srt_listener}"
        receiver = f"{srt_caller} ! gdpdepay ! checksumsink"
    return producer, relay, receiver


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def udp_port_bound(port):
    """True once some socket is bound to UDP port `port` (IPv4 or IPv6), from /proc/net."""
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    local = line.split()[1]
                    if int(local.rsplit(":", 1)[1], 16) == port:
                        return True
        except (OSError, StopIteration, IndexError, ValueError):
            continue
    return False


def in_order(received, sent):
    """True when `received` is `sent` with some frames left out: the same frames, same order."""
    it = iter(sent)
    return all(any(c == s for s in it) for c in received)


def missing_elements(inspect, names):
    missing = []
    for name in names:
        try:
            r = subprocess.run([inspect, name], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=60)
            if r.returncode != 0:
                missing.append(name)
        except subprocess.TimeoutExpired:
            missing.append(name)
    return missing


class Proc:
    def __init__(self, name, launch, pipeline, workdir):
        self.name = name
        self.out_path = os.path.join(workdir, name + ".out")
        self.err_path = os.path.join(workdir, name + ".err")
        self.pipeline = pipeline
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            # -q: only checksumsink's lines on stdout. Split as a shell would (gst-launch
            # escapes each argument), so the pipeline is exactly what one would type.
            self.p = subprocess.Popen([launch, "-q"] + shlex.split(pipeline), stdout=out, stderr=err,
                                      stdin=subprocess.DEVNULL)

    def wait(self, timeout):
        try:
            return self.p.wait(timeout=max(0.0, timeout))
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace=5.0):
        """SIGINT (gst-launch stops the pipeline and exits, flushing stdout), then SIGKILL."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGINT)
            if self.wait(grace) is None:
                self.p.kill()
                self.p.wait()
        return self.p.returncode

    def checksums(self):
        sums = []
        with open(self.out_path, errors="replace") as f:
            for line in f:
                m = CHECKSUM_LINE.match(line.strip())
                if m:
                    sums.append(m.group(1))
        return sums

    def stderr_tail(self, n=15):
        with open(self.err_path, errors="replace") as f:
            return "".join(f.readlines()[-n:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--transport", choices=sorted(TRANSPORT_ELEMENTS), default="rtp")
    ap.add_argument("--frames", type=int, default=150, help="frames the producer sends (30/s)")
    ap.add_argument("--min-frames", type=int, default=20, help="distinct frames that must arrive")
    ap.add_argument("--deadline", type=float, default=90.0, help="seconds for the whole run")
    args = ap.parse_args()
    name = f"network-relay-{args.transport}"

    launch = shutil.which("gst-launch-1.0")
    inspect = shutil.which("gst-inspect-1.0")
    if not launch or not inspect:
        print(f"SKIP {name}: gst-launch-1.0 / gst-inspect-1.0 not installed")
        return SKIP

    extra = [e for e in os.environ.get("CUDAIPC_NETWORK_REQUIRE", "").split(",") if e.strip()]
    needed = list(dict.fromkeys(COMMON + TRANSPORT_ELEMENTS[args.transport] + extra))
    missing = missing_elements(inspect, needed)  # also builds the registry, outside the timing
    ours = [e for e in missing if e in OURS]
    if ours:
        print(f"FAIL {name}: the built plugin does not provide {', '.join(ours)} "
              f"(GST_PLUGIN_PATH={os.environ.get('GST_PLUGIN_PATH', '')})")
        return 1
    if missing:
        print(f"SKIP {name}: element(s) not installed: {', '.join(missing)} "
              "(rtp: gstreamer1.0-plugins-good; srt, checksumsink: gstreamer1.0-plugins-bad; "
              "gdp: gstreamer1.0-plugins-bad)")
        return SKIP

    workdir = tempfile.mkdtemp(prefix="cudaipc-net-")
    atexit.register(shutil.rmtree, workdir, True)
    # meson's timeout sends SIGTERM: unwind, so the finally below stops the three processes
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    socket_path = os.path.join(workdir, "relay.sock")
    port = free_udp_port()
    producer_desc, relay_desc, receiver_desc = pipelines(args.transport, socket_path, port,
                                                         args.frames)
    t0 = time.monotonic()
    deadline = t0 + args.deadline
    left = lambda: deadline - time.monotonic()  # noqa: E731
    procs = {}
    problems = []
    try:
        # Who listens starts first: the UDP receiver (rtp) or the SRT listener in the relay (srt).
        order = ["receiver", "relay"] if args.transport == "rtp" else ["relay", "receiver"]
        descs = {"receiver": receiver_desc, "relay": relay_desc}
        for role in order:
            procs[role] = Proc(role, launch, descs[role], workdir)
            if role == order[0]:
                bound_by = time.monotonic() + 10
                while not udp_port_bound(port) and time.monotonic() < bound_by:
                    if procs[role].p.poll() is not None:
                        break
                    time.sleep(0.05)
                if not udp_port_bound(port):
                    problems.append(f"{role} never bound UDP port {port}")
                    raise RuntimeError
        time.sleep(0.5)  # the SRT caller connects; cudasrc-ipc is waiting for the producer
        procs["producer"] = Proc("producer", launch, producer_desc, workdir)

        # The producer sends --frames frames at 30/s and stops (EOS -> relay ends with EOS).
        rc = procs["producer"].wait(min(left(), args.frames / FPS + 30))
        if rc is None:
            problems.append("producer did not finish in time")
        elif rc != 0:
            problems.append(f"producer exited with {rc}")
        rc = procs["relay"].wait(min(left(), 15))
        if rc is None:
            problems.append("relay did not end after the producer's EOS")
        elif rc != 0:
            problems.append(f"relay exited with {rc}")
        # The receiver sees no EOS over RTP/UDP: let the last packets land, then stop it.
        procs["receiver"].wait(min(left(), 1.5))
    except RuntimeError:
        pass
    finally:
        for role in ("producer", "relay", "receiver"):
            if role in procs:
                procs[role].stop()
    elapsed = time.monotonic() - t0

    sent = procs["producer"].checksums() if "producer" in procs else []
    received = procs["receiver"].checksums() if "receiver" in procs else []
    sent_set = set(sent)
    unknown = [c for c in received if c not in sent_set]
    distinct = len(set(received))
    if len(sent) < args.min_frames:
        problems.append(f"producer reported only {len(sent)} frames")
    if unknown:
        problems.append(f"{len(unknown)} received frame(s) differ from every frame sent")
    if not unknown and not in_order(received, sent):
        problems.append("frames arrived out of order (or repeated)")
    if distinct < args.min_frames:
        problems.append(f"only {distinct} distinct frames arrived (need {args.min_frames})")

    summary = (f"{name}: {len(received)}/{len(sent)} frames received ({distinct} distinct), "
               f"{len(unknown)} corrupt, port {port}, {elapsed:.1f} s")
    if problems:
        print(f"FAIL {summary}: " + "; ".join(problems))
        for role, proc in procs.items():
            print(f"--- {role}: gst-launch-1.0 -q '{proc.pipeline}'")
            tail = proc.stderr_tail()
            if tail:
                print(tail.rstrip())
        return 1
    print(f"PASS {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
