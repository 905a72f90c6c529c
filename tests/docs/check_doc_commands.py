#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Runs the gst-launch-1.0 and gst-play-1.0 commands of README.md and docs/*.md as written
(issue 24, item 9; gst-play-1.0 and cudaipc:// URIs: issue 25, item 8).

Every fenced code block is read; its gst-launch-1.0 and gst-play-1.0 commands (backslash
continuations joined) are run together, as the reader would run them in separate shells: the producers of the block
(cudasink-ipc) first, then everything else. A display sink draws into a private Xvfb server.
Each command must reach PLAYING (gst-play-1.0: say "Now playing") and either still run,
without an ERROR, after RUN_SECONDS, or have ended with exit status 0; a consumer (cudasrc-ipc
or a cudaipc:// URI) must also have received a frame within that time: cudasrc-ipc's INFO line
"first frame from the producer", read through GST_DEBUG. RUN_SECONDS is longer than
cudasrc-ipc's default connect-timeout, so a consumer that is never served fails. The only change made to a
command is its socket path (socket-path=, or the path of a cudaipc:// URI) and any file it
writes, moved into a scratch directory so that the test needs no /run and leaves nothing behind.

A command this machine cannot run is skipped with the reason, and its consumers with it: a
CUDA GPU (memory=cuda is the sink's default, rg10tobgra, nvcodec), a V4L2 camera, another host,
an excerpt ("..."), or an element that is not installed. The list of what ran and what was
skipped is printed; a command that fails, or a run with nothing to run, fails the test.

Environment: GST_PLUGIN_PATH (the built plugin), CUDAIPC_SOURCE_ROOT (the repository; default:
two folders up). Needs Xvfb (package xvfb) for the display sinks.
"""

import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from gst_processes import Xvfb  # noqa: E402

ROOT = os.environ.get("CUDAIPC_SOURCE_ROOT",
                      os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RUN_SECONDS = 7  # longer than cudasrc-ipc's 5 s connect-timeout
FIRST_FRAME = "first frame from the producer"
# The producer a block's consumer gets where the block shows none (its socket path is appended).
STAND_IN = ["gst-launch-1.0", "videotestsrc", "is-live=true", "!",
            "video/x-raw,format=I420,width=320,height=240,framerate=30/1", "!", "cudasink-ipc",
            "memory=host"]
X_REFUSED = "Could not open display"
DISPLAY_SINKS = {"ximagesink", "xvimagesink", "glimagesink", "autovideosink", "gtksink"}
PROGRAMS = ("gst-launch-1.0", "gst-play-1.0")
# The socket path of a cudaipc:// URI (percent-encoded), anywhere in a word ("uri=cudaipc://...").
CUDAIPC_URI = re.compile(r"cudaipc://(/[^?#\s]*)")

# (pattern over the command, why this machine cannot run it), checked in order.
NEEDS = [
    (r"\.\.\.", "an excerpt ('...')"),
    (r"cudav4l2src|/dev/video", "a V4L2 camera"),
    (r"\bnv[a-z0-9]*(enc|dec)\b|nvv4l2|cudaupload|cudadownload|cudaconvert|CUDAMemory",
     "NVIDIA's GStreamer elements and a CUDA GPU"),
    (r"\brg10tobgra\b", "a CUDA GPU (rg10tobgra)"),
    (r"192\.0\.2\.|camera-host|mode=caller", "another host"),
]


SHELL_FENCES = {"", "sh", "bash", "shell", "console"}


def code_blocks(path):
    """The fenced shell code blocks of a Markdown file (no language, or sh/bash/shell/console),
    each a list of lines."""
    blocks, current, language = [], None, ""
    with open(path, encoding="utf-8") as text:
        for line in text:
            fence = line.strip()
            if fence.startswith("```"):
                if current is None:
                    current, language = [], fence[3:].strip().lower()
                else:
                    if language in SHELL_FENCES:
                        blocks.append(current)
                    current = None
            elif current is not None:
                current.append(line.rstrip("\n"))
    return blocks


def commands_of(block):
    """The gst-launch-1.0 and gst-play-1.0 commands of a block, as the shell reads them: a backslash-newline is
    removed (inside quotes too), a trailing comment and a trailing '&' are not the command's."""
    commands, pending = [], None
    for line in block:
        if pending is None:
            if not line.strip().startswith(tuple(p + " " for p in PROGRAMS)):
                continue
            pending = line.strip()
        else:
            pending += line
        if pending.endswith("\\"):
            pending = pending[:-1]
            continue
        words = shlex.split(pending, comments=True)
        if words and words[-1] == "&":
            words.pop()
        commands.append(words)
        pending = None
    return commands


def elements_of(words):
    """The element factory names in a pipeline description."""
    names, expect = [], True
    for word in words[1:]:
        if word == "!":
            expect = True
            continue
        if expect and not word.startswith("-"):
            expect = False
            if "/" not in word and "=" not in word and not word.startswith("("):
                names.append(word.split(".")[0])
    return names


def installed(element, cache={}):
    if element not in cache:
        cache[element] = subprocess.run(["gst-inspect-1.0", element],
                                        capture_output=True).returncode == 0
    return cache[element]


def socket_of(words):
    for word in words:
        if word.startswith("socket-path="):
            return word.split("=", 1)[1]
        uri = CUDAIPC_URI.search(word)
        if uri:
            return urllib.parse.unquote(uri.group(1))
    return None


def move_socket(word, scratch):
    """`word` with its socket path (socket-path=P, or a cudaipc:// URI's) moved into `scratch`."""
    if word.startswith("socket-path="):
        return "socket-path=" + os.path.join(scratch, os.path.basename(word.split("=", 1)[1]))
    def moved(uri):
        path = os.path.join(scratch, os.path.basename(urllib.parse.unquote(uri.group(1))))
        return "cudaipc://" + urllib.parse.quote(path)
    return CUDAIPC_URI.sub(moved, word)


def is_consumer(words):
    """A command that reads a stream: cudasrc-ipc, or a player of a cudaipc:// URI."""
    return "cudasrc-ipc" in elements_of(words) or any("cudaipc://" in w for w in words)


def needs_display(words):
    """gst-play-1.0 shows video in autovideosink, as do the display sinks."""
    return words[0] == "gst-play-1.0" or bool(DISPLAY_SINKS.intersection(elements_of(words)))


def why_not(words):
    """Why this machine cannot run the command, or None."""
    text = " ".join(words)
    for pattern, need in NEEDS:
        if re.search(pattern, text):
            return need
    if "cudasink-ipc" in words and "memory=host" not in words:
        return "a CUDA GPU (cudasink-ipc's default memory=cuda)"
    needed = elements_of(words)
    # A player shows the stream through playbin into autovideosink, which it does not name.
    if words[0] == "gst-play-1.0" or "playbin" in needed:
        needed += ["playbin", "autovideosink"]
    for element in needed:
        if not installed(element):
            return f"the element {element}, which is not installed here"
    return None


def run_block(commands, scratch, display, log):
    """Runs one block's commands together; returns a list of (words, failure or None)."""
    started = []
    env = dict(os.environ)
    # meson sets MALLOC_PERTURB_ for its tests; with it, GStreamer 1.22's X sinks now and then
    # fail with "Could not open display" (reproduced with videotestsrc ! autovideosink alone,
    # 2 of 15 runs), which is not what this test is about.
    env.pop("MALLOC_PERTURB_", None)
    if display:
        env["DISPLAY"] = display
        # Xvfb has no XVideo, so autovideosink (gst-play-1.0, playbin) always ends in ximagesink;
        # trying xvimagesink first there made its ximagesink fail to open the display now and
        # then (1.22). Skip the attempt that cannot succeed on this server.
        env["GST_PLUGIN_FEATURE_RANK"] = "xvimagesink:NONE"
    producers = [w for w in commands if "cudasink-ipc" in w]
    others = [w for w in commands if "cudasink-ipc" not in w]
    for words in producers + others:
        moved = [move_socket(word, scratch) for word in words]
        output = open(os.path.join(scratch, f"cmd{len(started)}.log"), "w+")
        command_env = env
        if is_consumer(words):
            # cudasrc-ipc says at INFO when its first frame came: proof that it was served.
            command_env = dict(env, GST_DEBUG="cudaipc-src:4", GST_DEBUG_NO_COLOR="1")
        process = subprocess.Popen(moved, cwd=scratch, env=command_env, stdout=output,
                                   stderr=subprocess.STDOUT, text=True)
        started.append((words, process, output))
        if words in producers:
            time.sleep(0.5)  # the socket exists once the producer is PAUSED

    time.sleep(RUN_SECONDS)
    results = []
    for words, process, output in started:
        code = process.poll()
        if code is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        output.seek(0)
        text = output.read()
        output.close()
        failure = None
        if "ERROR" in text:
            failure = "printed an error"
        elif is_consumer(words) and FIRST_FRAME not in text:
            failure = f"received no frame in {RUN_SECONDS} s"
        elif code not in (None, 0):
            failure = f"exited with status {code}"
        elif words[0] == "gst-play-1.0" and "Now playing" not in text:
            failure = "never said 'Now playing'"
        elif words[0] == "gst-launch-1.0" and "Setting pipeline to PLAYING" not in text:
            failure = "never reached PLAYING"
        if failure:
            log.append(f"---- {' '.join(words)}\n{text[-3000:]}")
        results.append((words, failure))
    return results


def main():
    sources = [os.path.join(ROOT, "README.md")]
    docs = os.path.join(ROOT, "docs")
    sources += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    xvfb = Xvfb()
    ran = skipped = failed = 0
    logs = []
    try:
        for source in sources:
            name = os.path.relpath(source, ROOT)
            for block in code_blocks(source):
                commands = commands_of(block)
                if not commands:
                    continue
                runnable, reasons = [], {}
                for words in commands:
                    reason = why_not(words)
                    if reason is None and xvfb.display is None and needs_display(words):
                        reason = "an X server (install xvfb)"
                    if reason:
                        reasons[" ".join(words)] = reason
                    else:
                        runnable.append(words)
                # A consumer of a producer that cannot run here has nothing to read.
                served = {socket_of(w) for w in runnable if "cudasink-ipc" in w}
                unserved = {socket_of(w) for w in commands if "cudasink-ipc" in w} - served
                for words in list(runnable):
                    sock = socket_of(words)
                    if is_consumer(words) and sock in unserved:
                        runnable.remove(words)
                        reasons[" ".join(words)] = "its producer, which cannot run here"
                # A network receiver listens for a sender that runs on another host.
                if "another host" in reasons.values():
                    for words in list(runnable):
                        if {"udpsrc", "srtsrc", "tcpclientsrc"}.intersection(elements_of(words)):
                            runnable.remove(words)
                            reasons[" ".join(words)] = "its sender, which runs on another host"
                for command, reason in reasons.items():
                    skipped += 1
                    print(f"SKIP {name}: {command}\n     needs {reason}")
                if not runnable:
                    continue
                # A consumer whose producer the block does not show (a relay reading the camera
                # of another section) is served by a small host-memory stand-in, so that it
                # must receive frames as the rest do.
                shown = {socket_of(w) for w in commands if "cudasink-ipc" in w}
                orphans = {socket_of(w) for w in runnable if is_consumer(w)} - shown
                for sock in sorted(orphans, key=str):
                    stand_in = STAND_IN + ([f"socket-path={sock}"] if sock else [])
                    print(f"STAND-IN {name}: {' '.join(stand_in)}")
                    runnable.insert(0, stand_in)
                with tempfile.TemporaryDirectory(prefix="cudaipc-doc-") as scratch:
                    block_logs = []
                    results = run_block(runnable, scratch, xvfb.display, block_logs)
                    # Under load, X sinks of a block sometimes all fail to connect to Xvfb at
                    # the same moment ("Could not open display"): the X server, not the command.
                    # Such a block runs once more; any other failure counts at once.
                    if any(X_REFUSED in entry for entry in block_logs):
                        print(f"RETRY {name}: a display sink could not connect to Xvfb")
                        block_logs = []
                        results = run_block(runnable, scratch, xvfb.display, block_logs)
                    logs.extend(block_logs)
                    for words, failure in results:
                        ran += 1
                        if failure:
                            failed += 1
                            print(f"FAIL {name}: {' '.join(words)}\n     {failure}")
                        else:
                            print(f"OK   {name}: {' '.join(words)}")
    finally:
        xvfb.close()
    for entry in logs:
        print(entry)
    print(f"{ran} command(s) ran, {failed} failed, {skipped} skipped")
    if xvfb.display is None:
        print("Xvfb is not installed (scripts/install-deps installs xvfb): display sinks were "
              "not run, which fails this test")
        return 1
    if ran == 0:
        print("nothing ran")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
