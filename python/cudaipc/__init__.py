# SPDX-License-Identifier: LGPL-2.1-or-later
"""Read a live cudasink-ipc stream from Python, in place: no GStreamer, no copies - or serve one.

    import cudaipc, torch

    with cudaipc.Reader("/tmp/cam0.sock") as reader:
        for frame in reader:                       # until the producer ends the stream
            image = torch.from_dlpack(frame)       # (H, W, 4) uint8 on the producer's GPU
            print(frame.sequence, image.float().mean().item())
            del frame, image                       # the last reference releases the frame

Pure Python over libcudaipc (ctypes): the library is found through $CUDAIPC_LIBRARY (a path),
else the system's libcudaipc.so.0. A frame is the producer's own memory - CUDA device memory or
shared host memory - described by cudaipc.Frame: width, height, format (GStreamer's name: "BGRA",
"NV12", ...), pts_ns, duration_ns, sequence, offset, send_time_ns (CLOCK_MONOTONIC, like
time.clock_gettime_ns(time.CLOCK_MONOTONIC)), flags (FRAME_*), memory ("cuda" or "host"),
device, data_ptr, size and planes.

Arrays, in place (nothing is copied by any of these):

- packed formats (BGRA, BGRx, RGBA, RGBx, ARGB, ABGR, xRGB, xBGR, AYUV: (H, W, 4) uint8;
  RGB, BGR: (H, W, 3); GRAY8: (H, W) uint8; GRAY16_LE: (H, W) '<u2'): the frame itself is the
  array. Planar formats (NV12, I420, P010_10LE, ...): frame.planes[i] are the arrays, e.g. NV12's
  luma (H, W) and chroma (H/2, W/2, 2); using the frame itself raises TypeError. Arrays cover the
  visible pixels, with the producer's row stride.
- CUDA frames: torch.from_dlpack(frame), cupy.from_dlpack(frame) (DLPack), cupy.asarray(frame),
  numba.cuda.as_cuda_array(frame) (__cuda_array_interface__ v3). The consumer's stream waits for
  the producer's writes on the GPU; the CPU does not wait.
- Host frames: numpy.asarray(frame) (__array_interface__, read-only), numpy.from_dlpack(frame),
  torch.from_dlpack(frame).

What costs a copy: only what you ask for - e.g. tensor.cpu() or cupy's .get() of a CUDA frame,
numpy.array(frame) (a copy by default, unlike numpy.asarray), tensor.clone(), or computing a new
tensor from the frame. Keep a copy, not the frame, to hold a picture for long.

Lifetimes. A frame holds the producer's slot: until it is released the producer does not write
into it, and the frame counts against the reader's max_in_flight (a reader holding that many
frames receives nothing more, and next() times out; a frame held longer than the producer's
release-timeout gets the reader disconnected: DisconnectedError). It is released by

- frame.release(stream=None) or leaving `with frame:`, explicitly. Arrays made from the frame
  must not be used after that (they would read whatever the producer writes next);
- dropping the last reference to the Frame and to everything made from it: planes, NumPy and
  CuPy arrays (they keep the Frame or plane they were made from), DLPack tensors (the DLPack
  deleter drops the Frame when torch/CuPy/NumPy free the tensor). This is always safe.

Releasing a CUDA frame is ordered after GPU work, without waiting on the CPU: release(stream)
gives the slot back once the work queued on `stream` so far is done. The default, and what
dropping the last reference does, is the legacy default stream (cudaStream_t 1), which covers
work on it and on every *blocking* stream: torch's and CuPy's default streams, cupy.cuda.Stream().
Work queued on a *non-blocking* stream - torch.cuda.Stream() (torch creates its side streams
non-blocking), cupy.cuda.Stream(non_blocking=True) - is not covered: name the stream with
frame.release(stream=s) before dropping the frame, or synchronize the stream before the last
array or tensor made from the frame goes.

Frames stay valid after the reader is closed and after the producer is gone, until released.
Frame memory is read-only: writing into it faults (CUDA) or is refused (host). NumPy marks its
arrays read-only; torch has no read-only tensors, so do not write into one made from a frame.

Threads: a Reader is used from one thread at a time; interrupt() and close() may be called from
any thread (interrupt() also from a signal handler), frame.release() too, and DLPack deleters
run on whatever thread frees the tensor.

Errors: cudaipc.Error (.status, .status_name, .message: the library's sentence), with one
subclass per status: NoProducerError, RefusedError, ProtocolError, CudaError, SystemCallError,
UnsupportedError, InvalidArgumentError (also a ValueError), BusyError (a Writer's socket path is
served already), EndOfStream and Interrupted (which iterating over a reader turns into the end of
the loop), and DisconnectedError (.reason): the stream was cut rather than ended - the producer
disconnected the reader (a frame held past its release-timeout, frames left unread while it
waited for them, its ERROR) or vanished without ending the stream; it ends a loop over the
reader by propagating. Frames that were still queued for a reader when it was disconnected are
not handed out: the first next() raises. After EndOfStream or DisconnectedError every next()
raises it again.

A pure-Python DLPack deleter cannot keep an exception being raised while a tensor is freed (see
cudaipc._dlpack): on such paths the caller sees a SystemError, the original is printed as
"Exception ignored", and the frame is still released.

Publishing (libcudaipc 0.2 or later). cudaipc.Writer serves a stream itself, as cudasink-ipc
does; consumers (cudasrc-ipc, cudaipc:// URIs, Readers) cannot tell the difference. Frames are
written straight into the slots consumers map - no copy on either side:

    with cudaipc.Writer("/tmp/cam0.sock", format="BGRx", width=1920, height=1080,
                        memory="cuda") as writer:
        stream = torch.cuda.Stream()
        for n in range(1000):
            with writer.acquire() as frame:            # a cudaipc.WriterFrame: a lent slot
                with torch.cuda.stream(stream):
                    image = torch.from_dlpack(frame)    # (1080, 1920, 4) uint8, writable, in place
                    image[...] = draw(n)
                frame.publish(stream=stream)           # once the GPU is done; no CPU wait
        writer.end_stream()

- Writer(socket_path, format=, width=, height=, memory="cuda"|"host", pool_size=6,
  backpressure="drop"|"block", max_in_flight=4, release_timeout_ms=2000, live=True, ...):
  acquire(timeout_ms=-1) lends a slot as a WriterFrame (None on timeout); publish(array) copies
  an array - a torch/CuPy CUDA tensor, a NumPy array - into a slot and publishes it (one copy,
  counted in stats["copies"]); set_format(), end_stream(), wait_for_consumer(), interrupt(),
  stats, close(). BusyError when another producer serves the path.
- WriterFrame: the writing side of a Frame - the same attributes (width, height, format, memory,
  device, data_ptr, size, planes) and array interfaces, writable (numpy.asarray(frame),
  torch.from_dlpack(frame), cupy.asarray(frame); planar formats: frame.planes[i]), plus
  generation and index. publish(stream=None, pts_ns=None, duration_ns=None) sends it once the
  work queued on `stream` is done; abandon() gives it back unsent. Leaving `with frame:`
  unpublished - an exception, Ctrl-C - abandons it, and so does dropping the last reference to
  it and to the arrays made from it: a slot is never lost. After publish or abandon the frame
  (and arrays made from it) must not be used: the slot is the consumers', then the next frame's.
- Blocking calls wait in short slices, so Ctrl-C ends them; a slot acquired as Ctrl-C lands is
  abandoned. acquire() and publish() raise EndOfStream after end_stream(), Interrupted after
  interrupt() or close(). See cudaipc.Writer for the threads rules.
"""

from ._capi import (  # noqa: F401 - the public names
    END,
    ERROR_CUDA,
    BACKPRESSURE_BLOCK,
    BACKPRESSURE_DROP,
    ERROR_BUSY,
    ERROR_DISCONNECTED,
    ERROR_INVALID_ARGUMENT,
    ERROR_NO_PRODUCER,
    ERROR_PROTOCOL,
    ERROR_REFUSED,
    ERROR_SYSTEM,
    ERROR_UNSUPPORTED,
    FRAME_DELTA_UNIT,
    FRAME_DISCONT,
    FRAME_GAP,
    FRAME_LIVE,
    INTERRUPTED,
    OK,
    STREAM_LEGACY,
    STREAM_PER_THREAD,
    TIMEOUT,
    BusyError,
    CudaError,
    DisconnectedError,
    EndOfStream,
    Error,
    Interrupted,
    InvalidArgumentError,
    LibraryNotFoundError,
    NoProducerError,
    ProtocolError,
    RefusedError,
    SystemCallError,
    UnsupportedError,
)
from ._reader import Frame, FrameInfo, Plane, Reader  # noqa: F401
from ._writer import SlotInfo, Writer, WriterFrame, WriterPlane  # noqa: F401
from . import _capi


def library_version():
    """libcudaipc's version string (loads the library)."""
    return _capi.lib().cudaipc_version().decode("ascii")


def status_name(status):
    """cudaipc_status_name(): e.g. "no producer" for ERROR_NO_PRODUCER."""
    return _capi.status_name(status)


# Public classes show as cudaipc.X (in tracebacks, repr), not by the private module they live in.
for _public in (Reader, Frame, FrameInfo, Plane, Writer, WriterFrame, WriterPlane, SlotInfo, Error,
                EndOfStream, DisconnectedError, Interrupted, InvalidArgumentError,
                NoProducerError, RefusedError, ProtocolError, CudaError, SystemCallError,
                UnsupportedError, BusyError, LibraryNotFoundError):
    _public.__module__ = __name__
del _public

__all__ = [
    "Reader", "Frame", "FrameInfo", "Plane", "library_version", "status_name",
    "Writer", "WriterFrame", "WriterPlane", "SlotInfo",
    "Error", "EndOfStream", "DisconnectedError", "Interrupted", "InvalidArgumentError",
    "NoProducerError", "RefusedError", "ProtocolError", "CudaError", "SystemCallError",
    "UnsupportedError", "BusyError",
    "LibraryNotFoundError",
    "OK", "TIMEOUT", "END", "INTERRUPTED", "ERROR_INVALID_ARGUMENT", "ERROR_NO_PRODUCER",
    "ERROR_REFUSED", "ERROR_PROTOCOL", "ERROR_CUDA", "ERROR_SYSTEM", "ERROR_UNSUPPORTED",
    "ERROR_DISCONNECTED", "ERROR_BUSY",
    "BACKPRESSURE_DROP", "BACKPRESSURE_BLOCK",
    "FRAME_DISCONT", "FRAME_DELTA_UNIT", "FRAME_GAP", "FRAME_LIVE",
    "STREAM_LEGACY", "STREAM_PER_THREAD",
]
