// SPDX-License-Identifier: LGPL-2.1-or-later
// V4L2 capture without GStreamer: a capture device (open, enumerate formats/sizes/rates, set
// the format, request, queue and dequeue buffers, stream on/off) whose failures come back as
// sentences a user understands. cudav4l2src is a thin GObject layer over this; the tests drive
// it directly. Every V4L2 ioctl of the project is issued in this folder.
//
// The device is opened through libv4l2 with v4l2_fd_open(fd, V4L2_DISABLE_CONVERSION): libv4l2's
// format-conversion layer refuses USERPTR buffers (VIDIOC_REQBUFS with memory != MMAP fails
// with EINVAL), and a Bayer capture wants no conversion anyway. With conversion disabled every
// ioctl passes straight to the driver, while libv4l2 plugins (e.g. libv4l-mplane, which lets
// multi-planar-only drivers be used through the single-planar API) still apply.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "formats.h"

namespace cipc_v4l2 {

// ---- Formats --------------------------------------------------------------------------------

// The Bayer formats cudav4l2src captures (8-, 10- and 12-bit in all four CFA orders), their
// fourccs and strides are bayer/formats.h's (cipc_bayer::bayer_formats(), ...).

// "RG10" for V4L2_PIX_FMT_SRGGB10; non-printable bytes become '?'; a big-endian variant (bit
// 31) gets "-BE".
std::string fourcc_to_string(uint32_t fourcc);

// A rate in frames per second, num/den, reduced. V4L2 speaks of frame intervals (seconds per
// frame); this is their inverse.
struct Fraction {
  uint32_t num = 0;
  uint32_t den = 1;
  bool operator==(const Fraction& o) const { return num == o.num && den == o.den; }
};
Fraction framerate_from_interval(uint32_t interval_num, uint32_t interval_den);
// Nanoseconds per frame at `rate`; 0 when the rate is zero or unknown.
uint64_t frame_duration_ns(Fraction rate);

// Frame rates a device reports for one format and size.
struct FrameRates {
  enum class Kind { kUnknown, kDiscrete, kRange } kind = Kind::kUnknown;
  std::vector<Fraction> discrete;  // fastest first
  Fraction min, max;               // kRange: slowest and fastest
};

// One size (discrete: min == max) or a size range.
struct FrameSize {
  bool discrete = true;
  uint32_t min_width = 0, max_width = 0, step_width = 1;
  uint32_t min_height = 0, max_height = 0, step_height = 1;
  FrameRates rates;  // for discrete sizes; ranges carry the rates of their smallest size
};

struct FormatDescription {
  uint32_t fourcc = 0;
  std::string description;
  std::vector<FrameSize> sizes;  // largest first for discrete sizes
};

// The format a device was set to (or reports).
struct Format {
  uint32_t fourcc = 0;
  uint32_t width = 0;
  uint32_t height = 0;
  uint32_t bytes_per_line = 0;
  uint32_t size_image = 0;
};

// ---- Errors ---------------------------------------------------------------------------------

enum class ErrorKind {
  kNone,
  kNotFound,      // no such device node
  kPermission,    // open refused
  kNotV4l2,       // not a device node, or not a V4L2 device
  kNotCapture,    // a V4L2 device, but not single-planar video capture with streaming
  kBusy,          // another application holds the device
  kUnsupported,   // format, size, rate or I/O method the device does not offer
  kNoMemory,      // the driver could not allocate buffers
  kDisconnected,  // the device went away (unplug) while in use
  kStreamError,   // the driver reported a capture error (EIO) but is still there
  kTimeout,       // no frame within the frame timeout
  kFailed,        // anything else
};

struct Error {
  ErrorKind kind = ErrorKind::kNone;
  int errnum = 0;       // errno of the failing call, 0 if none
  std::string message;  // one or two sentences for the user; names the device
  std::string detail;   // for the debug log: the ioctl and strerror
  explicit operator bool() const { return kind != ErrorKind::kNone; }
};

// ---- The device -----------------------------------------------------------------------------

enum class Memory { kMmap, kUserptr };
const char* memory_name(Memory memory);  // "mmap", "userptr"

// One dequeued frame.
struct Frame {
  uint32_t index = 0;
  uint32_t bytes_used = 0;
  uint32_t sequence = 0;
  uint32_t flags = 0;                // V4L2_BUF_FLAG_*
  uint64_t timestamp_ns = 0;         // as the driver stamped it
  bool monotonic_timestamp = false;  // timestamp_ns is CLOCK_MONOTONIC
  bool error_flag() const;           // V4L2_BUF_FLAG_ERROR: the data may be corrupt
};

// A driver buffer mapped into this process (MMAP I/O). Unmaps itself.
class Mapping {
 public:
  Mapping(void* data, size_t length) : data_(data), length_(length) {}
  ~Mapping();
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  void* data() const { return data_; }
  size_t length() const { return length_; }

 private:
  void* data_;
  size_t length_;
};

enum class WaitResult { kReady, kInterrupted, kTimeout, kError };

// A V4L2 video capture device. Methods are not thread-safe with respect to each other, except
// interrupt() / clear_interrupt(), which may be called from any thread, and queue_*(), which
// may run concurrently with wait_for_frame() and dequeue() (the kernel serialises them).
class Device {
 public:
  // Opens `path` and checks it is a V4L2 video capture device with streaming I/O. On failure
  // returns null and fills `error`.
  static std::unique_ptr<Device> open(const std::string& path, Error* error);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const std::string& path() const { return path_; }
  const std::string& card() const { return card_; }
  const std::string& driver() const { return driver_; }
  bool can_set_framerate() const { return can_set_framerate_; }

  // Every capture format the device offers with its sizes and rates (also those this element
  // cannot capture: the caller filters with cipc_bayer::bayer_format_from_fourcc()).
  bool enumerate_formats(std::vector<FormatDescription>* formats, Error* error) const;
  bool get_format(Format* format, Error* error) const;
  // Sets fourcc/width/height; fails with kUnsupported if the driver picks anything else.
  bool set_format(uint32_t fourcc, uint32_t width, uint32_t height, Format* actual, Error* error);
  // Asks for `rate` (VIDIOC_S_PARM); `actual` gets what the driver chose. Fails with
  // kUnsupported if the device cannot set rates.
  bool set_framerate(Fraction rate, Fraction* actual, Error* error);

  // VIDIOC_REQBUFS. `count` in: wanted, out: granted. A USERPTR refusal is kUnsupported.
  bool request_buffers(Memory memory, uint32_t* count, Error* error);
  // Frees the driver's buffers (REQBUFS 0); errors are logged in `error` only.
  bool release_buffers(Memory memory, Error* error);
  // Maps MMAP buffer `index`; null with `error` filled on failure.
  std::unique_ptr<Mapping> map_buffer(uint32_t index, Error* error);

  bool queue_mmap(uint32_t index, Error* error);
  bool queue_userptr(uint32_t index, void* data, size_t length, Error* error);
  bool stream_on(Error* error);
  bool stream_off(Error* error);

  // Waits until a frame can be dequeued, interrupt() is called, or `timeout_ms` passes
  // (negative: no timeout). A device error (unplug, streaming error) is kError with `error`.
  WaitResult wait_for_frame(int timeout_ms, Error* error);
  bool dequeue(Memory memory, Frame* frame, Error* error);

  // Makes wait_for_frame() return kInterrupted, now and until clear_interrupt().
  void interrupt();
  void clear_interrupt();

  // Sets a control by its name as v4l2-ctl prints it ("osd_text_mode", "disconnect") or as
  // the driver names it ("OSD Text Mode"); for buttons the value is ignored. For tests and
  // tools.
  bool set_control(const std::string& name, int32_t value, Error* error);
  // Selects video input `index` (VIDIOC_S_INPUT), e.g. another of vivid's inputs. For tests and
  // tools.
  bool set_input(uint32_t index, Error* error);

  int fd() const { return fd_; }

 private:
  Device(std::string path, int fd, int wake_fd);
  // After an I/O failure: unplugged (kDisconnected) or a streaming error (kStreamError)?
  Error capture_failure(const char* operation, int errnum) const;

  std::string path_;
  int fd_;       // registered with libv4l2
  int wake_fd_;  // eventfd that interrupt() signals
  std::string card_, driver_;
  bool can_set_framerate_ = false;
};

// The sentence for a failed open of `path` with errno `errnum` (exposed for tests).
Error open_error(const std::string& path, int errnum);

}  // namespace cipc_v4l2
