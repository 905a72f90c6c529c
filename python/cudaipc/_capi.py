# SPDX-License-Identifier: LGPL-2.1-or-later
"""libcudaipc through ctypes: finding the library, its structs, its prototypes and its errors.

Everything here mirrors libcudaipc/include/cudaipc/cudaipc.h; the rest of the package uses only this module to
reach C.
"""

import ctypes
import ctypes.util
import os
import threading

MAX_PLANES = 4
NO_TIMESTAMP = (1 << 64) - 1  # CUDAIPC_NO_TIMESTAMP
NO_OFFSET = (1 << 64) - 1  # cudaipc_frame_info.offset when upstream gave none

# cudaipc_status
OK = 0
TIMEOUT = 1
END = 2
INTERRUPTED = 3
ERROR_INVALID_ARGUMENT = -1
ERROR_NO_PRODUCER = -2
ERROR_REFUSED = -3
ERROR_PROTOCOL = -4
ERROR_CUDA = -5
ERROR_SYSTEM = -6
ERROR_UNSUPPORTED = -7
ERROR_DISCONNECTED = -8
ERROR_BUSY = -9  # since 0.2: writer open, another producer serves the socket path

# What cudaipc_status_name() says, for errors raised before the library is loaded.
STATUS_NAMES = {
    OK: "ok",
    TIMEOUT: "timeout",
    END: "end of stream",
    INTERRUPTED: "interrupted",
    ERROR_INVALID_ARGUMENT: "invalid argument",
    ERROR_NO_PRODUCER: "no producer",
    ERROR_REFUSED: "refused",
    ERROR_PROTOCOL: "protocol error",
    ERROR_CUDA: "CUDA error",
    ERROR_SYSTEM: "system error",
    ERROR_UNSUPPORTED: "unsupported",
    ERROR_DISCONNECTED: "disconnected",
    ERROR_BUSY: "busy",
}

# cudaipc_memory
MEMORY_ANY = 0
MEMORY_HOST = 1
MEMORY_CUDA = 2

# cudaipc_backpressure (writers, since 0.2)
BACKPRESSURE_DROP = 0
BACKPRESSURE_BLOCK = 1

# cudaipc_frame_info.flags
FRAME_DISCONT = 1
FRAME_DELTA_UNIT = 2
FRAME_GAP = 4
FRAME_LIVE = 8

# cudaStream_t values with a meaning of their own (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD).
STREAM_LEGACY = 1
STREAM_PER_THREAD = 2


class ReaderOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("socket_path", ctypes.c_char_p),
        ("memory", ctypes.c_int),
        ("cuda_device", ctypes.c_int),
        ("max_in_flight", ctypes.c_uint32),
        ("connect_timeout_ms", ctypes.c_uint32),
        ("reconnect", ctypes.c_int),
        ("reconnect_interval_ms", ctypes.c_uint32),
        ("allow_other_users", ctypes.c_int),
    ]


class FrameInfo(ctypes.Structure):
    _fields_ = [
        ("memory", ctypes.c_int),
        ("device", ctypes.c_int),
        ("data", ctypes.c_uint64),
        ("size", ctypes.c_uint64),
        ("width", ctypes.c_uint32),
        ("height", ctypes.c_uint32),
        ("format", ctypes.c_char * 16),
        ("n_planes", ctypes.c_uint32),
        ("plane_offset", ctypes.c_uint64 * MAX_PLANES),
        ("plane_stride", ctypes.c_int32 * MAX_PLANES),
        ("pts_ns", ctypes.c_uint64),
        ("duration_ns", ctypes.c_uint64),
        ("sequence", ctypes.c_uint64),
        ("offset", ctypes.c_uint64),
        ("send_time_ns", ctypes.c_uint64),
        ("flags", ctypes.c_uint32),
        ("reserved0", ctypes.c_uint32),
        ("reserved", ctypes.c_uint64 * 8),
    ]


class ReaderStats(ctypes.Structure):
    _fields_ = [
        ("frames_received", ctypes.c_uint64),
        ("frames_released", ctypes.c_uint64),
        ("frames_held", ctypes.c_uint64),
        ("slots_imported", ctypes.c_uint64),
        ("slots_retired", ctypes.c_uint64),
        ("connects", ctypes.c_uint64),
        ("max_in_flight", ctypes.c_uint32),
        ("cuda_mps", ctypes.c_uint32),
        ("reserved", ctypes.c_uint64 * 8),
    ]


class WriterOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("socket_path", ctypes.c_char_p),
        ("format", ctypes.c_char_p),
        ("width", ctypes.c_uint32),
        ("height", ctypes.c_uint32),
        ("framerate_num", ctypes.c_uint32),
        ("framerate_den", ctypes.c_uint32),
        ("memory", ctypes.c_int),
        ("cuda_device", ctypes.c_int),
        ("pool_size", ctypes.c_uint32),
        ("backpressure", ctypes.c_int),
        ("max_in_flight", ctypes.c_uint32),
        ("release_timeout_ms", ctypes.c_uint32),
        ("socket_mode", ctypes.c_uint32),
        ("allow_other_users", ctypes.c_int),
        ("instance_id", ctypes.c_uint64),
        ("live", ctypes.c_int),
    ]


class SlotInfo(ctypes.Structure):
    _fields_ = [
        ("memory", ctypes.c_int),
        ("device", ctypes.c_int),
        ("data", ctypes.c_uint64),
        ("size", ctypes.c_uint64),
        ("capacity", ctypes.c_uint64),
        ("width", ctypes.c_uint32),
        ("height", ctypes.c_uint32),
        ("format", ctypes.c_char * 16),
        ("n_planes", ctypes.c_uint32),
        ("plane_offset", ctypes.c_uint64 * MAX_PLANES),
        ("plane_stride", ctypes.c_int32 * MAX_PLANES),
        ("generation", ctypes.c_uint64),
        ("index", ctypes.c_uint32),
        ("reserved0", ctypes.c_uint32),
        ("reserved", ctypes.c_uint64 * 8),
    ]


class WriterStats(ctypes.Structure):
    _fields_ = [
        ("frames_published", ctypes.c_uint64),
        ("frames_sent", ctypes.c_uint64),
        ("frames_dropped", ctypes.c_uint64),
        ("frames_abandoned", ctypes.c_uint64),
        ("acquire_timeouts", ctypes.c_uint64),
        ("copies", ctypes.c_uint64),
        ("consumers", ctypes.c_uint64),
        ("consumers_total", ctypes.c_uint64),
        ("consumers_evicted", ctypes.c_uint64),
        ("slots_allocated", ctypes.c_uint64),
        ("slots_retired", ctypes.c_uint64),
        ("generations", ctypes.c_uint64),
        ("cuda_mps", ctypes.c_uint32),
        ("reserved0", ctypes.c_uint32),
        ("reserved", ctypes.c_uint64 * 8),
    ]


# The library writes whole structs of its own size: a newer libcudaipc may have grown them. Each
# is filled in a buffer with room to spare and read through our (older or equal) layout.
_SPARE_BYTES = 512


def spare_struct(struct_type):
    """A zeroed `struct_type` in a buffer large enough for a grown version of it."""
    buffer = ctypes.create_string_buffer(max(_SPARE_BYTES, ctypes.sizeof(struct_type)))
    return struct_type.from_buffer(buffer)  # keeps `buffer` alive


# ---------------------------------------------------------------------------------------------
# Errors


class Error(Exception):
    """A libcudaipc call failed: `status` (a cudaipc_status), `status_name`, and the library's
    sentence saying why (`message`, also str(error))."""

    def __init__(self, status, message):
        super().__init__(status, message)  # args: what pickling needs to rebuild it
        self.status = status
        self.status_name = status_name(status)
        self.message = message

    def __str__(self):
        return self.message

    def __repr__(self):
        return f"{type(self).__name__}({self.status_name!r}, {self.message!r})"


class EndOfStream(Error):
    """The stream ended: the producer sent end-of-stream, or stopped (without reconnect).
    Writers: end_stream() was called (acquire() and publish() raise it from then on), or a frame
    lent before close() was published."""


class DisconnectedError(Error):
    """The stream was cut, not ended (without reconnect): the producer disconnected this reader
    (a frame held past its release-timeout, or its ERROR) or vanished without ending the stream
    (a crash, a kill). `reason` (also `message`) says which. Iterating over a reader raises it,
    unlike EndOfStream."""

    @property
    def reason(self):
        return self.message


class Interrupted(Error):
    """Reader.interrupt() (or close() from another thread) ended a next() in progress; for a
    Writer, interrupt() or close() ended an acquire(), publish() or wait_for_consumer()."""


class InvalidArgumentError(Error, ValueError):
    """An option or argument the library refused."""


class NoProducerError(Error):
    """Nobody served the socket within connect_timeout_ms."""


class RefusedError(Error):
    """The producer and this reader refused each other: user, protocol version, memory, GPU."""


class ProtocolError(Error):
    """The producer broke the protocol."""


class CudaError(Error):
    """A CUDA call failed."""


class SystemCallError(Error):
    """A system call failed or a limit was reached; also: libcudaipc could not be loaded."""


class UnsupportedError(Error):
    """Not possible with this library or this stream, e.g. CUDA memory in a build without CUDA,
    or a video format the library cannot describe."""


class BusyError(Error):
    """Writer: another producer (a Writer, or cudasink-ipc) already serves the socket path; the
    message names it."""


_ERROR_TYPES = {
    END: EndOfStream,
    INTERRUPTED: Interrupted,
    ERROR_INVALID_ARGUMENT: InvalidArgumentError,
    ERROR_NO_PRODUCER: NoProducerError,
    ERROR_REFUSED: RefusedError,
    ERROR_PROTOCOL: ProtocolError,
    ERROR_CUDA: CudaError,
    ERROR_SYSTEM: SystemCallError,
    ERROR_UNSUPPORTED: UnsupportedError,
    ERROR_DISCONNECTED: DisconnectedError,
    ERROR_BUSY: BusyError,
}


class LibraryNotFoundError(SystemCallError):
    """libcudaipc.so.0 could not be loaded (see CUDAIPC_LIBRARY)."""


def error_for(status, message):
    return _ERROR_TYPES.get(status, Error)(status, message)


def status_name(status):
    if _lib is not None:
        return _lib.cudaipc_status_name(status).decode("utf-8", "replace")
    return STATUS_NAMES.get(status, "unknown status")


# ---------------------------------------------------------------------------------------------
# The library

_lib = None
_lib_lock = threading.Lock()
_writer_missing = []  # writer functions the loaded library lacks (a libcudaipc 0.1)


def _declare(lib):
    """Declares the prototypes; returns the names of the writer functions the library lacks."""
    c_int, c_void_p, c_char_p = ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p
    handle_out = ctypes.POINTER(c_void_p)
    prototypes = {
        "cudaipc_version": (c_char_p, []),
        "cudaipc_status_name": (c_char_p, [c_int]),
        "cudaipc_last_error": (c_char_p, []),
        "cudaipc_reader_options_init": (None, [ctypes.POINTER(ReaderOptions)]),
        "cudaipc_reader_open": (c_int, [ctypes.POINTER(ReaderOptions), handle_out]),
        "cudaipc_reader_next": (c_int, [c_void_p, c_int, handle_out]),
        "cudaipc_reader_interrupt": (c_int, [c_void_p]),
        "cudaipc_reader_get_stats": (c_int, [c_void_p, ctypes.POINTER(ReaderStats)]),
        "cudaipc_reader_close": (None, [c_void_p]),
        "cudaipc_frame_get_info": (c_int, [c_void_p, ctypes.POINTER(FrameInfo)]),
        "cudaipc_frame_wait_ready": (c_int, [c_void_p, c_void_p]),
        "cudaipc_frame_release": (c_int, [c_void_p, c_void_p]),
    }
    for name, (restype, argtypes) in prototypes.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
    # Publishing (since 0.2): declared where the library has it, so that readers keep working
    # with a libcudaipc 0.1; Writer says what is missing (writer_unavailable()).
    writer_prototypes = {
        "cudaipc_writer_options_init": (None, [ctypes.POINTER(WriterOptions)]),
        "cudaipc_writer_open": (c_int, [ctypes.POINTER(WriterOptions), handle_out]),
        "cudaipc_writer_acquire": (c_int, [c_void_p, c_int, handle_out]),
        "cudaipc_slot_get_info": (c_int, [c_void_p, ctypes.POINTER(SlotInfo)]),
        "cudaipc_slot_publish": (c_int, [c_void_p, c_void_p, ctypes.c_uint64, ctypes.c_uint64]),
        "cudaipc_slot_abandon": (None, [c_void_p]),
        "cudaipc_writer_publish_copy": (c_int, [c_void_p, c_void_p, ctypes.c_size_t, c_void_p,
                                                ctypes.c_uint64, ctypes.c_uint64, c_int]),
        "cudaipc_writer_set_format": (c_int, [c_void_p, c_char_p, ctypes.c_uint32,
                                              ctypes.c_uint32]),
        "cudaipc_writer_end_stream": (c_int, [c_void_p]),
        "cudaipc_writer_wait_for_consumer": (c_int, [c_void_p, c_int]),
        "cudaipc_writer_interrupt": (c_int, [c_void_p]),
        "cudaipc_writer_get_stats": (c_int, [c_void_p, ctypes.POINTER(WriterStats)]),
        "cudaipc_writer_close": (None, [c_void_p]),
    }
    missing = []
    for name, (restype, argtypes) in writer_prototypes.items():
        try:
            function = getattr(lib, name)
        except AttributeError:
            missing.append(name)
            continue
        function.restype = restype
        function.argtypes = argtypes
    return missing


def _load():
    configured = os.environ.get("CUDAIPC_LIBRARY")
    if configured:
        candidates = [configured]
    else:
        candidates = [name for name in (ctypes.util.find_library("cudaipc"), "libcudaipc.so.0")
                      if name]
    failures = []
    for candidate in dict.fromkeys(candidates):  # in order, without repeats
        try:
            lib = ctypes.CDLL(candidate)  # CDLL: every call releases the GIL
            return lib, _declare(lib)
        except (OSError, AttributeError) as e:
            failures.append(f"{candidate}: {e}")
    if configured:
        message = f"cannot load libcudaipc from CUDAIPC_LIBRARY ({failures[0]})"
    else:
        message = ("cannot find libcudaipc (" + "; ".join(failures) + "): install the package "
                   "that provides libcudaipc.so.0, or set CUDAIPC_LIBRARY to its path (a build "
                   "has it in BUILD/libcudaipc/)")
    raise LibraryNotFoundError(ERROR_SYSTEM, message)


def lib():
    """The loaded library (loaded on first use, so that `import cudaipc` never fails)."""
    global _lib, _writer_missing
    if _lib is None:
        with _lib_lock:
            if _lib is None:
                loaded, _writer_missing = _load()
                _lib = loaded
    return _lib


def last_error():
    """The library's sentence for the last failure on this thread."""
    text = lib().cudaipc_last_error()
    return text.decode("utf-8", "replace") if text else ""


def writer_unavailable():
    """None if the library can publish (libcudaipc 0.2 or later), else a sentence saying why
    not."""
    loaded = lib()
    if not _writer_missing:
        return None
    return (f"this libcudaipc ({loaded.cudaipc_version().decode('ascii', 'replace')}, "
            f"{loaded._name}) cannot publish: it has no {_writer_missing[0]}() (writers need "
            f"libcudaipc 0.2 or later)")


def check(status):
    """Raises the Error for a failed status, with the library's sentence; returns the status."""
    if status < 0:
        raise error_for(status, last_error())
    return status
