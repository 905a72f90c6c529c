# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the Python end-to-end tests share: gst-launch-1.0 processes started with their output in
a file and stopped the way gst-launch-1.0 expects, element checks, and a private X server."""

import os
import shutil
import signal
import subprocess
import time


def start(args, out_path, env=None):
    """A process with stdout and stderr in `out_path` and no stdin."""
    out = open(out_path, "wb")
    return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env)


def stop(process, grace=5.0):
    """SIGINT (gst-launch-1.0 and gst-play-1.0 stop and exit), then SIGKILL; the exit status."""
    if process is None:
        return None
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


def tail(path, n=20):
    """The last `n` lines of a log ("" where there is none)."""
    if not os.path.exists(path):
        return ""
    with open(path, errors="replace") as f:
        return "".join(f.read().splitlines(keepends=True)[-n:])


def installed(inspect, element):
    """Whether gst-inspect-1.0 (`inspect`) finds `element`."""
    return subprocess.run([inspect, element], capture_output=True, timeout=60).returncode == 0


def wait_for_socket(process, path, seconds=10.0):
    """True once `path` exists; False if `process` exits or `seconds` pass first."""
    ready_by = time.monotonic() + seconds
    while not os.path.exists(path) and time.monotonic() < ready_by:
        if process.poll() is not None:
            break
        time.sleep(0.05)
    return os.path.exists(path)


class Xvfb:
    """A private X server on the first free display from `first`; display is None without one."""

    def __init__(self, size="1920x1080", first=90):
        self.process = None
        self.display = None
        if shutil.which("Xvfb") is None:
            return
        for number in range(first, first + 40):
            if os.path.exists(f"/tmp/.X11-unix/X{number}") or os.path.exists(f"/tmp/.X{number}-lock"):
                continue
            process = subprocess.Popen(["Xvfb", f":{number}", "-screen", "0", f"{size}x24",
                                        "-nolisten", "tcp"], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
            for _ in range(50):
                if os.path.exists(f"/tmp/.X11-unix/X{number}"):
                    self.process, self.display = process, f":{number}"
                    return
                if process.poll() is not None:
                    break
                time.sleep(0.1)
            process.kill()
            process.wait()

    def close(self):
        if self.process:
            self.process.terminate()
            self.process.wait()
            self.process = None


SKIP = 77  # meson's exit status for a skipped test


def tools_and_plugin(name):
    """(gst-launch-1.0, gst-inspect-1.0, None), or (None, None, exit status) having said why:
    a skip without GStreamer's tools, a failure when the built plugin's elements are missing."""
    launch = shutil.which("gst-launch-1.0")
    inspect = shutil.which("gst-inspect-1.0")
    if not launch or not inspect:
        print(f"SKIP {name}: gst-launch-1.0 / gst-inspect-1.0 not installed (gstreamer1.0-tools)")
        return None, None, SKIP
    for element in ("cudasrc-ipc", "cudasink-ipc"):
        if not installed(inspect, element):
            print(f"FAIL {name}: the built plugin does not provide {element} "
                  f"(GST_PLUGIN_PATH={os.environ.get('GST_PLUGIN_PATH', '')})")
            return None, None, 1
    return launch, inspect, None
