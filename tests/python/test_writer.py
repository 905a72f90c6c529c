#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""cudaipc.Writer (python/cudaipc/_writer.py) against real reader and writer processes, in host
memory.

Frames are drawn from their frame number (pattern() below: every byte depends on the frame, the
plane and its position), which travels as the pts (pts_of()); readers - cudaipc.Reader in a
child process, or in this one - recompute the pattern from the pts they receive and compare
every plane bit-exact. Writers serve with backpressure="block" and live=False wherever every
frame must arrive. Ctrl-C is real: SIGINT sent to a child process at random moments.

Environment (tests/python/meson.build sets it): CUDAIPC_LIBRARY (the built libcudaipc, with the
writer: 0.2 or later), PYTHONPATH (python/). Needs NumPy: without it the test fails (it does
not skip) and says how to install it.
"""

import ctypes
import gc
import inspect
import json
import linecache
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

try:
    import numpy
except ImportError:
    sys.exit(f"test_writer: NumPy is not importable by {sys.executable}. scripts/install-deps "
             f"installs it (Debian's python3-numpy, for /usr/bin/python3); then reconfigure the "
             f"build (meson setup --reconfigure BUILD) so that the test runs with an interpreter "
             f"that has it.")

import cudaipc
from cudaipc import _capi, _dlpack, _writer
from interrupts import interrupt_in_finalizer

START_TIMEOUT_S = 30  # a child's start: Python, NumPy, the library
FRAME_TIMEOUT_MS = 10000  # a frame or a slot that is coming
NO_SLOT_TIMEOUT_MS = 300  # a slot that must not come

BASE_PTS = 1000000000
PTS_STEP = 1000000


def pts_of(n):
    return BASE_PTS + n * PTS_STEP


def duration_of(n):
    return 1000 + n


def frame_number(pts_ns):
    return (pts_ns - BASE_PTS) // PTS_STEP


def pattern(n, plane, shape, typestr="|u1"):
    """Frame n's plane `plane` as an array of `shape`: every element depends on all three."""
    size = 1
    for extent in shape:
        size *= extent
    values = numpy.arange(size, dtype=numpy.uint32) * numpy.uint32(2654435761)
    values += numpy.uint32((n * 4 + plane) * 40503 + 1)
    values ^= values >> numpy.uint32(13)
    return values.astype(numpy.dtype(typestr)).reshape(shape)


def fill(frame, n):
    """Draws frame n into a WriterFrame, plane by plane, in place."""
    for index, plane in enumerate(frame.planes):
        array = numpy.asarray(plane)
        array[...] = pattern(n, index, array.shape, array.dtype.str)


def mismatches(frame, n):
    """The planes of a received frame that are not frame n's pattern."""
    bad = []
    for index, plane in enumerate(frame.planes):
        array = numpy.asarray(plane)
        if not numpy.array_equal(array, pattern(n, index, array.shape, array.dtype.str)):
            bad.append(index)
    return bad


# The child scripts start with the same definitions.
CHILD_PRELUDE = "\n\n".join(
    ["import json, os, random, sys, time\nimport numpy\nimport cudaipc",
     f"BASE_PTS = {BASE_PTS}\nPTS_STEP = {PTS_STEP}"] +
    [inspect.getsource(function) for function in (pts_of, duration_of, frame_number, pattern,
                                                  fill, mismatches)]) + "\n"


# A reader: every frame until the stream ends (or is cut), checked against the pattern of the
# frame its pts names; then one RESULT line. argv: socket, max_in_flight.
READER_SCRIPT = '''
reader = cudaipc.Reader(sys.argv[1], memory="host", max_in_flight=int(sys.argv[2]))
print("ATTACHED", flush=True)
received, bad = [], []
try:
    for frame in reader:  # until EndOfStream
        with frame:
            n = frame_number(frame.pts_ns)
            received.append([n, frame.format, frame.width, frame.height])
            if frame.duration_ns != duration_of(n):
                bad.append([n, "duration", frame.duration_ns])
            planes = mismatches(frame, n)
            if planes:
                bad.append([n, "planes", planes])
    end = "EndOfStream"
except cudaipc.Error as error:
    end = f"{type(error).__name__}: {error}"
print("RESULT", json.dumps({"received": received, "bad": bad, "end": end,
                            "stats": reader.stats}), flush=True)
'''

# A reader that takes `hold` frames and keeps them until told (a line on stdin), then releases
# them and stays attached until stdin ends. argv: socket, max_in_flight, hold.
HOLDING_READER_SCRIPT = '''
reader = cudaipc.Reader(sys.argv[1], memory="host", max_in_flight=int(sys.argv[2]))
print("ATTACHED", flush=True)
held = []
while len(held) < int(sys.argv[3]):
    frame = reader.next(10000)
    if frame is None:
        sys.exit(f"no frame within 10 s; holding {len(held)}")
    held.append(frame)
print("HOLDING", len(held), flush=True)
sys.stdin.readline()
for frame in held:
    frame.release()
print("RELEASED", flush=True)
sys.stdin.readline()
'''

# A writer that serves until stdin ends, then closes. argv: socket.
IDLE_WRITER_SCRIPT = '''
writer = cudaipc.Writer(sys.argv[1], format="BGRx", width=64, height=48, memory="host")
print("READY", flush=True)
sys.stdin.read()
writer.close()
print("CLOSED", flush=True)
'''

# A writer publishing frames 0, 1, 2, ... until killed. argv: socket.
ENDLESS_WRITER_SCRIPT = '''
writer = cudaipc.Writer(sys.argv[1], format="BGRx", width=64, height=48, memory="host",
                        pool_size=8, live=False)
print("READY", flush=True)
writer.wait_for_consumer()
n = 0
while True:
    with writer.acquire() as frame:
        fill(frame, n)
        frame.publish(pts_ns=pts_of(n), duration_ns=duration_of(n))
    n += 1
    time.sleep(0.005)
'''

# Acquires and publishes or abandons in a loop while SIGINT (Ctrl-C) lands anywhere, 20 times;
# every tenth frame also waits in a blocking acquire() for a slot that cannot come (3 of the 4
# slots are held), which only Ctrl-C ends. Then gives the held slots back and says how many
# slots it can hold at once: all 4 unless one was lost. argv: socket.
CTRL_C_WRITER_SCRIPT = '''
import signal
signal.signal(signal.SIGINT, signal.default_int_handler)  # also where started with SIGINT ignored
writer = cudaipc.Writer(sys.argv[1], format="BGRx", width=64, height=48, memory="host",
                        pool_size=4)
held = [writer.acquire(0) for _ in range(3)]
assert all(frame is not None for frame in held), held
interrupts = 0
reported = -1
k = 0
while True:
    try:
        # Said from inside the try: the parent sends the next SIGINT when it reads this line,
        # and that signal must not find the loop between two try blocks.
        if reported < 0:
            print("READY", flush=True)
            reported = 0
        if reported < interrupts:
            print("INTERRUPTED", interrupts, flush=True)
            reported = interrupts
        if interrupts >= 20:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C the parent sent again
            break
        while True:
            k += 1
            with writer.acquire() as frame:
                numpy.asarray(frame)[...] = k % 256
                time.sleep(random.random() * 0.003)
                if k % 10 == 0:
                    writer.acquire()  # blocks: no slot is free
                if k % 2:
                    frame.publish()
            time.sleep(random.random() * 0.002)
    except KeyboardInterrupt:
        interrupts += 1
for frame in held:
    frame.abandon()
slots = [writer.acquire(2000) for _ in range(4)]
print("SLOTS", sum(frame is not None for frame in slots), json.dumps(writer.stats), flush=True)
'''


class Child:
    """A Python process running CHILD_PRELUDE + `script` with `args`, its stdout read line by
    line (stdin a pipe, stderr to a file)."""

    def __init__(self, directory, name, script, *args):
        self.name = name
        self.stderr_path = os.path.join(directory, name + ".stderr")
        self.lines = queue.Queue()
        with open(self.stderr_path, "w") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-c", CHILD_PRELUDE + script, *map(str, args)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True)
        threading.Thread(target=self._read_stdout, daemon=True).start()

    def _read_stdout(self):
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_line(self, prefix, timeout_s=START_TIMEOUT_S):
        """The first line from now on that starts with `prefix`."""
        deadline = time.monotonic() + timeout_s
        seen = []
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            seen.append(line)
            if line.startswith(prefix):
                return line
        raise AssertionError(f"{self.name} did not print {prefix} within {timeout_s} s; it "
                             f"printed {seen[-5:]}; exit status {self.process.poll()}; stderr: "
                             f"{self.stderr()}")

    def result(self, timeout_s=60):
        """The RESULT line's JSON."""
        return json.loads(self.wait_line("RESULT", timeout_s).split(" ", 1)[1])

    def send(self, line):
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def stderr(self):
        with open(self.stderr_path) as stderr:
            return stderr.read()[-2000:]

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            try:
                pipe.close()
            except OSError:
                pass


class WriterTest(unittest.TestCase):
    def setUp(self):
        reason = _capi.writer_unavailable()
        self.assertIsNone(reason, reason)
        self.directory = tempfile.mkdtemp(prefix="cudaipc-writer-")
        self.addCleanup(shutil.rmtree, self.directory, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.directory, name + ".sock")

    def writer(self, name, **kwargs):
        options = {"memory": "host", "format": "BGRx", "width": 64, "height": 48}
        options.update(kwargs)
        writer = cudaipc.Writer(self.path(name), **options)
        self.addCleanup(writer.close)
        return writer

    def child(self, name, script, *args):
        child = Child(self.directory, name, script, *args)
        self.addCleanup(child.stop)
        return child

    def reader_child(self, writer, name="reader", max_in_flight=4):
        """A READER_SCRIPT child attached to `writer` (waited for on both sides)."""
        child = self.child(name, READER_SCRIPT, writer.socket_path, max_in_flight)
        child.wait_line("ATTACHED")
        self.assertTrue(writer.wait_for_consumer(FRAME_TIMEOUT_MS), "the reader is not attached")
        return child

    def holding_reader(self, writer, max_in_flight, hold, name="holder"):
        child = self.child(name, HOLDING_READER_SCRIPT, writer.socket_path, max_in_flight, hold)
        child.wait_line("ATTACHED")
        self.assertTrue(writer.wait_for_consumer(FRAME_TIMEOUT_MS), "the reader is not attached")
        return child

    def acquire(self, writer):
        frame = writer.acquire(FRAME_TIMEOUT_MS)
        self.assertIsNotNone(frame, f"no slot within {FRAME_TIMEOUT_MS} ms")
        return frame

    def publish_pattern(self, writer, n):
        with self.acquire(writer) as frame:
            fill(frame, n)
            frame.publish(pts_ns=pts_of(n), duration_ns=duration_of(n))

    def assert_received(self, result, expected, end="EndOfStream"):
        """`expected`: [n, format, width, height] per frame, in order."""
        self.assertEqual(result["bad"], [], "frames that were not what was written")
        self.assertEqual(result["end"], end)
        received = [tuple(entry) for entry in result["received"]]
        self.assertEqual(received, [tuple(entry) for entry in expected])

    # -- writer -> reader, bit-exact ---------------------------------------------------------

    def test_frames_are_bit_exact_in_order(self):
        for fmt, width, height, shapes in (("BGRx", 320, 240, [(240, 320, 4)]),
                                           ("NV12", 322, 242, [(242, 322), (121, 161, 2)])):
            with self.subTest(format=fmt):
                writer = self.writer(f"exact-{fmt}", format=fmt, width=width, height=height,
                                     backpressure="block", live=False)
                reader = self.reader_child(writer, f"reader-{fmt}")
                for n in range(200):
                    with self.acquire(writer) as frame:
                        self.assertEqual((frame.format, frame.width, frame.height, frame.memory),
                                         (fmt, width, height, "host"))
                        self.assertEqual([plane.shape for plane in frame.planes], shapes)
                        self.assertEqual(frame.size, writer.frame_size)
                        fill(frame, n)
                        frame.publish(pts_ns=pts_of(n), duration_ns=duration_of(n))
                    self.assertEqual(frame.state, "published")
                writer.end_stream()
                stats = writer.stats
                writer.close()
                self.assert_received(reader.result(),
                                     [(n, fmt, width, height) for n in range(200)])
                self.assertEqual((stats["frames_published"], stats["frames_sent"],
                                  stats["frames_dropped"], stats["copies"],
                                  stats["frames_abandoned"]), (200, 200, 0, 0, 0))

    def test_publish_copies_bit_exact_and_counts_the_copies(self):
        # BGRx from an (H, W, 4) view with longer rows (a crop); NV12 from its bytes in the
        # slot's layout (computed here independently: rows of round_up(322, 4) = 324 bytes,
        # chroma after 242 luma rows), also as a bytes object.
        def bgrx_source(n):
            wide = numpy.zeros((240, 330, 4), numpy.uint8)
            wide[:, :320] = pattern(n, 0, (240, 320, 4))
            return wide[:, :320]

        def nv12_source(n):
            frame = numpy.zeros(324 * 242 + 324 * 121, numpy.uint8)
            frame[:324 * 242].reshape(242, 324)[:, :322] = pattern(n, 0, (242, 322))
            chroma = frame[324 * 242:].reshape(121, 324)[:, :322].reshape(121, 161, 2)
            chroma[...] = pattern(n, 1, (121, 161, 2))
            return frame if n % 2 else frame.tobytes()

        for fmt, width, height, source in (("BGRx", 320, 240, bgrx_source),
                                           ("NV12", 322, 242, nv12_source)):
            with self.subTest(format=fmt):
                writer = self.writer(f"copy-{fmt}", format=fmt, width=width, height=height,
                                     backpressure="block", live=False)
                if fmt == "NV12":
                    self.assertEqual(writer.frame_size, 324 * 363)
                reader = self.reader_child(writer, f"reader-{fmt}")
                for n in range(20):
                    self.assertIs(writer.publish(source(n), pts_ns=pts_of(n),
                                                 duration_ns=duration_of(n),
                                                 timeout_ms=FRAME_TIMEOUT_MS), True)
                self.assertEqual(writer.stats["copies"], 20)
                for n in range(20, 40):  # in place: no copy
                    self.publish_pattern(writer, n)
                stats = writer.stats
                writer.end_stream()
                self.assert_received(reader.result(),
                                     [(n, fmt, width, height) for n in range(40)])
                self.assertEqual((stats["copies"], stats["frames_published"]), (20, 40))

    def test_publish_refuses_sources_that_do_not_fit(self):
        writer = self.writer("refuse", format="BGRx", width=320, height=240)
        cases = [
            (numpy.zeros((240, 320, 3), numpy.uint8), r"\(240, 320, 4\) array of uint8"),
            (numpy.zeros((240, 320, 4), numpy.float32), r"not from a \(240, 320, 4\) array of "
                                                        r"float32"),
            (numpy.zeros((320, 240, 4), numpy.uint8), r"\(240, 320, 4\)"),
            (numpy.zeros((240, 640, 4), numpy.uint8)[:, ::2], "contiguously"),
            (numpy.zeros((240, 4, 320), numpy.uint8).transpose(0, 2, 1), "contiguously"),
            (numpy.zeros(1000, numpy.uint8), "307200 contiguous bytes"),
            (numpy.zeros(320 * 240 * 8, numpy.uint8)[::2], "not contiguous"),
        ]
        for source, message in cases:
            with self.subTest(shape=source.shape, strides=source.strides):
                with self.assertRaisesRegex(ValueError, message):
                    writer.publish(source)

        class GpuArray:  # a CUDA array, to a host writer
            __cuda_array_interface__ = {"shape": (240, 320, 4), "typestr": "|u1",
                                        "data": (0, False), "version": 3}

        with self.assertRaisesRegex(ValueError, "host memory"):
            writer.publish(GpuArray())
        with self.assertRaisesRegex(ValueError, "pts_ns"):
            writer.publish(numpy.zeros((240, 320, 4), numpy.uint8), pts_ns=-1)
        stats = writer.stats
        self.assertEqual((stats["frames_published"], stats["copies"], stats["frames_abandoned"]),
                         (0, 0, 0), "a refused source took a slot")
        self.assertIs(writer.publish(numpy.zeros((240, 320, 4), numpy.uint8)), True)
        self.assertEqual(writer.stats["copies"], 1)

        # Planar: contiguous bytes in the slot's layout, which an (H * 3 / 2, W) array of an odd
        # width is not.
        writer.set_format("NV12", 322, 242)
        with self.assertRaisesRegex(ValueError, r"117612 contiguous bytes.*116886 bytes"):
            writer.publish(numpy.zeros((363, 322), numpy.uint8))
        self.assertIs(writer.publish(numpy.zeros((363, 324), numpy.uint8)), True)

    # -- the slots ---------------------------------------------------------------------------

    def test_acquire_times_out_while_consumers_hold_every_slot(self):
        # Drop: a reader holds all 3 slots; nothing to acquire.
        writer = self.writer("full", pool_size=3, release_timeout_ms=30000, live=False)
        reader = self.holding_reader(writer, max_in_flight=3, hold=3)
        for n in range(3):
            self.publish_pattern(writer, n)
        reader.wait_line("HOLDING 3")
        started = time.monotonic()
        self.assertIsNone(writer.acquire(timeout_ms=NO_SLOT_TIMEOUT_MS))
        waited = time.monotonic() - started
        self.assertGreaterEqual(waited, 0.25)
        self.assertLess(waited, 3.0)
        self.assertEqual(writer.stats["acquire_timeouts"], 1)
        self.assertIs(writer.publish(numpy.zeros((48, 64, 4), numpy.uint8),
                                     timeout_ms=NO_SLOT_TIMEOUT_MS), False)
        stats = writer.stats
        self.assertEqual((stats["acquire_timeouts"], stats["copies"]), (2, 0))
        reader.send("release")
        reader.wait_line("RELEASED")
        self.acquire(writer).abandon()  # the slots came back
        self.assertEqual(writer.stats["consumers_evicted"], 0)

        # Drop: a reader at its max_in_flight misses the frames published meanwhile.
        writer = self.writer("drop", pool_size=6, live=False)
        reader = self.holding_reader(writer, max_in_flight=1, hold=1, name="holder-drop")
        self.publish_pattern(writer, 0)
        reader.wait_line("HOLDING 1")
        for n in range(1, 11):
            self.publish_pattern(writer, n)
        stats = writer.stats
        self.assertEqual((stats["frames_sent"], stats["frames_dropped"]), (1, 10))

        # Block: acquire() waits for the reader's room, and times out.
        writer = self.writer("block", pool_size=6, backpressure="block", live=False,
                             release_timeout_ms=30000)
        reader = self.holding_reader(writer, max_in_flight=2, hold=2, name="holder-block")
        for n in range(2):
            self.publish_pattern(writer, n)
        reader.wait_line("HOLDING 2")
        started = time.monotonic()
        self.assertIsNone(writer.acquire(timeout_ms=NO_SLOT_TIMEOUT_MS))
        self.assertLess(time.monotonic() - started, 3.0)
        self.assertEqual(writer.stats["acquire_timeouts"], 1)
        reader.send("release")
        self.acquire(writer).abandon()

    def test_blocking_acquire_outlasts_a_reader_that_keeps_every_slot(self):
        # acquire() waits in slices (for Ctrl-C): the reader's release-timeout clock must run on
        # across them, and the slices are no acquire_timeouts.
        for backpressure in ("drop", "block"):
            with self.subTest(backpressure=backpressure):
                writer = self.writer(f"stuck-{backpressure}", pool_size=3, release_timeout_ms=300,
                                     backpressure=backpressure, live=False)
                reader = self.holding_reader(writer, max_in_flight=3, hold=3,
                                             name=f"stuck-{backpressure}")
                for n in range(3):
                    self.publish_pattern(writer, n)
                reader.wait_line("HOLDING 3")
                started = time.monotonic()
                frame = writer.acquire()  # no timeout: ends when the reader is disconnected
                self.assertLess(time.monotonic() - started, 5.0)
                frame.abandon()
                stats = writer.stats
                self.assertEqual((stats["consumers_evicted"], stats["acquire_timeouts"]), (1, 0))

    def test_abandoned_frames_never_reach_the_reader(self):
        writer = self.writer("abandon", backpressure="block", live=False)
        reader = self.reader_child(writer)
        published = []
        for n in range(30):
            frame = self.acquire(writer)
            fill(frame, n)
            way = n % 6
            if way == 0:
                frame.abandon()
            elif way == 2:
                with frame:  # leaving the block unpublished
                    pass
            elif way == 4:
                with self.assertRaises(KeyError):
                    with frame:
                        raise KeyError("the drawing failed")
            else:
                frame.publish(pts_ns=pts_of(n), duration_ns=duration_of(n))
                published.append(n)
                continue
            self.assertEqual(frame.state, "abandoned")
        frame = self.acquire(writer)  # dropped unpublished
        del frame
        writer.end_stream()
        stats = writer.stats
        self.assert_received(reader.result(), [(n, "BGRx", 64, 48) for n in published])
        self.assertEqual((stats["frames_published"], stats["frames_abandoned"]), (15, 16))

    def test_frame_lifetimes_and_arrays(self):
        gc.disable()  # given back by reference counting alone
        self.addCleanup(gc.enable)
        writer = self.writer("lifetimes", pool_size=2)

        def free_slots():
            frames = [writer.acquire(0) for _ in range(2)]
            count = sum(frame is not None for frame in frames)
            for frame in frames:
                if frame is not None:
                    frame.abandon()
            return count

        frame = self.acquire(writer)
        array = numpy.asarray(frame)
        self.assertTrue(array.flags.writeable)
        self.assertEqual(array.__array_interface__["data"][0], frame.data_ptr)  # in place
        self.assertFalse(hasattr(frame, "__cuda_array_interface__"))  # host memory
        del frame
        self.assertEqual(free_slots(), 1)  # the array keeps the frame, and its slot
        del array
        self.assertEqual(free_slots(), 2)
        # free_slots() gave back 1 then 2, and the frame went with its array
        self.assertEqual(writer.stats["frames_abandoned"], 4)

        if hasattr(numpy, "from_dlpack"):
            frame = self.acquire(writer)
            tensor = numpy.from_dlpack(frame)
            self.assertEqual(tensor.shape, (48, 64, 4))
            del frame
            self.assertEqual(free_slots(), 1)
            del tensor
            self.assertEqual(free_slots(), 2)
            self.assertEqual(_dlpack.live_exports(), 0)

        frame = self.acquire(writer)
        frame.publish()
        self.assertEqual(frame.state, "published")
        with self.assertRaisesRegex(ValueError, "published"):
            numpy.asarray(frame)
        with self.assertRaisesRegex(ValueError, "published"):
            frame.publish()
        frame.abandon()  # a no-op after publish
        self.assertEqual(frame.state, "published")

        writer.set_format("NV12", 64, 48)
        frame = self.acquire(writer)
        for use in (numpy.asarray, lambda f: f.__array_interface__, lambda f: f.__dlpack__()):
            with self.assertRaisesRegex(TypeError, r"planes\[i\]"):
                use(frame)
        self.assertEqual([numpy.asarray(plane).shape for plane in frame.planes],
                         [(48, 64), (24, 32, 2)])
        frame.abandon()

    def test_keyboard_interrupt_in_a_dropped_frames_finalizer_loses_no_slot(self):
        """Ctrl-C can land in the __del__ that gives a dropped frame's slot back, where Python
        ignores the KeyboardInterrupt and the rest of __del__ does not run (seen in CI). The
        slot is not lost: the writer abandons it at its next acquire(). Injected at each line
        event of the handle's __del__ in turn (sys.settrace), up to the call that hands the slot
        over: a signal lands at a function's start and after calls, not between taking the
        pointer and that call, while a trace function can raise at any line."""
        writer = self.writer("finalizer", pool_size=2)
        injected = 0
        for line in range(1, 10):
            frames = [self.acquire(writer), self.acquire(writer)]
            with interrupt_in_finalizer(line) as events:
                del frames[0]  # its __del__ runs here, and is cut short at that line
            if line > events[0]:
                frames[0].abandon()
                break  # every line of __del__ had its interrupt
            injected += 1
            again = writer.acquire(2000)
            self.assertIsNotNone(again,
                                 f"the slot was lost when Ctrl-C landed at line event {line}")
            again.abandon()
            frames[0].abandon()
            del again, frames
        self.assertGreater(injected, 1, "__del__ ran too few lines to test")

    def test_keyboard_interrupt_anywhere_in_acquire_leaks_no_slot(self):
        """Ctrl-C's KeyboardInterrupt can land at any line Python runs in acquire(), including
        the ones between the library's return of a slot and the WriterFrame that wraps it.
        Injected at each such line in turn (sys.settrace), it must leave no slot lent, even while
        the exception (and its traceback) is still alive. Writer._call() is left out: between
        registering a call and the C call, and in its finally, there is no call at which a
        signal could land, while a trace function can raise at any line."""
        writer = self.writer("trace", pool_size=2)
        package = os.path.dirname(cudaipc.__file__)
        caught = []
        line = 0
        while True:
            events = [0]

            def local(frame, event, arg):
                if event == "line" and frame.f_code.co_name != "_call":
                    events[0] += 1
                    source = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
                    if events[0] == line and not source.lstrip().startswith("with "):
                        raise KeyboardInterrupt(f"injected at line event {line}")
                return local

            def tracer(frame, event, arg):
                # Not the orphans' sweep: interrupted, it leaves its work to the next call (its
                # own test is the finalizer one), and the handles `caught` keeps alive would
                # give it one more line per round, without end.
                name = frame.f_code.co_filename
                return local if name.startswith(package) and "_orphans" not in name else None

            sys.settrace(tracer)
            try:
                frame = writer.acquire(FRAME_TIMEOUT_MS)
            except KeyboardInterrupt as interrupt:
                caught.append(interrupt)  # kept alive, traceback and all
                slots = [writer.acquire(0) for _ in range(2)]
                self.assertNotIn(None, slots, f"a slot leaked when Ctrl-C landed at line "
                                              f"event {line}")
                for slot in slots:
                    slot.abandon()
                del slots, slot  # not dropped by the next acquire(), inside the traced call
                line += 1
                continue
            finally:
                sys.settrace(None)
            self.assertIsNotNone(frame)
            frame.abandon()
            del frame
            if line > events[0]:  # every line of acquire() had its interrupt
                break
            line += 1
        self.assertGreater(len(caught), 5, "acquire() ran too few lines to test")

    def test_ctrl_c_between_acquire_and_publish_loses_no_slot(self):
        child = self.child("ctrl-c", CTRL_C_WRITER_SCRIPT, self.path("ctrl-c"))
        child.wait_line("READY")
        seed = random.randrange(1 << 30)
        chance = random.Random(seed)
        count = lost = 0
        while count < 20:
            time.sleep(0.001 + chance.random() * 0.04)
            child.process.send_signal(signal.SIGINT)
            try:
                count = int(child.wait_line("INTERRUPTED", timeout_s=2).split()[1])
            except AssertionError:
                # Landed in a finalizer (a handle's __del__), where Python ignores what is
                # raised: the user presses Ctrl-C again. The slot must not be lost either way.
                lost += 1
                self.assertLess(lost, 10, f"10 Ctrl-Cs went unanswered (random seed {seed})")
        line = child.wait_line("SLOTS", timeout_s=20)
        _, slots, stats = line.split(" ", 2)
        self.assertEqual(slots, "4", f"a slot was lost (random seed {seed}); stats {stats}")
        self.assertEqual(child.process.wait(timeout=20), 0, child.stderr())

    def test_interrupt_and_close_end_a_blocking_acquire(self):
        writer = self.writer("interrupt", pool_size=1)
        held = self.acquire(writer)
        outcome = []

        def blocked():
            try:
                outcome.append(writer.acquire())  # no slot is free: waits
            except cudaipc.Error as error:
                outcome.append(type(error))

        for stop in (writer.interrupt, writer.close):
            thread = threading.Thread(target=blocked)
            thread.start()
            time.sleep(0.5)
            self.assertTrue(thread.is_alive(), "acquire() returned with no slot to lend")
            stop()
            thread.join(5)
            self.assertFalse(thread.is_alive(), f"{stop.__name__}() did not end acquire()")
            self.assertEqual(outcome, [cudaipc.Interrupted])
            outcome.clear()
        self.assertTrue(writer.closed)
        with self.assertRaises(ValueError):
            writer.acquire(0)
        self.assertEqual(writer.stats["frames_published"], 0)  # as it was when closed
        # A frame lent at close can only be abandoned.
        with self.assertRaises(cudaipc.EndOfStream):
            held.publish()
        self.assertEqual(held.state, "abandoned")

        writer = self.writer("no-consumer")
        started = time.monotonic()
        self.assertFalse(writer.wait_for_consumer(NO_SLOT_TIMEOUT_MS))
        self.assertGreaterEqual(time.monotonic() - started, 0.25)

    # -- the stream --------------------------------------------------------------------------

    def test_end_stream(self):
        writer = self.writer("end", pool_size=3, backpressure="block", live=False)
        reader = self.reader_child(writer)
        for n in range(5):
            self.publish_pattern(writer, n)
        lent = self.acquire(writer)
        outcome = []

        def blocked():  # waits for a slot while the stream ends
            try:
                kept = [writer.acquire() for _ in range(3)]
                outcome.append(kept)
            except cudaipc.Error as error:
                outcome.append(type(error))

        thread = threading.Thread(target=blocked)
        thread.start()
        time.sleep(0.3)
        writer.end_stream()
        thread.join(5)
        self.assertFalse(thread.is_alive(), "end_stream() did not end acquire()")
        self.assertEqual(outcome, [cudaipc.EndOfStream])
        self.assert_received(reader.result(), [(n, "BGRx", 64, 48) for n in range(5)])
        started = time.monotonic()
        with self.assertRaises(cudaipc.EndOfStream) as ended:
            writer.acquire()
        self.assertLess(time.monotonic() - started, 1.0)
        self.assertEqual(ended.exception.status, cudaipc.END)
        with self.assertRaises(cudaipc.EndOfStream):
            writer.publish(numpy.zeros((48, 64, 4), numpy.uint8))
        with self.assertRaises(cudaipc.EndOfStream):
            writer.wait_for_consumer(100)
        with self.assertRaises(cudaipc.EndOfStream):
            lent.publish()
        self.assertEqual(lent.state, "abandoned")

    def test_set_format_mid_stream(self):
        writer = self.writer("formats", format="BGRx", width=320, height=240,
                             backpressure="block", live=False)
        reader = self.reader_child(writer)
        expected = []
        sizes = [("BGRx", 320, 240), ("NV12", 322, 242), ("BGRx", 33, 17), ("I420", 63, 47)]
        n = 0
        stale = None
        for fmt, width, height in sizes:
            if (fmt, width, height) != (writer.format, writer.width, writer.height):
                stale = self.acquire(writer)  # lent before the change: never sent
                writer.set_format(fmt, width, height)
                self.assertEqual((writer.format, writer.width, writer.height),
                                 (fmt, width, height))
                with self.assertRaises(cudaipc.InvalidArgumentError):
                    stale.publish(pts_ns=pts_of(10000))
            for _ in range(10):
                with self.acquire(writer) as frame:
                    self.assertEqual((frame.format, frame.width, frame.height, frame.size),
                                     (fmt, width, height, writer.frame_size))
                    fill(frame, n)
                    frame.publish(pts_ns=pts_of(n), duration_ns=duration_of(n))
                expected.append((n, fmt, width, height))
                n += 1
        writer.end_stream()
        stats = writer.stats
        self.assert_received(reader.result(), expected)
        self.assertEqual((stats["generations"], stats["frames_published"],
                          stats["frames_abandoned"]), (4, 40, 3))

    # -- producers ---------------------------------------------------------------------------

    def test_second_writer_on_a_path_is_busy(self):
        path = self.path("busy")
        first = self.child("first-writer", IDLE_WRITER_SCRIPT, path)
        first.wait_line("READY")
        with self.assertRaises(cudaipc.BusyError) as busy:
            cudaipc.Writer(path, memory="host")
        self.assertEqual(busy.exception.status, cudaipc.ERROR_BUSY)
        self.assertEqual(busy.exception.status_name, "busy")
        self.assertIn(path, str(busy.exception))
        first.process.stdin.close()
        first.wait_line("CLOSED")
        first.process.wait(timeout=10)
        self.writer("busy").close()  # the path is free again

    def test_writer_killed_while_the_reader_holds_frames(self):
        path = self.path("killed")
        writer = self.child("endless-writer", ENDLESS_WRITER_SCRIPT, path)
        writer.wait_line("READY")
        reader = cudaipc.Reader(path, memory="host", max_in_flight=4)
        self.addCleanup(reader.close)
        held = []
        for _ in range(3):
            frame = reader.next(FRAME_TIMEOUT_MS)
            self.assertIsNotNone(frame, "no frame from the writer")
            self.assertEqual(mismatches(frame, frame_number(frame.pts_ns)), [])
            held.append(frame)
        copies = [numpy.array(frame) for frame in held]
        writer.process.kill()
        writer.process.wait()
        time.sleep(0.3)
        for frame, copy in zip(held, copies):
            self.assertTrue(numpy.array_equal(numpy.asarray(frame), copy),
                            "a held frame changed after its writer was killed")
            self.assertEqual(mismatches(frame, frame_number(frame.pts_ns)), [])
        with self.assertRaises(cudaipc.DisconnectedError) as cut:
            for frame in reader:  # frames still queued, then the cut
                frame.release()
        self.assertIn("lost the producer", cut.exception.reason)
        for frame in held:
            frame.release()

    def test_struct_layout_and_slot_layouts_match_the_library(self):
        options = _capi.spare_struct(_capi.WriterOptions)
        _capi.lib().cudaipc_writer_options_init(options)
        self.assertEqual(options.struct_size, ctypes.sizeof(_capi.WriterOptions))
        self.assertEqual((options.format, options.memory, options.cuda_device, options.pool_size,
                          options.backpressure, options.max_in_flight,
                          options.release_timeout_ms, options.socket_mode, options.live,
                          options.framerate_num, options.framerate_den),
                         (b"BGRx", _capi.MEMORY_CUDA, -1, 6, cudaipc.BACKPRESSURE_DROP, 4, 2000,
                          0o600, 1, 0, 1))
        writer = self.writer("layouts", pool_size=1)
        for fmt in _writer._PUBLISHABLE:
            for width, height in ((64, 48), (63, 47), (1, 1), (322, 242)):
                with self.subTest(format=fmt, width=width, height=height):
                    writer.set_format(fmt, width, height)
                    layout = _writer.slot_layout(fmt, width, height)
                    with self.acquire(writer) as frame:
                        self.assertEqual((frame.size, frame.info.plane_offset,
                                          frame.info.plane_stride),
                                         (layout.size, layout.plane_offset,
                                          layout.plane_stride))
                        self.assertGreaterEqual(frame.capacity, frame.size)
        with self.assertRaises(cudaipc.InvalidArgumentError):
            writer.set_format("NV21", 64, 48)
        with self.assertRaises(cudaipc.InvalidArgumentError) as refused:
            cudaipc.Writer(self.path("refused"), memory="host", pool_size=0)
        self.assertIn("pool_size", str(refused.exception))
        with self.assertRaises(ValueError):
            cudaipc.Writer(self.path("refused"), memory="gpu")
        with self.assertRaises(ValueError):
            cudaipc.Writer(self.path("refused") + "\0x", memory="host")


if __name__ == "__main__":
    unittest.main(verbosity=2)
