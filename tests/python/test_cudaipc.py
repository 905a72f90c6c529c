#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The Python module cudaipc (python/cudaipc) against real producer processes, in host memory.

Each test starts `cudaipc-e2e-peer produce` (videotestsrc ! cudasink-ipc memory=host, non-live:
the sink's backpressure delivers every frame to the reader) with --record, which writes, per
frame, `index pts duration offset crc32` (crc32 over the visible bytes of every plane, row by
row). Frames read through NumPy views of the producer's memory must checksum the same, in the
same order.

Environment (tests/python/meson.build sets it): CUDAIPC_LIBRARY (the built libcudaipc),
PYTHONPATH (python/), CUDAIPC_PEER (the peer), GST_PLUGIN_PATH (the built plugin).
Needs NumPy: without it the test fails (it does not skip) and says how to install it.
"""

import ctypes
import gc
import linecache
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest
import zlib

try:
    import numpy
except ImportError:
    sys.exit(f"test_cudaipc: NumPy is not importable by {sys.executable}. scripts/install-deps "
             f"installs it (Debian's python3-numpy, for /usr/bin/python3); then reconfigure the "
             f"build (meson setup --reconfigure BUILD) so that the test runs with an interpreter "
             f"that has it.")

import cudaipc
from cudaipc import _capi, _dlpack
from interrupts import interrupt_in_finalizer

PEER = os.environ.get("CUDAIPC_PEER", "")
START_TIMEOUT_S = 60  # a producer's first start may scan the GStreamer registry
FRAME_TIMEOUT_MS = 10000  # a frame that is coming
NO_FRAME_TIMEOUT_MS = 300  # a frame that must not come


def visible_crc(arrays):
    """CRC-32 of the arrays' bytes, row by row, in order: what the peer's --record writes."""
    crc = 0
    for array in arrays:
        crc = zlib.crc32(numpy.ascontiguousarray(array).tobytes(), crc)
    return crc


def read_record(path):
    """The producer's record: a list of (offset, duration, crc32) per frame, in order."""
    frames = []
    with open(path) as record:
        for line in record:
            index, _pts, duration, offset, crc = line.split()
            assert int(index) == len(frames), f"record index {index} out of order"
            frames.append((None if offset == "none" else int(offset),
                           None if duration == "none" else int(duration), int(crc, 16)))
    return frames


class Producer:
    """A `cudaipc-e2e-peer produce` process serving `socket`."""

    def __init__(self, directory, name, fmt="BGRA", width=64, height=48, frames=8,
                 pattern="snow", wait_for_consumer=True, extra=()):
        self.socket = os.path.join(directory, name + ".sock")
        self.record = os.path.join(directory, name + ".record")
        self.stderr_path = os.path.join(directory, name + ".stderr")
        command = [PEER, "produce", "--socket", self.socket, "--frames", str(frames),
                   "--fps", "0", *(["--wait-for-consumer"] if wait_for_consumer else []),
                   "--format", fmt, "--width", str(width),
                   "--height", str(height), "--pattern", pattern, "--record", self.record,
                   "--release-timeout", "30000", *extra]
        self.lines = queue.Queue()
        with open(self.stderr_path, "w") as stderr:
            self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr,
                                            text=True)
        threading.Thread(target=self._read_stdout, daemon=True).start()
        self.wait_line("LISTENING")

    def _read_stdout(self):
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_line(self, prefix, timeout_s=START_TIMEOUT_S):
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
        raise AssertionError(f"the producer did not print {prefix} within {timeout_s} s; it "
                             f"printed {seen}; stderr: {self.stderr()}")

    def stderr(self):
        with open(self.stderr_path) as stderr:
            return stderr.read()[-2000:]

    def finish(self, timeout_s=30):
        """Waits for the producer to exit by itself; returns its record."""
        try:
            code = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the producer did not exit within {timeout_s} s") from None
        assert code == 0, f"the producer exited with {code}: {self.stderr()}"
        return read_record(self.record)

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()


class CudaipcTest(unittest.TestCase):
    def setUp(self):
        self.assertTrue(PEER and os.access(PEER, os.X_OK),
                        f"CUDAIPC_PEER must name the cudaipc-e2e-peer executable, not {PEER!r}")
        self.directory = tempfile.mkdtemp(prefix="cudaipc-python-")
        self.addCleanup(shutil.rmtree, self.directory, ignore_errors=True)
        self._count = 0

    def producer(self, **kwargs):
        self._count += 1
        producer = Producer(self.directory, f"p{self._count}", **kwargs)
        self.addCleanup(producer.stop)
        return producer

    def reader(self, producer, **kwargs):
        reader = cudaipc.Reader(producer.socket, **kwargs)
        self.addCleanup(reader.close)
        return reader

    def next_frame(self, reader):
        frame = reader.next(FRAME_TIMEOUT_MS)
        self.assertIsNotNone(frame, f"no frame within {FRAME_TIMEOUT_MS} ms")
        return frame

    # -- frames, bit-exact ------------------------------------------------------------------

    def test_frames_are_bit_exact_in_order(self):
        # format, width, height, pattern (SMPTE bars: chroma that is not flat), and the shapes
        # of the planes' arrays
        cases = [
            ("BGRA", 64, 48, "snow", [(48, 64, 4)]),
            ("RGB", 63, 47, "snow", [(47, 63, 3)]),  # rows padded to 4 bytes
            ("GRAY8", 63, 47, "snow", [(47, 63)]),
            ("GRAY16_LE", 63, 47, "snow", [(47, 63)]),
            ("NV12", 64, 48, "smpte", [(48, 64), (24, 32, 2)]),
            ("I420", 63, 47, "smpte", [(47, 63), (24, 32), (24, 32)]),  # odd: chroma rounds up
        ]
        for fmt, width, height, pattern, shapes in cases:
            with self.subTest(format=fmt):
                producer = self.producer(fmt=fmt, width=width, height=height, frames=8,
                                         pattern=pattern)
                reader = self.reader(producer)
                received = []
                for frame in reader:  # until EndOfStream
                    with frame:
                        self.assertEqual((frame.format, frame.width, frame.height, frame.memory),
                                         (fmt, width, height, "host"))
                        planes = frame.planes
                        self.assertEqual([plane.shape for plane in planes], shapes)
                        arrays = [numpy.asarray(plane) for plane in planes]
                        for plane, array in zip(planes, arrays):
                            self.assertEqual(array.shape, plane.shape)
                            self.assertEqual(array.strides[0], plane.stride)
                            self.assertFalse(array.flags.writeable)
                            # in place: the array is the producer's memory
                            self.assertEqual(array.__array_interface__["data"][0],
                                             frame.data_ptr + plane.offset)
                        if len(shapes) == 1:  # packed: the frame itself is the array
                            whole = numpy.asarray(frame)
                            self.assertEqual(whole.shape, shapes[0])
                            self.assertEqual(whole.__array_interface__["data"][0], frame.data_ptr)
                        self.assertEqual(arrays[0].dtype,
                                         numpy.dtype("<u2" if fmt == "GRAY16_LE" else "u1"))
                        received.append((frame.offset, frame.duration_ns, visible_crc(arrays)))
                        del arrays, planes
                sent = producer.finish()
                self.assertEqual(len(sent), 8)
                self.assertEqual(received, sent)
                self.assertEqual(reader.stats["frames_held"], 0)

    # -- lifetimes ----------------------------------------------------------------------------

    def test_with_frame_releases(self):
        producer = self.producer(frames=4)
        reader = self.reader(producer)
        with self.next_frame(reader) as frame:
            self.assertEqual(reader.stats["frames_held"], 1)
            self.assertIs(reader.stats["cuda_mps"], False)  # host memory: no CUDA context
            self.assertFalse(frame.released)
        self.assertTrue(frame.released)
        self.assertEqual(reader.stats["frames_held"], 0)
        frame.release()  # idempotent
        with self.assertRaisesRegex(ValueError, "released"):
            numpy.asarray(frame)
        self.assertEqual(reader.stats["frames_released"], 1)

    def test_last_array_reference_releases_and_in_flight_limit(self):
        gc.disable()  # released by reference counting alone: no cycle may keep a frame
        self.addCleanup(gc.enable)
        producer = self.producer(frames=10)
        reader = self.reader(producer, max_in_flight=2)
        first = numpy.asarray(self.next_frame(reader))  # the Frame lives on in the array
        second_frame = self.next_frame(reader)
        plane = second_frame.planes[0]  # an array of a plane keeps the frame too
        second = numpy.asarray(plane)
        del second_frame, plane
        self.assertEqual(reader.stats["frames_held"], 2)
        # Holding max_in_flight frames: nothing more arrives, next() times out (no deadlock).
        self.assertIsNone(reader.next(NO_FRAME_TIMEOUT_MS))
        first_copy = first.copy()
        del first
        self.assertEqual(reader.stats["frames_held"], 1)
        third = self.next_frame(reader)  # frames flow again
        self.assertEqual(third.offset, 2)
        self.assertFalse(numpy.array_equal(first_copy, numpy.asarray(third)))
        del second
        del third
        self.assertEqual(reader.stats["frames_held"], 0)

    def test_frames_outlive_the_reader(self):
        producer = self.producer(frames=3)
        reader = self.reader(producer)
        frame = self.next_frame(reader)
        crc = visible_crc([numpy.asarray(frame)])
        reader.close()
        self.assertEqual(visible_crc([numpy.asarray(frame)]), crc)
        self.assertEqual(reader.stats["frames_held"], 1)  # as it was when closed
        frame.release()
        with self.assertRaises(ValueError):
            reader.next(0)

    # -- DLPack -----------------------------------------------------------------------------

    def test_dlpack_on_host(self):
        if not hasattr(numpy, "from_dlpack"):
            self.skipTest(f"NumPy {numpy.__version__} has no from_dlpack (needs 1.22 or later)")
        gc.disable()
        self.addCleanup(gc.enable)
        producer = self.producer(fmt="NV12", frames=10, pattern="smpte")
        reader = self.reader(producer)
        frame = self.next_frame(reader)
        self.assertEqual(frame.__dlpack_device__(), (1, 0))
        luma, chroma = frame.planes
        luma_array = numpy.from_dlpack(luma)
        chroma_array = numpy.from_dlpack(chroma)
        self.assertEqual(luma_array.__array_interface__["data"][0], frame.data_ptr)  # zero-copy
        self.assertEqual(chroma_array.__array_interface__["data"][0],
                         frame.data_ptr + chroma.offset)
        self.assertEqual(chroma_array.shape, (24, 32, 2))
        self.assertEqual(chroma_array.strides, (chroma.stride, 2, 1))
        self.assertEqual(visible_crc([luma_array, chroma_array]),
                         visible_crc([numpy.asarray(luma), numpy.asarray(chroma)]))
        del frame, luma, chroma
        self.assertEqual(reader.stats["frames_held"], 1)  # the DLPack arrays hold it
        del luma_array
        self.assertEqual(reader.stats["frames_held"], 1)
        del chroma_array  # the last one: the deleter drops the frame
        self.assertEqual(reader.stats["frames_held"], 0)
        self.assertEqual(_dlpack.live_exports(), 0)

        # A capsule nobody consumes: its destructor releases the frame.
        frame = self.next_frame(reader)
        capsule = frame.planes[0].__dlpack__()
        del frame
        self.assertEqual(reader.stats["frames_held"], 1)
        del capsule
        self.assertEqual(reader.stats["frames_held"], 0)
        self.assertEqual(_dlpack.live_exports(), 0)

        # A capsule freed while an exception is being raised (C code that fails, then drops
        # it): the frame is released all the same, and the exception is reported, not lost.
        def frames_then_failure():
            yield self.next_frame(reader).planes[0].__dlpack__()
            raise KeyError("the consumer failed")

        reported = []
        hook = sys.unraisablehook
        sys.unraisablehook = lambda unraisable: reported.append(unraisable.exc_value)
        try:
            # list() drops what it built with the KeyError set; the capsule's destructor runs
            # then, so CPython (3.11) reports the KeyError as unraisable and list() ends in a
            # SystemError instead. Either way no other error may escape.
            with self.assertRaises((KeyError, SystemError)):
                list(frames_then_failure())  # list() drops what it built, with the error set
        finally:
            sys.unraisablehook = hook
        self.assertEqual([repr(e) for e in reported], [repr(KeyError("the consumer failed"))])
        self.assertEqual(reader.stats["frames_held"], 0)
        self.assertEqual(_dlpack.live_exports(), 0)

    def test_dlpack_packed_frame(self):
        if not hasattr(numpy, "from_dlpack"):
            self.skipTest(f"NumPy {numpy.__version__} has no from_dlpack (needs 1.22 or later)")
        producer = self.producer(fmt="GRAY16_LE", width=63, height=47, frames=3)
        reader = self.reader(producer)
        frame = self.next_frame(reader)
        array = numpy.from_dlpack(frame)
        self.assertEqual((array.shape, array.dtype), ((47, 63), numpy.dtype("<u2")))
        self.assertEqual(array.strides, (frame.planes[0].stride, 2))
        self.assertTrue(numpy.array_equal(array, numpy.asarray(frame)))

    # -- errors -----------------------------------------------------------------------------

    def test_no_producer(self):
        path = os.path.join(self.directory, "nobody-serves-this.sock")
        started = time.monotonic()
        with self.assertRaises(cudaipc.NoProducerError) as caught:
            cudaipc.Reader(path, connect_timeout_ms=200)
        self.assertLess(time.monotonic() - started, 5)
        error = caught.exception
        self.assertIsInstance(error, cudaipc.Error)
        self.assertEqual(error.status, cudaipc.ERROR_NO_PRODUCER)
        self.assertEqual(error.status_name, "no producer")
        self.assertIn(path, str(error))

    def test_invalid_options(self):
        with self.assertRaises(ValueError):
            cudaipc.Reader(os.path.join(self.directory, "x.sock"), memory="gpu")
        with self.assertRaises(cudaipc.InvalidArgumentError) as caught:  # the library's check
            cudaipc.Reader(os.path.join(self.directory, "x.sock"), max_in_flight=0)
        self.assertEqual(caught.exception.status, cudaipc.ERROR_INVALID_ARGUMENT)
        self.assertIn("max_in_flight", str(caught.exception))

    def test_planar_frame_as_array_names_planes(self):
        producer = self.producer(fmt="NV12", frames=3)
        reader = self.reader(producer)
        frame = self.next_frame(reader)
        for use in (numpy.asarray, lambda f: f.__array_interface__, lambda f: f.__dlpack__()):
            with self.assertRaisesRegex(TypeError, r"planes\[i\]"):
                use(frame)
        self.assertFalse(hasattr(frame, "__cuda_array_interface__"))  # host memory
        self.assertEqual(numpy.asarray(frame.planes[0]).shape, (48, 64))

    def test_struct_layout_matches_the_library(self):
        options = _capi.spare_struct(_capi.ReaderOptions)
        _capi.lib().cudaipc_reader_options_init(options)
        self.assertEqual(options.struct_size, ctypes.sizeof(_capi.ReaderOptions))
        self.assertEqual((options.max_in_flight, options.connect_timeout_ms, options.cuda_device,
                          options.reconnect_interval_ms), (4, 5000, -1, 100))
        self.assertTrue(cudaipc.library_version())

    # -- threads ----------------------------------------------------------------------------

    def idle_producer(self):
        """A producer that accepts a reader but sends nothing: it waits for a second consumer."""
        return self.producer(frames=3, extra=("--min-consumers", "2"))

    def stop_while_blocked(self, reader, target, stop, failure):
        """Runs `target` in a thread until it waits inside reader.next() (it holds the reader's
        call lock there), then calls `stop()`: the thread must end, else `failure`."""
        thread = threading.Thread(target=target)
        thread.start()
        deadline = time.monotonic() + 10
        while not reader._call_lock.locked():
            self.assertTrue(thread.is_alive(), "the thread ended before waiting for a frame")
            self.assertLess(time.monotonic(), deadline, "the thread never waited for a frame")
            time.sleep(0.01)
        time.sleep(0.2)
        self.assertTrue(thread.is_alive(), "next() returned with no frame to return")
        stop()
        thread.join(5)
        self.assertFalse(thread.is_alive(), failure)

    def test_interrupt_ends_a_blocking_next(self):
        producer = self.idle_producer()
        reader = self.reader(producer)
        outcome = []

        def blocked():
            try:
                reader.next()  # no timeout
                outcome.append("returned")
            except cudaipc.Interrupted as e:
                outcome.append(e.status)

        self.stop_while_blocked(reader, blocked, reader.interrupt, "interrupt() did not end next()")
        self.assertEqual(outcome, [cudaipc.INTERRUPTED])

        # Iterating ends quietly on interrupt().
        frames = []
        self.stop_while_blocked(reader, lambda: frames.extend(reader), reader.interrupt,
                                "interrupt() did not end the iteration")
        self.assertEqual(frames, [])

        # close() from another thread ends next() too.
        outcome.clear()
        self.stop_while_blocked(reader, blocked, reader.close, "close() did not end next()")
        self.assertEqual(outcome, [cudaipc.INTERRUPTED])
        self.assertTrue(reader.closed)

    # -- no frame without an owner (issue 24, item 2) -------------------------------------------

    def test_keyboard_interrupt_anywhere_in_next_leaks_no_frame(self):
        """Ctrl-C's KeyboardInterrupt can land at any line Python runs in next(), including the
        ones between the library's return of a frame and the Frame that wraps it. Injected at
        each such line in turn (sys.settrace), it must leave no frame held, even while the
        exception (and its traceback) is still alive, as a REPL keeps it."""
        producer = self.producer(frames=400)
        reader = self.reader(producer, max_in_flight=2)
        package = os.path.dirname(cudaipc.__file__)
        caught = []
        line = 0
        while True:
            events = [0]

            def local(frame, event, arg):
                if event == "line":
                    events[0] += 1
                    # Leaving a `with` block, Python reports its line again before it calls
                    # __exit__: a trace function can raise there, a signal cannot (CPython runs
                    # handlers only between bytecodes that check for them), and the lock's
                    # __exit__ would never run. Every other line is fair game.
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
                frame = reader.next(FRAME_TIMEOUT_MS)
            except KeyboardInterrupt as interrupt:
                caught.append(interrupt)  # kept alive, traceback and all
                self.assertEqual(reader.stats["frames_held"], 0,
                                 f"a frame leaked when Ctrl-C landed at line event {line}")
                line += 1
                continue
            finally:
                sys.settrace(None)
            self.assertIsNotNone(frame)
            frame.release()
            del frame  # not dropped by the next assignment, inside the traced call
            if line > events[0]:  # every line of next() had its interrupt
                break
            line += 1
        self.assertGreater(len(caught), 5, "next() ran too few lines to test")
        self.assertEqual(reader.stats["frames_held"], 0)
        # The reader still works, and every claim is back: it can hold max_in_flight frames.
        frames = [self.next_frame(reader) for _ in range(2)]
        for frame in frames:
            frame.release()

    def test_keyboard_interrupt_in_a_dropped_frames_finalizer_leaks_no_frame(self):
        """Ctrl-C can land in the __del__ that releases a dropped frame, where Python ignores the
        KeyboardInterrupt and the rest of __del__ does not run. The frame is not leaked: the
        reader releases it at its next call. Injected at each line event of the handle's
        __del__ before the call that hands the frame over (where no signal can land)."""
        producer = self.producer(frames=0, extra=("--fps", "200"))
        reader = self.reader(producer, max_in_flight=2)
        injected = 0
        for line in range(1, 10):
            frames = [self.next_frame(reader), self.next_frame(reader)]  # all it may hold
            with interrupt_in_finalizer(line) as events:
                del frames[0]  # its handle's __del__ runs here, and is cut short at that line
            if line > events[0]:
                frames[0].release()
                break  # every line of __del__ had its interrupt
            injected += 1
            # The next frame comes only if the dropped one went back (max_in_flight=2).
            again = reader.next(FRAME_TIMEOUT_MS)
            self.assertIsNotNone(again, f"the frame leaked when Ctrl-C landed at line event {line}")
            again.release()
            frames[0].release()
            del again, frames
        self.assertGreater(injected, 1, "__del__ ran too few lines to test")
        self.assertEqual(reader.stats["frames_held"], 0)

    def test_real_ctrl_c_during_next_leaks_no_frame(self):
        """SIGINT to this process at random moments while frames stream in."""
        producer = self.producer(frames=0, extra=("--fps", "200"))
        reader = self.reader(producer, max_in_flight=2)
        interrupts = unanswered = 0
        deadline = time.monotonic() + 30
        while interrupts < 20 and time.monotonic() < deadline:
            timer = threading.Timer(0.001 + (interrupts % 7) * 0.0013,
                                    os.kill, (os.getpid(), signal.SIGINT))
            # A SIGINT that lands in a finalizer (a dropped frame's __del__) is ignored by
            # Python: after 2 s without it, the round ends and Ctrl-C is pressed again.
            round_ends = time.monotonic() + 2
            try:
                # Started inside the try: on a loaded machine the SIGINT can land before start()
                # returns, and that too is an interrupt the reader must survive.
                timer.start()
                while time.monotonic() < round_ends:
                    frame = reader.next(FRAME_TIMEOUT_MS)
                    self.assertIsNotNone(frame)
                    frame.release()
                unanswered += 1
            except KeyboardInterrupt:
                interrupts += 1
            finally:
                timer.join()
        self.assertEqual(interrupts, 20, f"{unanswered} Ctrl-Cs went unanswered")
        self.assertLess(unanswered, 10)
        self.assertEqual(reader.stats["frames_held"], 0)
        frames = [self.next_frame(reader) for _ in range(2)]
        for frame in frames:
            frame.release()

    # -- how a stream ends (issue 24, items 5 and 8) ----------------------------------------------

    def test_end_of_stream_is_said_again_by_every_later_next(self):
        producer = self.producer(frames=2)
        reader = self.reader(producer)
        self.assertEqual(len([f.release() for f in reader]), 2)
        for _ in range(3):
            with self.assertRaises(cudaipc.EndOfStream):
                reader.next(100)
        self.assertEqual(list(reader), [])
        producer.finish()

    def test_eviction_raises_disconnected_with_the_reason_and_ends_no_loop_quietly(self):
        producer = self.producer(frames=100, extra=("--release-timeout", "300"))
        reader = self.reader(producer, max_in_flight=1)
        held = self.next_frame(reader)
        time.sleep(1.5)  # the producer needs the only slot back; we keep it past 300 ms
        with self.assertRaises(cudaipc.DisconnectedError) as cut:
            while reader.next(200) is None:
                pass
        self.assertEqual(cut.exception.status, cudaipc.ERROR_DISCONNECTED)
        self.assertIn("release-timeout", cut.exception.reason)
        self.assertNotIsInstance(cut.exception, cudaipc.EndOfStream)
        with self.assertRaises(cudaipc.DisconnectedError):
            reader.next(100)
        with self.assertRaises(cudaipc.DisconnectedError):
            for _frame in reader:
                self.fail("a frame after the eviction")
        held.release()

    def test_reader_that_reads_nothing_is_disconnected_and_its_first_next_says_so(self):
        # Issue 43, defect 3: an application that opens a Reader and spends longer than
        # release-timeout on its own set-up no longer holds a blocking producer and its other
        # readers up for the 30 s start-up grace; its first next() raises the disconnection
        # instead of returning a frame queued for it before it.
        producer = self.producer(frames=0, extra=("--release-timeout", "300",
                                                  "--backpressure", "block"))
        honest = self.reader(producer, max_in_flight=2)
        stop = threading.Event()
        gaps, errors, frames = [], [], [0]

        def read():
            last = time.monotonic()
            while not stop.is_set():
                try:
                    frame = honest.next(200)
                except cudaipc.Error as error:
                    errors.append(error)
                    return
                if frame is None:
                    continue
                now = time.monotonic()
                if frames[0]:
                    gaps.append(now - last)
                last = now
                frames[0] += 1
                frame.release()

        thread = threading.Thread(target=read)
        thread.start()
        try:
            deadline = time.monotonic() + 20
            while frames[0] <= 10 and time.monotonic() < deadline:
                time.sleep(0.01)
            self.assertGreater(frames[0], 10, "the honest reader gets no frames")
            late = self.reader(producer)
            time.sleep(2.0)  # its own set-up: reads nothing
            before = frames[0]
            time.sleep(0.5)
            self.assertGreater(frames[0], before, "the honest reader is still held up")
            with self.assertRaises(cudaipc.DisconnectedError) as cut:
                frame = late.next(0)
                frame.release()
            self.assertIn("had not read the frames", cut.exception.reason)
            self.assertIn("release-timeout", cut.exception.reason)
            self.assertEqual(late.stats["frames_received"], 0)
            with self.assertRaises(cudaipc.DisconnectedError):
                late.next(0)
        finally:
            stop.set()
            thread.join()
        self.assertEqual(errors, [])
        # release-timeout, and a margin for two processes on a busy machine; it was 34 s
        self.assertLessEqual(max(gaps), 0.3 + 1.5)

    def test_producer_killed_mid_stream_raises_disconnected(self):
        producer = self.producer(frames=0, extra=("--fps", "30"))
        reader = self.reader(producer)
        self.next_frame(reader).release()
        producer.process.kill()
        producer.process.wait()
        with self.assertRaises(cudaipc.DisconnectedError) as cut:
            for frame in reader:
                frame.release()
        self.assertIn("lost the producer", cut.exception.reason)

    # -- fork() (issue 43, item 5) ---------------------------------------------------------

    # A program that holds 4 frames, forks, and whose child exits normally (sys.exit: its
    # copies of the frames and of the reader are let go at exit), then reports what the parent
    # sees. Its own process, so that the child's exit is a real interpreter exit.
    _FORK_SCRIPT = textwrap.dedent("""
        import os, sys, time
        import numpy
        import cudaipc

        def fork_holding(reader):
            frames = [reader.next(10000) for _ in range(4)]
            assert all(frame is not None for frame in frames), "no frame within 10 s"
            before = [numpy.array(frame) for frame in frames]  # copies
            if os.fork() == 0:
                try:
                    print("CHILD-NEXT", reader.next(100), flush=True)
                except cudaipc.Error as error:
                    print("CHILD-NEXT", type(error).__name__, error, flush=True)
                sys.exit(0)  # the frames go as the stack unwinds, then the reader
            return frames, before

        reader = cudaipc.Reader(sys.argv[1], max_in_flight=4)
        frames, before = fork_holding(reader)
        _, status = os.wait()
        print("CHILD-STATUS", status, flush=True)
        time.sleep(0.3)  # at 100 fps, slots given back would be rewritten many times over
        changed = [i for i, frame in enumerate(frames)
                   if not numpy.array_equal(numpy.asarray(frame), before[i])]
        print("CHANGED", changed, flush=True)
        try:
            print("NEXT", reader.next(300), flush=True)  # holding max_in_flight: None
        except cudaipc.Error as error:
            print("NEXT", type(error).__name__, error, flush=True)
        for frame in frames:
            frame.release()
        received = 0
        for _ in range(10):
            frame = reader.next(5000)
            if frame is None:
                break
            frame.release()
            received += 1
        print("RECEIVED", received, flush=True)
        print("CONNECTS", reader.stats["connects"], flush=True)
        """)

    def test_forked_child_exiting_leaves_the_parents_frames_and_connection(self):
        # Live and never waiting: it rewrites at once any slot it gets back.
        producer = self.producer(frames=0, wait_for_consumer=False, extra=("--fps", "100"))
        run = subprocess.run([sys.executable, "-c", self._FORK_SCRIPT, producer.socket],
                             capture_output=True, text=True, timeout=60)
        said = {}
        for line in run.stdout.splitlines():
            key, _, value = line.partition(" ")
            said[key] = value
        context = f"stdout: {run.stdout!r}, stderr: {run.stderr[-2000:]!r}"
        self.assertEqual(said.get("CHILD-STATUS"), "0", context)
        self.assertTrue(said.get("CHILD-NEXT", "").startswith("InvalidArgumentError"), context)
        self.assertIn("fork()", said.get("CHILD-NEXT", ""), context)
        self.assertEqual(said.get("CHANGED"), "[]",
                         f"the parent's held frames were overwritten; {context}")
        self.assertEqual(said.get("NEXT"), "None", f"the parent was cut off; {context}")
        self.assertEqual(run.returncode, 0, context)
        self.assertEqual(said.get("RECEIVED"), "10", context)
        self.assertEqual(said.get("CONNECTS"), "1", context)

    def test_nul_in_the_socket_path_is_a_value_error(self):
        producer = self.producer(frames=2)
        for path in (producer.socket + "\0.other", producer.socket.encode() + b"\0x"):
            with self.assertRaises(ValueError) as refused:
                cudaipc.Reader(path, connect_timeout_ms=100)
            self.assertIn("NUL", str(refused.exception))


if __name__ == "__main__":
    unittest.main(verbosity=2)
