# SPDX-License-Identifier: LGPL-2.1-or-later
"""Writer, WriterFrame and WriterPlane: the Python face of cudaipc_writer and cudaipc_slot.

The C API calls what acquire() lends a slot (cudaipc_slot); Python calls it a WriterFrame, the
writing side of a Reader's Frame: the same attributes, planes and array interfaces, writable.
"""

import collections
import ctypes
import math
import os
import sys
import threading
import time

from . import _capi, _dlpack, _formats
from ._orphans import Orphans
from ._reader import _SLICE_MS, _ArrayExports, _FrameLayouts, _PlaneMembers, stream_handle

_MEMORY_OPTIONS = {"cuda": _capi.MEMORY_CUDA, "host": _capi.MEMORY_HOST}
_MEMORY_NAMES = {_capi.MEMORY_HOST: "host", _capi.MEMORY_CUDA: "cuda"}
_BACKPRESSURE_OPTIONS = {"drop": _capi.BACKPRESSURE_DROP, "block": _capi.BACKPRESSURE_BLOCK}

SlotInfo = collections.namedtuple("SlotInfo", [
    "width", "height", "format", "memory", "device", "data_ptr", "size", "capacity", "n_planes",
    "plane_offset", "plane_stride", "generation", "index",
])
SlotInfo.__doc__ = """A lent slot's description, as cudaipc_slot_info gives it (read-only).

memory is "cuda" or "host"; device is the CUDA device ordinal (-1 for host memory); data_ptr is
the address of the frame's first byte (a CUdeviceptr for CUDA memory), writable; size is the
bytes of one frame in this layout, capacity the bytes of the slot; plane_offset and plane_stride
are tuples of n_planes entries, in bytes; generation changes with Writer.set_format(), index is
the slot's number within its generation."""


# ---------------------------------------------------------------------------------------------
# Frame layouts in a writer's slots: publish/frame_layout.cpp's table, which lays planes out as
# GStreamer's video-info does by default (every row rounded up to 4 bytes; planar chroma sized
# from the width and height rounded up to even). Writer.publish() needs it to check a planar
# source's size before the library reads it.

_Layout = collections.namedtuple("_Layout", "size plane_offset plane_stride")

# format: bytes per (subsampled) pixel of each plane's rows, log2 of the horizontal and of the
# vertical subsampling of each plane, and whether a row holds whole pixel pairs (packed 4:2:2).
_PUBLISHABLE = {
    **{name: ((4,), (0,), (0,), False) for name in
       ("BGRA", "BGRx", "RGBA", "RGBx", "ARGB", "ABGR", "xRGB", "xBGR")},
    "RGB": ((3,), (0,), (0,), False),
    "BGR": ((3,), (0,), (0,), False),
    "GRAY8": ((1,), (0,), (0,), False),
    "GRAY16_LE": ((2,), (0,), (0,), False),
    "YUY2": ((2,), (0,), (0,), True),
    "UYVY": ((2,), (0,), (0,), True),
    "NV12": ((1, 2), (0, 1), (0, 1), False),
    "I420": ((1, 1, 1), (0, 1, 1), (0, 1, 1), False),
}


def _round_up(value, to):
    return (value + to - 1) // to * to


def slot_layout(format_name, width, height):
    """The layout of a `format_name` frame of width x height in a writer's slot, as the library
    makes it: a _Layout (size, plane_offset, plane_stride), or None for a format this module
    does not know."""
    planes = _PUBLISHABLE.get(format_name)
    if planes is None or width < 1 or height < 1:
        return None
    pixel_bytes, x_shifts, y_shifts, even_width = planes
    planar = len(pixel_bytes) > 1
    planar_width = _round_up(width, 2) if planar else width
    planar_height = _round_up(height, 2) if planar else height
    pixels_width = _round_up(width, 2) if even_width else planar_width
    offsets, strides = [], []
    offset = 0
    for bpp, x_shift, y_shift in zip(pixel_bytes, x_shifts, y_shifts):
        stride = _round_up((pixels_width >> x_shift) * bpp, 4)
        offsets.append(offset)
        strides.append(stride)
        offset += stride * (planar_height >> y_shift)
    return _Layout(offset, tuple(offsets), tuple(strides))


# ---------------------------------------------------------------------------------------------
# Sources of Writer.publish()

_TYPE_NAMES = {"u1": "uint8", "u2": "uint16", "i1": "int8", "i2": "int16", "u4": "uint32",
               "i4": "int32", "f2": "float16", "f4": "float32", "f8": "float64"}


def _type_name(typestr):
    name = _TYPE_NAMES.get(typestr[1:], typestr)
    if typestr[2:] not in ("", "1") and typestr[0] in "<>":
        name += " (little-endian)" if typestr[0] == "<" else " (big-endian)"
    return name


def _same_type(typestr, wanted):
    if typestr[1:] != wanted[1:]:
        return False
    if wanted[2:] == "1":
        return True  # one byte: no byte order

    native = "<" if sys.byteorder == "little" else ">"
    return ((native if typestr[0] in "=|" else typestr[0]) ==
            (native if wanted[0] in "=|" else wanted[0]))


def _contiguous_strides(shape, itemsize):
    strides, step = [], itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))


def _is_c_contiguous(shape, strides, itemsize):
    # Dimensions of one element may have any stride.
    return all(extent == 1 or stride == wanted for extent, stride, wanted in
               zip(shape, strides, _contiguous_strides(shape, itemsize)))


def _source_interface(source, writer_memory):
    """(interface, on the GPU, what keeps the memory alive) of a Writer.publish() source."""
    interface = getattr(source, "__cuda_array_interface__", None)  # CPU tensors: AttributeError
    if interface is not None:
        if writer_memory != "cuda":
            raise ValueError("this writer shares host memory, which it fills with memcpy: it "
                             "cannot read a GPU source; publish a host copy (tensor.cpu(), "
                             "cupy.asnumpy()) or open the writer with memory='cuda'")
        return interface, True, source
    interface = getattr(source, "__array_interface__", None)
    if interface is not None and isinstance(interface.get("data"), tuple):
        return interface, False, source
    try:
        import numpy
    except ImportError:
        raise TypeError(f"cannot publish a {type(source).__name__}: a source has "
                        f"__cuda_array_interface__ (a torch CUDA tensor, a CuPy array) or "
                        f"__array_interface__ (a NumPy array); other objects (buffers, torch CPU "
                        f"tensors) need NumPy") from None
    try:
        array = numpy.asarray(memoryview(source))  # bytes, bytearray, ...: their bytes
    except TypeError:
        array = numpy.asarray(source)  # e.g. a torch CPU tensor, through its __array__
    if array.dtype.kind not in "uif" or array.dtype.hasobject:
        raise TypeError(f"cannot publish a {type(source).__name__}: it is not an array of "
                        f"numbers (NumPy made a {array.dtype} array of it)")
    return array.__array_interface__, False, array


# ---------------------------------------------------------------------------------------------
# Frames


class _SlotHandle:
    """Owns one cudaipc_slot*. cudaipc_writer_acquire() writes the pointer straight into
    `pointer`, so that no slot is ever without an owner - not even between the C call's return
    and the WriterFrame that wraps it, where a KeyboardInterrupt lands when Ctrl-C came during
    the wait. Dropped while it still owns a slot, it abandons it."""

    __slots__ = ("pointer", "_abandon", "_publish", "__weakref__")

    def __init__(self):
        self.pointer = ctypes.c_void_p()
        lib = _capi.lib()
        self._abandon = lib.cudaipc_slot_abandon  # bound now: no Python call later
        self._publish = lib.cudaipc_slot_publish

    def abandon(self):
        """Gives the slot back unsent (once; a no-op afterwards)."""
        # No call between taking the pointer and handing it over: CPython runs signal handlers
        # only at calls and loops, so a KeyboardInterrupt cannot leave it taken but not given.
        pointer, self.pointer.value = self.pointer.value, None
        if pointer:
            self._abandon(pointer)

    def publish(self, stream, pts_ns, duration_ns):
        """Sends the slot (once); returns the library's status. The loan ends either way."""
        pointer, self.pointer.value = self.pointer.value, None
        if not pointer:
            return None
        return self._publish(pointer, stream, pts_ns, duration_ns)

    def __del__(self):
        # As _FrameHandle.__del__: as little as can be before the library has the slot back;
        # what a KeyboardInterrupt here leaves in `pointer`, the Writer abandons at its next
        # acquire() or close() (_orphans).
        pointer = getattr(self, "pointer", None)
        if pointer:
            taken, pointer.value = pointer.value, None
            self._abandon(taken)


class _WritableExports(_ArrayExports):
    """The array interfaces of a Reader's frames, writable: __array_interface__ and
    __cuda_array_interface__ without the read-only flag, and DLPack with nothing to wait for."""

    __slots__ = ()

    @property
    def __array_interface__(self):
        frame, layout = self._layout_for("host", "__array_interface__")
        return {
            "version": 3,
            "shape": layout.shape,
            "typestr": layout.typestr,
            "data": (frame.data_ptr + layout.offset, False),  # writable: the slot is lent
            "strides": layout.strides,
        }

    @property
    def __cuda_array_interface__(self):
        frame, layout = self._layout_for("cuda", "__cuda_array_interface__")
        return {
            "version": 3,
            "shape": layout.shape,
            "typestr": layout.typestr,
            "data": (frame.data_ptr + layout.offset, False),
            "strides": layout.strides,
            # Nothing to wait for: a slot comes back once every consumer's reads of it are
            # done. Ordering after your own earlier writes into it is yours (see WriterFrame).
            "stream": None,
        }

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A "dltensor" capsule (DLPack 0.x) describing the slot's memory in place, writable.
        `stream` (the consumer's) is accepted and nothing is queued on it: a lent slot holds no
        reads of consumers. `max_version` is accepted and the unversioned capsule returned."""
        frame = self._owning_frame()
        frame._check_held()
        layout = self._array_layout()
        device = self.__dlpack_device__()
        if copy:
            raise BufferError("cudaipc lends slots in place; it does not copy them (copy=True)")
        if dl_device is not None and tuple(dl_device) != device:
            raise BufferError(f"this slot is on DLPack device {device}, not {tuple(dl_device)}; "
                              f"cudaipc does not copy frames between devices")
        stream_handle(stream)  # a TypeError for what is not a stream
        return _dlpack.export(self, frame.data_ptr + layout.offset, device[0], device[1],
                              layout.shape, layout.strides, layout.typestr)


class WriterPlane(_PlaneMembers, _WritableExports):
    """One plane of a WriterFrame: offset and stride (bytes), and, where cudaipc knows the
    format's layout, the plane's visible pixels as a writable array (shape, typestr) through
    the same interfaces as a WriterFrame. Keeps its frame (and the lent slot) alive."""

    __slots__ = ("_frame", "index", "_layout", "_why")


def _info_from_c(c_info):
    n_planes = min(c_info.n_planes, _capi.MAX_PLANES)
    return SlotInfo(
        width=c_info.width,
        height=c_info.height,
        format=c_info.format.decode("ascii", "replace"),
        memory=_MEMORY_NAMES.get(c_info.memory, "host"),
        device=c_info.device,
        data_ptr=c_info.data,
        size=c_info.size,
        capacity=c_info.capacity,
        n_planes=n_planes,
        plane_offset=tuple(c_info.plane_offset[:n_planes]),
        plane_stride=tuple(c_info.plane_stride[:n_planes]),
        generation=c_info.generation,
        index=c_info.index,
    )


def _info_property(name):
    return property(lambda self: getattr(self._info, name), doc=f"SlotInfo.{name}")


def _timestamp(name, value):
    if value is None:
        return _capi.NO_TIMESTAMP
    if isinstance(value, bool) or not 0 <= int(value) < _capi.NO_TIMESTAMP:
        raise ValueError(f"{name} is nanoseconds (CLOCK_MONOTONIC), 0 to 2**64-2, or None; not "
                         f"{value!r}")
    return int(value)


class WriterFrame(_FrameLayouts, _WritableExports):
    """A slot lent by Writer.acquire(): write the frame into it, then publish() it, or abandon()
    it. (The C API's cudaipc_slot; it is named after a Reader's Frame, whose attributes, planes
    and array interfaces it shares - writable here.)

    Arrays, in place: packed formats (BGRx, RGB, GRAY8, ...) are the frame itself, e.g.
    numpy.asarray(frame)[...] = image (host memory), torch.from_dlpack(frame) or
    torch.as_tensor(frame, device="cuda") (CUDA, through DLPack or __cuda_array_interface__);
    planar formats (NV12, I420) are frame.planes[i]. They cover the visible pixels, with the
    slot's row stride (rows padded to 4 bytes, as GStreamer lays frames out).

    CUDA: nothing needs waiting for before writing - a slot comes back only once every
    consumer's reads of it are done - but your own earlier writes into the slot are yours to
    order: write the slot on the stream you publish it with (publish(stream=s)), as a slot
    nobody received is lent again at once, possibly while the writes that made its previous
    frame still run.

    The loan ends with publish() or abandon() (or leaving `with frame:` unpublished, also by an
    exception or Ctrl-C, which abandons it), or when the last reference to the frame and to
    every array, plane or DLPack tensor made from it goes (which abandons it). Afterwards the
    frame raises ValueError on use; arrays made from it must not be used any more (the slot is
    the consumers', then the next frame's).
    """

    __slots__ = ("_handle", "_lock", "_info", "_layouts", "_why", "_state", "__weakref__")

    width = _info_property("width")
    height = _info_property("height")
    format = _info_property("format")
    memory = _info_property("memory")
    device = _info_property("device")
    data_ptr = _info_property("data_ptr")
    size = _info_property("size")
    capacity = _info_property("capacity")
    generation = _info_property("generation")
    index = _info_property("index")

    def __init__(self, handle):
        """Internal: Writer.acquire() makes frames. Shares `handle` (a _SlotHandle) with the
        caller, which abandons it if this raises."""
        self._handle = handle
        self._lock = threading.Lock()
        self._state = "lent"
        c_info = _capi.spare_struct(_capi.SlotInfo)
        _capi.check(_capi.lib().cudaipc_slot_get_info(handle.pointer, c_info))
        self._info = _info_from_c(c_info)
        self._layouts, self._why = _formats.plane_layouts(self._info)

    @property
    def info(self):
        """Everything cudaipc_slot_info says, as a SlotInfo."""
        return self._info

    @property
    def state(self):
        """"lent" until publish() or abandon(), then "published" or "abandoned"."""
        return self._state

    @property
    def planes(self):
        """The frame's planes (a new list of WriterPlane objects each time; each keeps the frame
        alive)."""
        return self._make_planes(WriterPlane)

    def _check_held(self):
        if not self._handle.pointer:
            raise ValueError(f"the frame was {self.state}: its slot is no longer lent to you")

    def publish(self, stream=None, pts_ns=None, duration_ns=None):
        """Sends the frame to every consumer with room; the loan ends (also when this raises).

        CUDA memory: sent once the GPU work queued so far on `stream` is done - a
        torch.cuda.Stream, a CuPy stream (.ptr), or an int cudaStream_t; None (or 0): the legacy
        default stream of the writer's device, which covers torch's and CuPy's default streams.
        The CPU does not wait. Host memory: `stream` is ignored; sent at once.

        pts_ns: the capture time, CLOCK_MONOTONIC nanoseconds (None: the time of this call);
        duration_ns: None for none.

        Raises InvalidArgumentError if the frame was acquired before Writer.set_format() (it is
        not sent), EndOfStream after Writer.end_stream() or Writer.close(), and ValueError if
        the frame was already published or abandoned.
        """
        handle = None
        if self._info.memory == "cuda":
            handle = stream_handle(stream) or None  # 0: NULL, the legacy default stream
        else:
            stream_handle(stream)  # a TypeError for what is not a stream
        pts = _timestamp("pts_ns", pts_ns)
        duration = _timestamp("duration_ns", duration_ns)
        with self._lock:
            self._check_held()
            self._state = "published"  # before: a KeyboardInterrupt may land after the call
            status = self._handle.publish(handle, pts, duration)
            if status != _capi.OK:
                self._state = "abandoned"  # the library gave the slot back
                raise _capi.error_for(status, _capi.last_error())

    def abandon(self):
        """Gives the slot back unsent. Idempotent, and a no-op after publish(); any thread."""
        with self._lock:
            if self._handle.pointer:
                self._state = "abandoned"
                self._handle.abandon()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.abandon()  # unless published: also on an exception, Ctrl-C included

    # No __del__: the _SlotHandle abandons the slot when the last reference goes.

    def __repr__(self):
        return (f"<cudaipc.WriterFrame slot {self.index} of generation {self.generation} "
                f"{self.format} {self.width}x{self.height} {self.memory} {self.state}>")


# ---------------------------------------------------------------------------------------------
# The writer


def _deadline(timeout_ms):
    return None if timeout_ms < 0 else time.monotonic() + timeout_ms / 1000


def _slice_ms(deadline):
    """How long the next wait in C may take: a slice, so that Ctrl-C is seen in between."""
    if deadline is None:
        return _SLICE_MS
    left_ms = math.ceil((deadline - time.monotonic()) * 1000)
    return min(_SLICE_MS, max(0, left_ms))


def _expired(deadline):
    return deadline is not None and time.monotonic() >= deadline


class Writer:
    """Serves a stream from this program, as cudasink-ipc does (see the package documentation):
    consumers - cudasrc-ipc, cudaipc:// URIs, Readers - cannot tell it from cudasink-ipc.

    Opens on construction: allocates pool_size slots of `format` at width x height in `memory`
    ("cuda": on cuda_device, -1: device 0; "host": shared host memory) and serves socket_path
    (None: the elements' per-user default). Raises BusyError when another producer serves the
    path, UnsupportedError for CUDA memory in a build without CUDA (or a libcudaipc without
    writers), CudaError when no usable GPU can share memory, InvalidArgumentError for options the
    library refuses.

    Options, as cudasink-ipc's properties: backpressure "drop" (a consumer with no room misses
    frames; the writer never waits for one) or "block" (acquire() waits until every consumer has
    room: every frame reaches every consumer); max_in_flight (frames one consumer may hold);
    release_timeout_ms (a consumer holding a frame the writer needs back longer is disconnected;
    0: never); framerate (numerator, denominator) announced in the caps ((0, 1): variable);
    socket_mode (the socket file's permissions); allow_other_users; live (True: consumers drop
    frames made before they started, as with a camera; False: every frame is kept, e.g. a file
    or a simulation); instance_id (0: a random one).

    Threads: any thread may call any method, also concurrently (several threads may hold frames
    at once); interrupt() also from a (Python) signal handler. close() waits for calls in
    progress on other threads, after ending their waits (they raise Interrupted).

    A writer and its frames belong to the process that opened it. In a child made by fork(),
    its calls raise InvalidArgumentError, and closing it or dropping its frames there (also at
    the child's exit) leaves the parent's writer serving and its frames lent.
    """

    def __init__(self, socket_path=None, *, format="BGRx", width=1920, height=1080,
                 memory="cuda", cuda_device=-1, pool_size=6, backpressure="drop",
                 max_in_flight=4, release_timeout_ms=2000, framerate=(0, 1), socket_mode=0o600,
                 allow_other_users=False, live=True, instance_id=0):
        self._handle = None
        self._final_stats = None
        # C calls in progress on _handle, by token: the calling thread. close() waits for those
        # of other threads before it frees the writer. Plain dict operations, which a signal
        # cannot cut in two (see _call).
        self._calls = {}
        self._close_lock = threading.Lock()
        # Slots whose handle died holding them (Ctrl-C in its __del__): abandoned by acquire()
        # and close().
        self._orphans = Orphans(_capi.lib().cudaipc_slot_abandon)
        # Timeouts of the slices a blocking call waits in, which the library counted but which
        # were no acquire() timing out: taken off stats["acquire_timeouts"].
        self._slice_timeouts = 0
        self._ended = False
        if memory not in _MEMORY_OPTIONS:
            raise ValueError(f"memory must be one of {', '.join(_MEMORY_OPTIONS)}, not {memory!r}")
        if backpressure not in _BACKPRESSURE_OPTIONS:
            raise ValueError(f"backpressure must be one of {', '.join(_BACKPRESSURE_OPTIONS)}, "
                             f"not {backpressure!r}")
        try:
            framerate_num, framerate_den = framerate
        except (TypeError, ValueError):
            raise ValueError(f"framerate is a (numerator, denominator) pair, not "
                             f"{framerate!r}") from None
        for name, value in (("width", width), ("height", height), ("pool_size", pool_size),
                            ("max_in_flight", max_in_flight),
                            ("release_timeout_ms", release_timeout_ms),
                            ("socket_mode", socket_mode), ("framerate numerator", framerate_num),
                            ("framerate denominator", framerate_den)):
            if not 0 <= int(value) < 1 << 32:
                raise ValueError(f"{name} must be between 0 and 2**32-1, not {value!r}")
        if not 0 <= int(instance_id) < 1 << 64:
            raise ValueError(f"instance_id must be between 0 and 2**64-1, not {instance_id!r}")
        encoded_format = _encode_format(format)
        encoded_path = None if socket_path is None else os.fsencode(socket_path)
        if encoded_path is not None and b"\0" in encoded_path:
            raise ValueError(f"socket_path contains a NUL byte: {socket_path!r}")
        self.socket_path = None if socket_path is None else os.fsdecode(socket_path)
        self._format, self._width, self._height = format, int(width), int(height)
        self._memory = memory
        self._backpressure = backpressure
        self._pool_size = int(pool_size)
        lib = _capi.lib()
        missing = _capi.writer_unavailable()
        if missing:
            raise _capi.UnsupportedError(_capi.ERROR_UNSUPPORTED, missing)
        options = _capi.spare_struct(_capi.WriterOptions)
        lib.cudaipc_writer_options_init(options)
        options.socket_path = encoded_path
        options.format = encoded_format
        options.width = int(width)
        options.height = int(height)
        options.framerate_num = int(framerate_num)
        options.framerate_den = int(framerate_den)
        options.memory = _MEMORY_OPTIONS[memory]
        options.cuda_device = int(cuda_device)
        options.pool_size = int(pool_size)
        options.backpressure = _BACKPRESSURE_OPTIONS[backpressure]
        options.max_in_flight = int(max_in_flight)
        options.release_timeout_ms = int(release_timeout_ms)
        options.socket_mode = int(socket_mode)
        options.allow_other_users = 1 if allow_other_users else 0
        options.instance_id = int(instance_id)
        options.live = 1 if live else 0
        handle = ctypes.c_void_p()
        try:
            status = lib.cudaipc_writer_open(options, ctypes.byref(handle))
            if status != _capi.OK:
                raise _capi.error_for(status, _capi.last_error())
            self._handle = handle.value
        except BaseException:
            # Ctrl-C right after a successful open: nobody else would close it.
            if handle.value and self._handle is None:
                lib.cudaipc_writer_close(handle.value)
            raise

    # -- C calls -----------------------------------------------------------------------------

    def _call(self, function, *args):
        """function(handle, *args), registered as a call in progress for close()."""
        token = object()
        thread = threading.get_ident()
        try:
            # One store, then the handle: close() either sees this call, or it cleared the
            # handle before it and this sees None. A signal's KeyboardInterrupt lands only at
            # calls: after the store (the finally removes it) or after the C call.
            self._calls[token] = thread
            handle = self._handle
            if handle is None:  # close() on another thread (or a signal handler)
                raise _capi.Interrupted(_capi.INTERRUPTED, "the writer was closed")
            return function(handle, *args)
        finally:
            self._calls.pop(token, None)

    def _check_open(self):
        if self._handle is None:
            raise ValueError("the writer is closed")

    # -- writing -----------------------------------------------------------------------------

    def acquire(self, timeout_ms=-1):
        """A free slot to write the next frame into, as a WriterFrame; None if none came within
        timeout_ms (< 0: wait as long as it takes).

        It waits while consumers hold every slot, and with backpressure="block" until every
        consumer has room for one more frame. Raises EndOfStream after end_stream(),
        Interrupted after interrupt() or close(), and another Error when the writer failed.
        Ctrl-C ends the wait (the slices it waits in are short); a slot acquired as it lands is
        abandoned, never lost. Use `with writer.acquire() as frame:` - leaving the block
        unpublished (an exception, Ctrl-C) abandons the slot.
        """
        self._check_open()
        deadline = _deadline(timeout_ms)
        # The library writes the slot into its owner: an exception anywhere from the C call's
        # return on (Ctrl-C's KeyboardInterrupt) cannot leave a slot nobody gives back.
        self._orphans.sweep()
        slot = _SlotHandle()
        self._orphans.track(slot)
        acquire = _capi.lib().cudaipc_writer_acquire
        try:
            while True:
                status = self._call(acquire, _slice_ms(deadline), ctypes.byref(slot.pointer))
                if status == _capi.OK:
                    return WriterFrame(slot)
                if status != _capi.TIMEOUT:
                    raise _capi.error_for(status, _capi.last_error())
                if _expired(deadline):
                    return None
                self._slice_timeouts += 1
        except BaseException:
            # A slot that never reached the caller goes back now, not when the traceback (which
            # a REPL keeps) lets its handle go.
            slot.abandon()
            raise

    def publish(self, source, stream=None, pts_ns=None, duration_ns=None, timeout_ms=-1):
        """Copies `source` into a free slot and publishes it (cudaipc_writer_publish_copy: one
        copy, counted in stats["copies"]; acquire() and WriterFrame.publish() copy nothing).
        True once published; False if no slot came within timeout_ms (< 0: as long as it
        takes; nothing is sent then). Raises as acquire() does.

        `source`: an array-like - with __cuda_array_interface__ (a torch CUDA tensor, a CuPy
        array; CUDA writers only) or __array_interface__ (a NumPy array), or anything NumPy makes
        an array of (bytes, a torch CPU tensor). Either
        - packed formats (BGRx, RGB, GRAY8, ...): the picture as an (height, width, channels)
          array ((height, width) for GRAY8 and GRAY16_LE) of the format's element type (uint8;
          GRAY16_LE: little-endian uint16), the pixels of a row contiguous; rows may be longer
          (a row stride larger than the visible bytes, e.g. a crop); or
        - any format: the frame's bytes in the slot's own layout (GStreamer's default: rows
          padded to 4 bytes, planar chroma after luma, as WriterFrame.planes show it), C-
          contiguous, at least frame_size bytes. This is how planar formats (NV12, I420) are
          published.
        Anything else raises ValueError saying what was expected, before a slot is taken.

        CUDA writers copy on `stream` (a torch/CuPy stream or an int cudaStream_t; None: the
        stream the source's __cuda_array_interface__ names, else the legacy default stream),
        after the work queued on it so far, and publish once the copy is done; the CPU does not
        wait. A host source in page-locked memory (torch's pin_memory()) is copied
        asynchronously: keep it unchanged until that stream has passed the copy. Host writers
        copy with memcpy before this returns and cannot read GPU sources.
        """
        self._check_open()
        pointer, src_stride, source_stream, keep = self._source(source)
        cuda_stream = None
        if self._memory == "cuda":
            cuda_stream = stream_handle(stream)
            if cuda_stream is None:
                cuda_stream = source_stream
            cuda_stream = cuda_stream or None  # 0: NULL, the legacy default stream
        else:
            stream_handle(stream)
        pts = _timestamp("pts_ns", pts_ns)
        duration = _timestamp("duration_ns", duration_ns)
        deadline = _deadline(timeout_ms)
        publish_copy = _capi.lib().cudaipc_writer_publish_copy
        try:
            while True:
                status = self._call(publish_copy, pointer, src_stride, cuda_stream, pts, duration,
                                    _slice_ms(deadline))
                if status == _capi.OK:
                    return True
                if status != _capi.TIMEOUT:
                    raise _capi.error_for(status, _capi.last_error())
                if _expired(deadline):
                    return False
                self._slice_timeouts += 1
        finally:
            del keep  # the source's memory was needed until here

    def _source(self, source):
        """(pointer, src_stride, the source's CUDA stream or None, what keeps it alive) of a
        publish() source, after checking it against the format (ValueError)."""
        interface, on_gpu, keep = _source_interface(source, self._memory)
        if interface.get("mask") is not None:
            raise ValueError("cannot publish a masked array")
        shape = tuple(int(extent) for extent in interface["shape"])
        typestr = interface["typestr"]
        itemsize = int(typestr[2:])
        strides = interface.get("strides")
        strides = (_contiguous_strides(shape, itemsize) if strides is None
                   else tuple(int(stride) for stride in strides))
        pointer = interface["data"][0]
        source_stream = interface.get("stream") if on_gpu else None
        fmt, width, height = self._format, self._width, self._height
        layout = slot_layout(fmt, width, height)
        packed = _formats.PACKED_FORMATS.get(fmt)
        picture = None
        if packed is not None:
            plane = packed[0]
            picture = (height, width) if plane.values == 1 else (height, width, plane.values)
        if picture is not None and len(shape) >= 2:
            # The picture as an array: its row stride is the source's.
            accepted = {picture, (height, width, 1)} if plane.values == 1 else {picture}
            pixel_bytes = plane.values * itemsize
            row_bytes = width * pixel_bytes
            if shape not in accepted or not _same_type(typestr, plane.typestr):
                raise ValueError(f"a {width}x{height} {fmt} frame is published from a "
                                 f"{picture} array of {_type_name(plane.typestr)} (or from "
                                 f"{_bytes_in_layout(layout)}), not from a {shape} array of "
                                 f"{_type_name(typestr)}")
            inner = strides[1:]
            wanted_inner = _contiguous_strides(shape, itemsize)[1:]
            row_stride = strides[0] if height > 1 else row_bytes
            if not _is_c_contiguous(shape[1:], inner, itemsize) or row_stride < row_bytes:
                raise ValueError(f"the rows of a {fmt} source must hold their pixels "
                                 f"contiguously (strides (S, {', '.join(map(str, wanted_inner))}) "
                                 f"with a row stride S of at least {row_bytes} bytes), not "
                                 f"strides {strides}")
            return pointer, row_stride, source_stream, keep
        if layout is None:
            raise ValueError(f"cudaipc (Python) does not know how the library lays out a {fmt} "
                             f"frame, so it cannot check a source's size: publish it through "
                             f"acquire() and the frame's planes")
        nbytes = itemsize
        for extent in shape:
            nbytes *= extent
        if picture is not None:
            expected = (f"a {width}x{height} {fmt} frame is published from a {picture} array of "
                        f"{_type_name(packed[0].typestr)}, or from {_bytes_in_layout(layout)}")
        else:
            expected = (f"a {width}x{height} {fmt} frame is published from "
                        f"{_bytes_in_layout(layout)}")
        if not _is_c_contiguous(shape, strides, itemsize):
            raise ValueError(f"{expected}; this source's bytes are not contiguous (shape {shape}, "
                             f"strides {strides})")
        if nbytes < layout.size:
            raise ValueError(f"{expected}; this source has {nbytes} bytes (shape {shape}, "
                             f"{_type_name(typestr)})")
        return pointer, 0, source_stream, keep

    # -- the stream --------------------------------------------------------------------------

    def set_format(self, format, width, height):
        """A new format or size from the next acquire() on: a new generation of slots, announced
        to consumers before its first frame. Frames acquired before are not sent (their publish()
        raises InvalidArgumentError); frames consumers hold stay valid."""
        self._check_open()
        encoded = _encode_format(format)
        for name, value in (("width", width), ("height", height)):
            if not 0 <= int(value) < 1 << 32:
                raise ValueError(f"{name} must be between 0 and 2**32-1, not {value!r}")
        status = self._call(_capi.lib().cudaipc_writer_set_format, encoded, int(width),
                            int(height))
        if status != _capi.OK:
            raise _capi.error_for(status, _capi.last_error())
        self._format, self._width, self._height = format, int(width), int(height)

    def end_stream(self):
        """Ends the stream: consumers see the end (a Reader's next() raises EndOfStream once it
        read the frames before it); acquire() and publish() raise EndOfStream from then on."""
        self._check_open()
        _capi.check(self._call(_capi.lib().cudaipc_writer_end_stream))
        self._ended = True

    def wait_for_consumer(self, timeout_ms=-1):
        """Waits until at least one consumer is attached: True, or False after timeout_ms (< 0:
        as long as it takes). Raises Interrupted after interrupt() or close(), EndOfStream after
        end_stream(). Ctrl-C ends the wait."""
        self._check_open()
        deadline = _deadline(timeout_ms)
        wait = _capi.lib().cudaipc_writer_wait_for_consumer
        while True:
            if self._ended:  # the library would say no at once, again and again
                raise _capi.EndOfStream(_capi.END, "the stream was ended (end_stream())")
            status = self._call(wait, _slice_ms(deadline))
            if status == _capi.OK:
                return True
            if status != _capi.TIMEOUT:
                raise _capi.error_for(status, _capi.last_error())
            if _expired(deadline):
                return False

    def interrupt(self):
        """Makes an acquire(), publish() or wait_for_consumer() in progress on another thread
        (or the next one) raise Interrupted. Any thread; also from a signal handler."""
        if self._handle is None:
            return
        try:
            self._call(_capi.lib().cudaipc_writer_interrupt)
        except _capi.Interrupted:
            pass  # closed meanwhile: nothing to interrupt

    # -- state -------------------------------------------------------------------------------

    @property
    def stats(self):
        """The writer's counters as a dict: frames_published, frames_sent (summed over
        consumers), frames_dropped (deliveries consumers missed for want of room), frames_abandoned,
        acquire_timeouts (acquire() and publish() calls that timed out), copies (one per
        publish()), consumers, consumers_total, consumers_evicted (disconnected at
        release_timeout_ms), slots_allocated, slots_retired, generations, cuda_mps (True: CUDA
        memory, and this process runs as an MPS client). After close(): as they were when
        closed."""
        if self._handle is None:
            if self._final_stats is None:
                raise ValueError("the writer is closed")
            return dict(self._final_stats)
        return self._call(self._read_stats)

    def _read_stats(self, handle):
        stats = _capi.spare_struct(_capi.WriterStats)
        _capi.check(_capi.lib().cudaipc_writer_get_stats(handle, stats))
        out = {name: getattr(stats, name) for name, _ in _capi.WriterStats._fields_
               if not name.startswith("reserved")}
        out["acquire_timeouts"] = max(0, out["acquire_timeouts"] - self._slice_timeouts)
        out["cuda_mps"] = bool(out["cuda_mps"])
        return out

    @property
    def format(self):
        """The format of the frames acquire() lends now (GStreamer's name)."""
        return self._format

    @property
    def width(self):
        return self._width

    @property
    def height(self):
        return self._height

    @property
    def frame_size(self):
        """Bytes of one frame in the slot's layout: what publish() wants at least from a source
        in that layout. None for a format cudaipc (Python) does not know the layout of."""
        layout = slot_layout(self._format, self._width, self._height)
        return layout.size if layout else None

    @property
    def memory(self):
        """"cuda" or "host"."""
        return self._memory

    @property
    def backpressure(self):
        return self._backpressure

    @property
    def pool_size(self):
        return self._pool_size

    @property
    def closed(self):
        return self._handle is None

    def close(self):
        """Says goodbye to the consumers and frees the writer; frames they hold stay valid, and
        so do frames still lent (they can only be abandoned: their publish() raises EndOfStream).
        Idempotent. Calls in progress on other threads are ended (Interrupted) and waited for."""
        self._orphans.sweep()  # slots lost in a handle's interrupted __del__ go back first
        with self._close_lock:
            handle, self._handle = self._handle, None
        if handle is None:
            return
        lib = _capi.lib()
        me = threading.get_ident()
        # One interrupt ends one wait: again until no other thread is inside a call. (Calls of
        # this thread, under a signal handler that closes, are not inside C.)
        while any(thread != me for thread in list(self._calls.values())):
            lib.cudaipc_writer_interrupt(handle)
            time.sleep(0.001)
        try:
            self._final_stats = self._read_stats(handle)
        except _capi.Error:
            pass  # a fork() child's copy: the library says nothing about the parent's writer
        finally:
            lib.cudaipc_writer_close(handle)

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
        return (f"<cudaipc.Writer {self.socket_path or '(default socket)'} {self._format} "
                f"{self._width}x{self._height} {self._memory} {state}>")


def _encode_format(format_name):
    if not isinstance(format_name, str) or not format_name.isascii() or "\0" in format_name:
        raise ValueError(f"format is a GStreamer video format name such as 'BGRx' or 'NV12', "
                         f"not {format_name!r}")
    return format_name.encode("ascii")


def _bytes_in_layout(layout):
    if layout is None:
        return "its bytes in the slot's layout"
    return (f"{layout.size} contiguous bytes in the slot's layout (rows of "
            f"{', '.join(map(str, layout.plane_stride))} bytes at offsets "
            f"{', '.join(map(str, layout.plane_offset))}, as WriterFrame.planes show it)")
