# SPDX-License-Identifier: LGPL-2.1-or-later
"""Reader, Frame and Plane: the Python face of cudaipc_reader and cudaipc_frame."""

import collections
import ctypes
import math
import os
import threading
import time

from . import _capi, _dlpack, _formats
from ._orphans import Orphans

# A blocking next() waits in C in slices this long, and open() is waited for in slices this long,
# so that Python can run signal handlers (Ctrl-C) in between; a frame that arrives returns at once.
_SLICE_MS = 200

_MEMORY_OPTIONS = {"any": _capi.MEMORY_ANY, "host": _capi.MEMORY_HOST, "cuda": _capi.MEMORY_CUDA}
_MEMORY_NAMES = {_capi.MEMORY_HOST: "host", _capi.MEMORY_CUDA: "cuda"}

FrameInfo = collections.namedtuple("FrameInfo", [
    "width", "height", "format", "pts_ns", "duration_ns", "sequence", "offset", "send_time_ns",
    "flags", "memory", "device", "data_ptr", "size", "n_planes", "plane_offset", "plane_stride",
])
FrameInfo.__doc__ = """A frame's description, as cudaipc_frame_info gives it (read-only).

pts_ns, duration_ns and offset are None when the producer gave none; memory is "cuda" or
"host"; device is the CUDA device ordinal (-1 for host memory); data_ptr is the address of the
frame's first byte (a CUdeviceptr for CUDA memory); plane_offset and plane_stride are tuples of
n_planes entries, in bytes."""


def _optional(value, missing):
    return None if value == missing else value


def _info_from_c(c_info):
    n_planes = min(c_info.n_planes, _capi.MAX_PLANES)
    return FrameInfo(
        width=c_info.width,
        height=c_info.height,
        format=c_info.format.decode("ascii", "replace"),
        pts_ns=_optional(c_info.pts_ns, _capi.NO_TIMESTAMP),
        duration_ns=_optional(c_info.duration_ns, _capi.NO_TIMESTAMP),
        sequence=c_info.sequence,
        offset=_optional(c_info.offset, _capi.NO_OFFSET),
        send_time_ns=c_info.send_time_ns,
        flags=c_info.flags,
        memory=_MEMORY_NAMES.get(c_info.memory, "host"),
        device=c_info.device,
        data_ptr=c_info.data,
        size=c_info.size,
        n_planes=n_planes,
        plane_offset=tuple(c_info.plane_offset[:n_planes]),
        plane_stride=tuple(c_info.plane_stride[:n_planes]),
    )


def stream_handle(stream):
    """A cudaStream_t value (an int) from an int, or from a stream object: torch.cuda.Stream
    (.cuda_stream), CuPy (.ptr), Numba (.handle). None stays None."""
    if stream is None:
        return None
    if isinstance(stream, int) and not isinstance(stream, bool):
        return stream
    for attribute in ("cuda_stream", "ptr", "handle"):
        value = getattr(stream, attribute, None)
        if value is not None:
            if isinstance(value, ctypes.c_void_p):
                value = value.value or 0
            return int(value)
    raise TypeError(f"a CUDA stream is an int (a cudaStream_t; 1: the legacy default stream) or "
                    f"an object with .cuda_stream, .ptr or .handle, not {type(stream).__name__}")


class _ArrayExports:
    """__array_interface__, __cuda_array_interface__, DLPack and __array__ for an object (a Frame
    or one of its planes) whose memory is described by a PlaneLayout. Every array made through
    them refers to that object, which keeps the Frame (and the producer's slot) claimed."""

    __slots__ = ()

    # Provided by Frame and Plane: the Frame, and the layout (or raises TypeError).
    def _owning_frame(self):
        raise NotImplementedError

    def _array_layout(self):
        raise NotImplementedError

    def _layout_for(self, memory, interface):
        frame = self._owning_frame()
        frame._check_held()
        if frame.memory != memory:
            where = "on the GPU" if frame.memory == "cuda" else "in host memory"
            raise AttributeError(f"{interface}: this {frame.format} frame is {where}")
        return frame, self._array_layout()

    @property
    def __array_interface__(self):
        frame, layout = self._layout_for("host", "__array_interface__")
        return {
            "version": 3,
            "shape": layout.shape,
            "typestr": layout.typestr,
            "data": (frame.data_ptr + layout.offset, True),  # read-only: the producer's memory
            "strides": layout.strides,
        }

    @property
    def __cuda_array_interface__(self):
        frame, layout = self._layout_for("cuda", "__cuda_array_interface__")
        frame._ready_on_legacy_stream()
        return {
            "version": 3,
            "shape": layout.shape,
            "typestr": layout.typestr,
            "data": (frame.data_ptr + layout.offset, True),
            "strides": layout.strides,
            # The frame is ready on the legacy default stream; consumers order their own stream
            # after it.
            "stream": _capi.STREAM_LEGACY,
        }

    def __dlpack_device__(self):
        frame = self._owning_frame()
        if frame.memory == "cuda":
            return (_dlpack.KDL_CUDA, frame.device)
        return (_dlpack.KDL_CPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A "dltensor" capsule (DLPack 0.x, which torch, CuPy and NumPy accept) describing this
        memory in place. `stream`: the consumer's CUDA stream (1: legacy default, 2: per-thread
        default, -1: do not synchronise, else a cudaStream_t); its work after this call waits on
        the GPU until the producer has finished writing the frame. `max_version` is accepted and
        the unversioned capsule returned, as the standard allows."""
        frame = self._owning_frame()
        frame._check_held()
        layout = self._array_layout()
        device = self.__dlpack_device__()
        if copy:
            raise BufferError("cudaipc shares frames in place; it does not copy them (copy=True)")
        if dl_device is not None and tuple(dl_device) != device:
            raise BufferError(f"this frame is on DLPack device {device}, not {tuple(dl_device)}; "
                              f"cudaipc does not copy frames between devices")
        if frame.memory == "cuda":
            handle = stream_handle(stream)
            if handle != -1:
                frame.wait_ready(handle)
        return _dlpack.export(self, frame.data_ptr + layout.offset, device[0], device[1],
                              layout.shape, layout.strides, layout.typestr)

    def __array__(self, dtype=None, copy=None):
        """NumPy's way in when __array_interface__ does not apply: explains why (a CUDA frame,
        a planar format) rather than making an array of one object."""
        frame = self._owning_frame()
        if frame.memory == "cuda":
            frame._check_held()
            raise TypeError(f"this {frame.format} frame is in GPU memory, which NumPy cannot read: "
                            f"use torch.from_dlpack() or cupy.asarray() on it, and copy to the "
                            f"host from there if you need to")
        import numpy

        array = numpy.asarray(_HostArrayView(self, self.__array_interface__))
        if dtype is not None and numpy.dtype(dtype) != array.dtype:
            return array.astype(dtype)
        return array.copy() if copy else array


class _HostArrayView:
    """What __array__ hands NumPy: the interface, and a reference that keeps the frame claimed."""

    __slots__ = ("_owner", "__array_interface__")

    def __init__(self, owner, interface):
        self._owner = owner
        self.__array_interface__ = interface


class _PlaneMembers:
    """What a plane of a frame is, for a Reader's frames (Plane) and a Writer's (WriterPlane):
    offset and stride (bytes), and, where cudaipc knows the format's layout, the plane's visible
    pixels as an array (shape, typestr). Keeps its frame alive (claimed, or lent) for as long as
    it, or an array made from it, lives."""

    __slots__ = ()

    def __init__(self, frame, index, layout, why):
        self._frame = frame
        self.index = index
        self._layout = layout
        self._why = why

    def _owning_frame(self):
        return self._frame

    def _array_layout(self):
        if self._layout is None:
            raise TypeError(self._why)
        return self._layout

    @property
    def frame(self):
        return self._frame

    @property
    def offset(self):
        """Bytes from the frame's first byte to the plane's first pixel."""
        return self._frame.info.plane_offset[self.index]

    @property
    def stride(self):
        """Bytes from one row to the next."""
        return self._frame.info.plane_stride[self.index]

    @property
    def data_ptr(self):
        return self._frame.data_ptr + self.offset

    @property
    def shape(self):
        """The plane's visible pixels as an array shape, e.g. (H, W) for luma, (H/2, W/2, 2) for
        NV12's chroma; None where the format's layout is not known."""
        return self._layout.shape if self._layout else None

    @property
    def strides(self):
        return self._layout.strides if self._layout else None

    @property
    def typestr(self):
        return self._layout.typestr if self._layout else None

    @property
    def row_bytes(self):
        """Visible bytes per row (the stride may have padding after them)."""
        return self._layout.row_bytes if self._layout else None

    def __repr__(self):
        return (f"<cudaipc.{type(self).__name__} {self.index} of {self._frame.format} "
                f"shape={self.shape} offset={self.offset} stride={self.stride}>")


class Plane(_PlaneMembers, _ArrayExports):
    """One plane of a frame: offset and stride (bytes), and, where cudaipc knows the format's
    layout, the plane's visible pixels as an array (shape, typestr) through the same interfaces
    as a Frame. Keeps its frame claimed for as long as it (or an array made from it) lives."""

    __slots__ = ("_frame", "index", "_layout", "_why")


class _FrameHandle:
    """Owns one cudaipc_frame*. cudaipc_reader_next() writes the pointer straight into
    `pointer`, so that no frame is ever without an owner - not even between the C call's return
    and the Frame that wraps it, where a KeyboardInterrupt lands when Ctrl-C came during the
    wait. Dropped while it still owns a frame, it releases it (on `release_stream`)."""

    __slots__ = ("pointer", "release_stream", "_release", "__weakref__")

    def __init__(self):
        self.pointer = ctypes.c_void_p()
        self.release_stream = None  # Frame sets the legacy default stream for CUDA frames
        self._release = _capi.lib().cudaipc_frame_release  # bound now: no Python call later

    def release(self, stream):
        """Gives the frame back (once; a no-op afterwards); returns the library's status."""
        # No call between taking the pointer and handing it over: CPython runs signal handlers
        # only at calls and loops, so a KeyboardInterrupt cannot leave it taken but unreleased.
        pointer, self.pointer.value = self.pointer.value, None
        return self._release(pointer, stream) if pointer else _capi.OK

    def __del__(self):
        # Python ignores an exception raised in __del__, so this calls as little as it can before
        # the library has the frame back; a KeyboardInterrupt that still lands here (at the
        # first instruction, or after getattr) leaves the frame in `pointer`, which the Reader
        # keeps and releases at its next call (_orphans). `pointer` is missing when __init__
        # itself was interrupted.
        pointer = getattr(self, "pointer", None)
        if pointer:
            taken, pointer.value = pointer.value, None
            self._release(taken, self.release_stream)


def _info_property(name):
    return property(lambda self: getattr(self._info, name), doc=f"FrameInfo.{name}")


class _FrameLayouts:
    """What a frame of either side (Frame, WriterFrame) derives from its plane layouts
    (self._layouts, or None with the reason in self._why): its planes, and itself as an array
    where the format is packed."""

    __slots__ = ()

    def _make_planes(self, plane_type):
        if self._layouts is not None:
            return [plane_type(self, index, layout, None)
                    for index, layout in enumerate(self._layouts)]
        return [plane_type(self, index, None, self._why) for index in range(self._info.n_planes)]

    def _owning_frame(self):
        return self

    def _array_layout(self):
        if self._layouts is None:
            raise TypeError(f"cannot use this {self.format} frame as an array: {self._why}")
        if not _formats.is_packed(self.format):
            raise TypeError(f"a {self.format} frame has {len(self._layouts)} planes: use "
                            f"frame.planes[i] as arrays (e.g. numpy.asarray(frame.planes[0]) or "
                            f"torch.from_dlpack(frame.planes[0]) for the luma plane)")
        return self._layouts[0]


class Frame(_FrameLayouts, _ArrayExports):
    """A frame received from the producer: the producer's own memory, claimed until released.

    Release it with release() (or `with frame:`), or let it go: the last reference to the Frame,
    or to an array, plane or DLPack tensor made from it, releases it. Until then the producer
    does not write into its slot, and the frame counts against the reader's max_in_flight.
    """

    __slots__ = ("_handle", "_lock", "_info", "_layouts", "_why", "_ready_on_legacy",
                 "__weakref__")  # _handle: the _FrameHandle; dropping it releases the frame

    width = _info_property("width")
    height = _info_property("height")
    format = _info_property("format")
    pts_ns = _info_property("pts_ns")
    duration_ns = _info_property("duration_ns")
    sequence = _info_property("sequence")
    offset = _info_property("offset")
    send_time_ns = _info_property("send_time_ns")
    flags = _info_property("flags")
    memory = _info_property("memory")
    device = _info_property("device")
    data_ptr = _info_property("data_ptr")
    size = _info_property("size")

    def __init__(self, handle):
        """Internal: Reader.next() makes frames. Shares `handle` (a _FrameHandle) with the
        caller, which releases it if this raises."""
        self._handle = handle
        self._lock = threading.Lock()
        self._ready_on_legacy = False
        c_info = _capi.spare_struct(_capi.FrameInfo)
        _capi.check(_capi.lib().cudaipc_frame_get_info(handle.pointer, c_info))
        self._info = _info_from_c(c_info)
        if self._info.memory == "cuda":
            # Dropped unreleased: after the work on the legacy default stream, as release() does.
            handle.release_stream = _capi.STREAM_LEGACY
        self._layouts, self._why = _formats.plane_layouts(self._info)

    @property
    def info(self):
        """Everything cudaipc_frame_info says, as a FrameInfo."""
        return self._info

    @property
    def released(self):
        return not self._handle.pointer

    @property
    def planes(self):
        """The frame's planes (a new list of Plane objects each time; each keeps the frame
        claimed)."""
        return self._make_planes(Plane)

    def _check_held(self):
        if not self._handle.pointer:
            raise ValueError("the frame was released: its memory is the producer's again")

    def _ready_on_legacy_stream(self):
        if not self._ready_on_legacy:
            self.wait_ready(_capi.STREAM_LEGACY)
            self._ready_on_legacy = True

    def wait_ready(self, stream=None):
        """Makes GPU work queued on `stream` after this call wait until the producer has finished
        writing the frame (on the GPU; the CPU does not wait). `stream`: a cudaStream_t int or a
        stream object; None or 0: the legacy default stream. Nothing to do for host memory."""
        with self._lock:
            self._check_held()
            handle = stream_handle(stream)
            status = _capi.lib().cudaipc_frame_wait_ready(self._handle.pointer, handle or None)
            _capi.check(status)

    def release(self, stream=None):
        """Gives the frame back to the producer. Idempotent; any thread.

        CUDA memory: the slot goes back once the GPU work queued so far on `stream` is done,
        without the CPU waiting. The default (None, or 0) is the legacy default stream, which
        covers work on it and on every blocking stream (torch's and CuPy's default streams);
        work on a non-blocking stream (torch.cuda.Stream(), for one) needs that stream here
        (`release(stream=s)`, s an int cudaStream_t or a torch/CuPy stream). Host memory:
        released at once.

        Arrays made from the frame must not be used afterwards: they would read the producer's
        next frames. Letting them (and the frame) go releases it safely instead.
        """
        release_on = None
        if self._info.memory == "cuda":
            # NULL would tell the library that no GPU work reads the frame.
            release_on = stream_handle(stream) or _capi.STREAM_LEGACY
        with self._lock:  # not while wait_ready() uses the frame on another thread
            status = self._handle.release(release_on)
        _capi.check(status)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    # No __del__: the _FrameHandle releases the frame when the last reference goes.

    def __repr__(self):
        state = "released" if self.released else self.memory
        return (f"<cudaipc.Frame #{self.sequence} {self.format} {self.width}x{self.height} "
                f"{state} offset={self.offset}>")


class Reader:
    """Reads frames from a cudasink-ipc producer (see the package documentation).

    Opens on construction: waits up to connect_timeout_ms for a producer (0: forever; with
    reconnect=True the library waits forever too), and raises NoProducerError (or another
    Error) if it cannot attach. A reader is used from one thread at a time; interrupt() and
    close() may be called from any thread.

    A reader and its frames belong to the process that opened it. In a child made by fork(),
    next() raises InvalidArgumentError, interrupt() does nothing, and releasing frames or closing
    the reader there (also at the child's exit) says nothing to the producer: the parent's
    frames stay claimed and its connection open. A child that wants frames opens its own Reader.
    """

    def __init__(self, socket_path=None, *, memory="any", cuda_device=-1, max_in_flight=4,
                 connect_timeout_ms=5000, reconnect=False, reconnect_interval_ms=100,
                 allow_other_users=False):
        self._handle = None
        self._final_stats = None
        # _call_lock: one C call on the reader at a time (next, stats, close). _handle_lock:
        # _handle stays valid while interrupt() uses it; reentrant so that a signal handler
        # calling interrupt() on the thread that holds it cannot deadlock.
        self._call_lock = threading.Lock()
        self._handle_lock = threading.RLock()
        # Frames whose handle died holding them (Ctrl-C in its __del__): released by next().
        self._orphans = Orphans(_capi.lib().cudaipc_frame_release, _capi.STREAM_LEGACY)
        if memory not in _MEMORY_OPTIONS:
            raise ValueError(f"memory must be one of {', '.join(_MEMORY_OPTIONS)}, not {memory!r}")
        for name, value in (("max_in_flight", max_in_flight),
                            ("connect_timeout_ms", connect_timeout_ms),
                            ("reconnect_interval_ms", reconnect_interval_ms)):
            if not 0 <= int(value) < 1 << 32:
                raise ValueError(f"{name} must be between 0 and 2**32-1, not {value!r}")
        encoded_path = None if socket_path is None else os.fsencode(socket_path)
        if encoded_path is not None and b"\0" in encoded_path:
            # C would stop at the NUL and connect to the shorter path; open() refuses it too.
            raise ValueError(f"socket_path contains a NUL byte: {socket_path!r}")
        self.socket_path = None if socket_path is None else os.fsdecode(socket_path)
        lib = _capi.lib()
        options = _capi.spare_struct(_capi.ReaderOptions)
        lib.cudaipc_reader_options_init(options)
        options.socket_path = encoded_path
        options.memory = _MEMORY_OPTIONS[memory]
        options.cuda_device = int(cuda_device)
        options.max_in_flight = int(max_in_flight)
        options.connect_timeout_ms = int(connect_timeout_ms)
        options.reconnect = 1 if reconnect else 0
        options.reconnect_interval_ms = int(reconnect_interval_ms)
        options.allow_other_users = 1 if allow_other_users else 0
        self._handle = _open(options)

    # -- reading ---------------------------------------------------------------------------

    def next(self, timeout_ms=-1):
        """The next frame; None if none came within timeout_ms (< 0: wait as long as it takes).

        Raises EndOfStream when the producer ended the stream, DisconnectedError when the stream
        was cut (evicted, or the producer vanished), Interrupted after interrupt() or close(),
        and another Error when the stream failed. After EndOfStream or DisconnectedError every
        next() raises it again.
        """
        if self._handle is None:
            raise ValueError("the reader is closed")
        deadline = None if timeout_ms < 0 else time.monotonic() + timeout_ms / 1000
        # The library writes the frame into its owner: an exception anywhere from the C call's
        # return on (Ctrl-C's KeyboardInterrupt) cannot leave a frame nobody releases.
        self._orphans.sweep()
        frame_handle = _FrameHandle()
        self._orphans.track(frame_handle)
        lib = _capi.lib()
        try:
            while True:
                wait_ms = _SLICE_MS
                if deadline is not None:
                    left_ms = math.ceil((deadline - time.monotonic()) * 1000)
                    wait_ms = min(_SLICE_MS, max(0, left_ms))
                with self._call_lock:
                    handle = self._handle
                    if handle is None:  # close() on another thread, between two waits
                        raise _capi.Interrupted(_capi.INTERRUPTED, "the reader was closed")
                    status = lib.cudaipc_reader_next(handle, wait_ms,
                                                     ctypes.byref(frame_handle.pointer))
                    if status == _capi.OK:
                        return Frame(frame_handle)
                    if status != _capi.TIMEOUT:
                        raise _capi.error_for(status, _capi.last_error())
                if deadline is not None and time.monotonic() >= deadline:
                    return None
        except BaseException:
            # A frame that never reached the caller goes back now, not when the traceback (which
            # a REPL keeps) lets its handle go; nothing on a GPU can have read it.
            frame_handle.release(None)
            raise

    def __iter__(self):
        """Frames until the stream ends (or interrupt()/close()); raises Error if it fails,
        DisconnectedError if it was cut."""
        while True:
            try:
                frame = self.next()
            except (_capi.EndOfStream, _capi.Interrupted):
                return
            yield frame

    def interrupt(self):
        """Makes a next() in progress on another thread (or the next one) raise Interrupted.
        Any thread; also from a signal handler."""
        with self._handle_lock:
            if self._handle is not None:
                _capi.lib().cudaipc_reader_interrupt(self._handle)

    # -- state -----------------------------------------------------------------------------

    @property
    def stats(self):
        """The reader's counters as a dict: frames_received, frames_released, frames_held,
        slots_imported, slots_retired, connects, max_in_flight (what the producer granted),
        cuda_mps (True: CUDA memory, and this process's CUDA context is an MPS client).
        After close(): as they were when closed."""
        with self._call_lock:
            if self._handle is None:
                if self._final_stats is None:
                    raise ValueError("the reader is closed")
                return dict(self._final_stats)
            return _read_stats(self._handle)

    @property
    def closed(self):
        return self._handle is None

    def close(self):
        """Leaves the producer. Frames not yet released stay valid until they are. Idempotent;
        from another thread, it ends a next() in progress there (which raises Interrupted)."""
        self._orphans.sweep()  # frames lost in a handle's interrupted __del__ go back first
        with self._handle_lock:
            handle = self._handle
            if handle is None:
                return
            _capi.lib().cudaipc_reader_interrupt(handle)  # ends a next() in progress
        with self._call_lock:
            with self._handle_lock:
                if self._handle is not handle:
                    return  # another close() got here first
                self._handle = None
            try:
                self._final_stats = _read_stats(handle)
            finally:
                _capi.lib().cudaipc_reader_close(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            try:
                self.close()
            except Exception:  # noqa: BLE001 - nothing to report to at garbage collection
                pass

    def __repr__(self):
        state = "closed" if self._handle is None else "open"
        return f"<cudaipc.Reader {self.socket_path or '(default socket)'} {state}>"


def _read_stats(handle):
    stats = _capi.spare_struct(_capi.ReaderStats)
    _capi.check(_capi.lib().cudaipc_reader_get_stats(handle, stats))
    out = {name: getattr(stats, name) for name, _ in _capi.ReaderStats._fields_
           if not name.startswith("reserved")}
    out["cuda_mps"] = bool(out["cuda_mps"])
    return out


def _open(options):
    """cudaipc_reader_open() on a thread of its own, so that this one stays responsive to
    Ctrl-C while the library waits for a producer (there is no reader to interrupt yet). If
    we stop waiting, that thread closes whatever it eventually opens."""
    lib = _capi.lib()
    finished = threading.Event()
    lock = threading.Lock()
    outcome = {"abandoned": False}

    def attempt():
        handle = ctypes.c_void_p()
        status = lib.cudaipc_reader_open(options, ctypes.byref(handle))
        message = _capi.last_error() if status != _capi.OK else ""
        with lock:
            if outcome["abandoned"]:
                if status == _capi.OK:
                    lib.cudaipc_reader_close(handle)
                return
            outcome.update(status=status, handle=handle.value, message=message)
            finished.set()

    thread = threading.Thread(target=attempt, name="cudaipc-open", daemon=True)
    thread.start()
    try:
        while not finished.wait(_SLICE_MS / 1000):
            pass
    except BaseException:
        with lock:
            outcome["abandoned"] = True
            if finished.is_set() and outcome["status"] == _capi.OK:
                lib.cudaipc_reader_close(outcome["handle"])
        raise
    thread.join()
    if outcome["status"] != _capi.OK:
        raise _capi.error_for(outcome["status"], outcome["message"])
    return outcome["handle"]
