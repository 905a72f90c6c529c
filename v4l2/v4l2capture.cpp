// SPDX-License-Identifier: LGPL-2.1-or-later
#include "v4l2capture.h"

#include <fcntl.h>
#include <libv4l2.h>
#include <linux/videodev2.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <numeric>

namespace cipc_v4l2 {

// bayer/formats.h spells the fourccs out so that it needs no kernel header.
static_assert(cipc_bayer::kFourccSRGGB8 == V4L2_PIX_FMT_SRGGB8);
static_assert(cipc_bayer::kFourccSGRBG8 == V4L2_PIX_FMT_SGRBG8);
static_assert(cipc_bayer::kFourccSGBRG8 == V4L2_PIX_FMT_SGBRG8);
static_assert(cipc_bayer::kFourccSBGGR8 == V4L2_PIX_FMT_SBGGR8);
static_assert(cipc_bayer::kFourccSRGGB10 == V4L2_PIX_FMT_SRGGB10);
static_assert(cipc_bayer::kFourccSGRBG10 == V4L2_PIX_FMT_SGRBG10);
static_assert(cipc_bayer::kFourccSGBRG10 == V4L2_PIX_FMT_SGBRG10);
static_assert(cipc_bayer::kFourccSBGGR10 == V4L2_PIX_FMT_SBGGR10);
static_assert(cipc_bayer::kFourccSRGGB12 == V4L2_PIX_FMT_SRGGB12);
static_assert(cipc_bayer::kFourccSGRBG12 == V4L2_PIX_FMT_SGRBG12);
static_assert(cipc_bayer::kFourccSGBRG12 == V4L2_PIX_FMT_SGBRG12);
static_assert(cipc_bayer::kFourccSBGGR12 == V4L2_PIX_FMT_SBGGR12);

namespace {

std::string errno_text(int errnum) {
  char buf[128];
  // GNU strerror_r returns the message (maybe not in buf).
  return strerror_r(errnum, buf, sizeof buf);
}

Error make_error(ErrorKind kind, int errnum, std::string message, const char* operation) {
  Error e;
  e.kind = kind;
  e.errnum = errnum;
  e.message = std::move(message);
  if (operation) e.detail = std::string(operation) + ": " + errno_text(errnum);
  return e;
}

// An ioctl through libv4l2 that retries when a signal interrupts it.
int xioctl(int fd, unsigned long request, void* arg) {
  int r;
  do {
    r = v4l2_ioctl(fd, request, arg);
  } while (r == -1 && errno == EINTR);
  return r;
}

// What a V4L2 node that cannot capture video is, for the error sentence.
std::string describe_node(uint32_t caps) {
  if (caps & V4L2_CAP_VIDEO_CAPTURE_MPLANE)
    return "a multi-planar video capture device, which this element does not support";
  if (caps & (V4L2_CAP_VIDEO_OUTPUT | V4L2_CAP_VIDEO_OUTPUT_MPLANE)) return "a video output device";
  if (caps & V4L2_CAP_VIDEO_M2M) return "a memory-to-memory device";
  if (caps & V4L2_CAP_SDR_CAPTURE) return "a software-defined-radio receiver";
  if (caps & (V4L2_CAP_VBI_CAPTURE | V4L2_CAP_SLICED_VBI_CAPTURE)) return "a VBI capture device";
  if (caps & V4L2_CAP_RADIO) return "a radio device";
  if (caps & V4L2_CAP_META_CAPTURE) return "a metadata capture device";
  if (caps & V4L2_CAP_TOUCH) return "a touch sensor";
  return "some other kind of V4L2 device";
}

Fraction reduced(uint64_t num, uint64_t den) {
  if (den == 0) return {0, 1};
  if (num == 0) return {0, 1};
  const uint64_t g = std::gcd(num, den);
  num /= g;
  den /= g;
  while (num > UINT32_MAX || den > UINT32_MAX) {
    num >>= 1;
    den >>= 1;
  }
  return {static_cast<uint32_t>(num), static_cast<uint32_t>(std::max<uint64_t>(den, 1))};
}

// v4l2-ctl's spelling of a control name: lower case, runs of other characters as one '_'.
std::string control_key(const std::string& name) {
  std::string key;
  for (char c : name) {
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
      key += c;
    } else if (c >= 'A' && c <= 'Z') {
      key += static_cast<char>(c - 'A' + 'a');
    } else if (!key.empty() && key.back() != '_') {
      key += '_';
    }
  }
  while (!key.empty() && key.back() == '_') key.pop_back();
  return key;
}

}  // namespace

// ---- Formats --------------------------------------------------------------------------------

std::string fourcc_to_string(uint32_t fourcc) {
  std::string s;
  for (int i = 0; i < 4; ++i) {
    const char c = static_cast<char>((fourcc >> (8 * i)) & 0x7f);
    s += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (fourcc & (1u << 31)) s += "-BE";
  return s;
}

Fraction framerate_from_interval(uint32_t interval_num, uint32_t interval_den) {
  if (interval_num == 0) return {0, 1};
  return reduced(interval_den, interval_num);
}

uint64_t frame_duration_ns(Fraction rate) {
  if (rate.num == 0 || rate.den == 0) return 0;
  return static_cast<uint64_t>(rate.den) * 1000000000ull / rate.num;
}

bool Frame::error_flag() const {
  return (flags & V4L2_BUF_FLAG_ERROR) != 0;
}

const char* memory_name(Memory memory) {
  return memory == Memory::kMmap ? "mmap" : "userptr";
}

Mapping::~Mapping() {
  if (data_ && data_ != MAP_FAILED) v4l2_munmap(data_, length_);
}

// ---- Errors ---------------------------------------------------------------------------------

Error open_error(const std::string& path, int errnum) {
  const std::string dev = "'" + path + "'";
  switch (errnum) {
    case ENOENT:
      return make_error(ErrorKind::kNotFound, errnum,
                        "Cannot open device " + dev + ": it does not exist.", "open");
    case ENODEV:
    case ENXIO:
      return make_error(ErrorKind::kNotFound, errnum,
                        "Cannot open device " + dev + ": no driver is bound to it (unplugged?).",
                        "open");
    case EACCES:
    case EPERM:
      return make_error(
          ErrorKind::kPermission, errnum,
          "Cannot open device " + dev + ": permission denied (is the user in the 'video' group?).",
          "open");
    case EBUSY:
      return make_error(ErrorKind::kBusy, errnum,
                        "Cannot open device " + dev + ": it is busy (another application has it).",
                        "open");
    default:
      return make_error(ErrorKind::kFailed, errnum,
                        "Cannot open device " + dev + ": " + errno_text(errnum) + ".", "open");
  }
}

// ---- Device ---------------------------------------------------------------------------------

Device::Device(std::string path, int fd, int wake_fd)
    : path_(std::move(path)), fd_(fd), wake_fd_(wake_fd) {}

Device::~Device() {
  if (fd_ >= 0) v4l2_close(fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

std::unique_ptr<Device> Device::open(const std::string& path, Error* error) {
  const std::string dev = "'" + path + "'";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    *error = open_error(path, errno);
    return nullptr;
  }
  if (!S_ISCHR(st.st_mode)) {
    *error = make_error(ErrorKind::kNotV4l2, 0,
                        dev + " is not a device node, so it cannot be a V4L2 camera.", nullptr);
    return nullptr;
  }
  // Non-blocking: DQBUF never blocks; wait_for_frame() polls with a timeout instead.
  int fd = ::open(path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    *error = open_error(path, errno);
    return nullptr;
  }
  // Identify the node with a plain ioctl first: libv4l2 prints to stderr for non-V4L2 fds.
  v4l2_capability cap{};
  if (::ioctl(fd, VIDIOC_QUERYCAP, &cap) != 0) {
    const int err = errno;
    ::close(fd);
    *error = err == ENODEV
                 ? open_error(path, err)
                 : make_error(ErrorKind::kNotV4l2, err,
                              dev + " is not a V4L2 (video4linux) device.", "VIDIOC_QUERYCAP");
    return nullptr;
  }
  const uint32_t caps =
      (cap.capabilities & V4L2_CAP_DEVICE_CAPS) ? cap.device_caps : cap.capabilities;
  if (!(caps & V4L2_CAP_VIDEO_CAPTURE)) {
    ::close(fd);
    *error = make_error(ErrorKind::kNotCapture, 0,
                        dev + " is not a video capture device: it is " + describe_node(caps) + ".",
                        nullptr);
    return nullptr;
  }
  if (!(caps & V4L2_CAP_STREAMING)) {
    ::close(fd);
    *error = make_error(ErrorKind::kNotCapture, 0,
                        "Device " + dev +
                            " does not support streaming I/O (only read()), which "
                            "this element needs.",
                        nullptr);
    return nullptr;
  }
  // V4L2_DISABLE_CONVERSION: see the header; without it USERPTR is refused.
  const int v4l2_fd = v4l2_fd_open(fd, V4L2_DISABLE_CONVERSION);
  if (v4l2_fd < 0) {
    const int err = errno;
    ::close(fd);
    *error = make_error(ErrorKind::kFailed, err,
                        "Cannot use device " + dev + " through libv4l2: " + errno_text(err) + ".",
                        "v4l2_fd_open");
    return nullptr;
  }
  const int wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0) {
    const int err = errno;
    v4l2_close(v4l2_fd);
    *error = make_error(ErrorKind::kFailed, err, "Cannot create an event descriptor.", "eventfd");
    return nullptr;
  }
  std::unique_ptr<Device> device(new Device(path, v4l2_fd, wake_fd));
  device->card_ = reinterpret_cast<const char*>(cap.card);
  device->driver_ = reinterpret_cast<const char*>(cap.driver);
  v4l2_streamparm parm{};
  parm.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
  if (xioctl(v4l2_fd, VIDIOC_G_PARM, &parm) == 0)
    device->can_set_framerate_ = (parm.parm.capture.capability & V4L2_CAP_TIMEPERFRAME) != 0;
  return device;
}

bool Device::enumerate_formats(std::vector<FormatDescription>* formats, Error* error) const {
  formats->clear();
  for (uint32_t i = 0;; ++i) {
    v4l2_fmtdesc desc{};
    desc.index = i;
    desc.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    if (xioctl(fd_, VIDIOC_ENUM_FMT, &desc) != 0) {
      if (errno == EINVAL) break;  // end of the list
      *error = make_error(errno == ENODEV ? ErrorKind::kDisconnected : ErrorKind::kFailed, errno,
                          "Cannot list the formats of device '" + path_ + "'.", "VIDIOC_ENUM_FMT");
      return false;
    }
    FormatDescription fd;
    fd.fourcc = desc.pixelformat;
    fd.description = reinterpret_cast<const char*>(desc.description);

    // Rates of one size; unknown when the driver cannot enumerate them.
    auto rates_of = [this, &desc](uint32_t width, uint32_t height) {
      FrameRates rates;
      for (uint32_t k = 0;; ++k) {
        v4l2_frmivalenum ival{};
        ival.index = k;
        ival.pixel_format = desc.pixelformat;
        ival.width = width;
        ival.height = height;
        if (xioctl(fd_, VIDIOC_ENUM_FRAMEINTERVALS, &ival) != 0) break;
        if (ival.type == V4L2_FRMIVAL_TYPE_DISCRETE) {
          rates.kind = FrameRates::Kind::kDiscrete;
          rates.discrete.push_back(
              framerate_from_interval(ival.discrete.numerator, ival.discrete.denominator));
        } else {
          rates.kind = FrameRates::Kind::kRange;
          // The longest interval is the slowest rate.
          rates.min =
              framerate_from_interval(ival.stepwise.max.numerator, ival.stepwise.max.denominator);
          rates.max =
              framerate_from_interval(ival.stepwise.min.numerator, ival.stepwise.min.denominator);
          break;
        }
      }
      std::sort(
          rates.discrete.begin(), rates.discrete.end(), [](const Fraction& a, const Fraction& b) {
            return static_cast<uint64_t>(a.num) * b.den > static_cast<uint64_t>(b.num) * a.den;
          });
      rates.discrete.erase(std::unique(rates.discrete.begin(), rates.discrete.end()),
                           rates.discrete.end());
      return rates;
    };

    for (uint32_t k = 0;; ++k) {
      v4l2_frmsizeenum size{};
      size.index = k;
      size.pixel_format = desc.pixelformat;
      if (xioctl(fd_, VIDIOC_ENUM_FRAMESIZES, &size) != 0) break;
      FrameSize fs;
      if (size.type == V4L2_FRMSIZE_TYPE_DISCRETE) {
        fs.min_width = fs.max_width = size.discrete.width;
        fs.min_height = fs.max_height = size.discrete.height;
        fs.rates = rates_of(size.discrete.width, size.discrete.height);
        fd.sizes.push_back(std::move(fs));
      } else {
        fs.discrete = false;
        fs.min_width = size.stepwise.min_width;
        fs.max_width = size.stepwise.max_width;
        fs.step_width = std::max<uint32_t>(size.stepwise.step_width, 1);
        fs.min_height = size.stepwise.min_height;
        fs.max_height = size.stepwise.max_height;
        fs.step_height = std::max<uint32_t>(size.stepwise.step_height, 1);
        fs.rates = rates_of(fs.max_width, fs.max_height);
        fd.sizes.push_back(std::move(fs));
        break;  // one range describes them all
      }
    }
    if (fd.sizes.empty()) {
      // No size enumeration: ask the driver for the smallest and largest it accepts.
      FrameSize fs;
      fs.discrete = false;
      v4l2_format f{};
      f.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
      f.fmt.pix.pixelformat = desc.pixelformat;
      f.fmt.pix.width = 1;
      f.fmt.pix.height = 1;
      f.fmt.pix.field = V4L2_FIELD_NONE;
      if (xioctl(fd_, VIDIOC_TRY_FMT, &f) == 0) {
        fs.min_width = f.fmt.pix.width;
        fs.min_height = f.fmt.pix.height;
      }
      f.fmt.pix.width = 32768;
      f.fmt.pix.height = 32768;
      if (xioctl(fd_, VIDIOC_TRY_FMT, &f) == 0) {
        fs.max_width = f.fmt.pix.width;
        fs.max_height = f.fmt.pix.height;
      }
      if (fs.min_width > 0 && fs.max_width >= fs.min_width && fs.min_height > 0 &&
          fs.max_height >= fs.min_height)
        fd.sizes.push_back(fs);
    }
    std::stable_sort(fd.sizes.begin(), fd.sizes.end(), [](const FrameSize& a, const FrameSize& b) {
      return static_cast<uint64_t>(a.max_width) * a.max_height >
             static_cast<uint64_t>(b.max_width) * b.max_height;
    });
    formats->push_back(std::move(fd));
  }
  return true;
}

bool Device::get_format(Format* format, Error* error) const {
  v4l2_format f{};
  f.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
  if (xioctl(fd_, VIDIOC_G_FMT, &f) != 0) {
    *error =
        make_error(ErrorKind::kFailed, errno,
                   "Cannot read the current format of device '" + path_ + "'.", "VIDIOC_G_FMT");
    return false;
  }
  format->fourcc = f.fmt.pix.pixelformat;
  format->width = f.fmt.pix.width;
  format->height = f.fmt.pix.height;
  format->bytes_per_line = f.fmt.pix.bytesperline;
  format->size_image = f.fmt.pix.sizeimage;
  return true;
}

bool Device::set_format(uint32_t fourcc, uint32_t width, uint32_t height, Format* actual,
                        Error* error) {
  const std::string wanted =
      fourcc_to_string(fourcc) + " " + std::to_string(width) + "x" + std::to_string(height);
  v4l2_format f{};
  f.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
  f.fmt.pix.pixelformat = fourcc;
  f.fmt.pix.width = width;
  f.fmt.pix.height = height;
  f.fmt.pix.field = V4L2_FIELD_NONE;
  if (xioctl(fd_, VIDIOC_S_FMT, &f) != 0) {
    const int err = errno;
    if (err == EBUSY) {
      *error = make_error(ErrorKind::kBusy, err,
                          "Device '" + path_ +
                              "' is busy: another application is capturing from it, so its "
                              "format cannot be set to " +
                              wanted + ".",
                          "VIDIOC_S_FMT");
    } else if (err == ENODEV) {
      *error = make_error(ErrorKind::kDisconnected, err, "Device '" + path_ + "' was disconnected.",
                          "VIDIOC_S_FMT");
    } else {
      *error =
          make_error(ErrorKind::kUnsupported, err,
                     "Device '" + path_ + "' refused the format " + wanted + ".", "VIDIOC_S_FMT");
    }
    return false;
  }
  if (f.fmt.pix.pixelformat != fourcc || f.fmt.pix.width != width || f.fmt.pix.height != height) {
    *error = make_error(ErrorKind::kUnsupported, 0,
                        "Device '" + path_ + "' cannot capture " + wanted + ": it offered " +
                            fourcc_to_string(f.fmt.pix.pixelformat) + " " +
                            std::to_string(f.fmt.pix.width) + "x" +
                            std::to_string(f.fmt.pix.height) + " instead.",
                        nullptr);
    return false;
  }
  if (f.fmt.pix.field != V4L2_FIELD_NONE && f.fmt.pix.field != V4L2_FIELD_ANY) {
    *error = make_error(ErrorKind::kUnsupported, 0,
                        "Device '" + path_ + "' delivers " + wanted +
                            " as interlaced fields, which this element does not support.",
                        nullptr);
    return false;
  }
  actual->fourcc = fourcc;
  actual->width = width;
  actual->height = height;
  // Some drivers leave bytesperline or sizeimage at 0; fall back to the tight layout.
  const cipc_bayer::BayerFormat* bayer = cipc_bayer::bayer_format_from_fourcc(fourcc);
  const size_t tight = bayer ? cipc_bayer::tight_stride(*bayer, width) : 0;
  actual->bytes_per_line = std::max<uint32_t>(f.fmt.pix.bytesperline, static_cast<uint32_t>(tight));
  actual->size_image = std::max<uint32_t>(f.fmt.pix.sizeimage, actual->bytes_per_line * height);
  return true;
}

bool Device::set_framerate(Fraction rate, Fraction* actual, Error* error) {
  if (!can_set_framerate_) {
    *error = make_error(ErrorKind::kUnsupported, 0,
                        "Device '" + path_ + "' cannot set its frame rate.", nullptr);
    return false;
  }
  v4l2_streamparm parm{};
  parm.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
  parm.parm.capture.timeperframe.numerator = rate.den;
  parm.parm.capture.timeperframe.denominator = rate.num;
  if (xioctl(fd_, VIDIOC_S_PARM, &parm) != 0) {
    *error = make_error(errno == EBUSY ? ErrorKind::kBusy : ErrorKind::kUnsupported, errno,
                        "Device '" + path_ + "' refused the frame rate " +
                            std::to_string(rate.num) + "/" + std::to_string(rate.den) + ".",
                        "VIDIOC_S_PARM");
    return false;
  }
  *actual = framerate_from_interval(parm.parm.capture.timeperframe.numerator,
                                    parm.parm.capture.timeperframe.denominator);
  return true;
}

bool Device::request_buffers(Memory memory, uint32_t* count, Error* error) {
  v4l2_requestbuffers req{};
  req.count = *count;
  req.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
  req.memory = memory == Memory::kMmap ? V4L2_MEMORY_MMAP : V4L2_MEMORY_USERPTR;
  if (xioctl(fd_, VIDIOC_REQBUFS, &req) != 0) {
    const int err = errno;
    const std::string what = std::to_string(*count) + " " + memory_name(memory) + " buffers";
    switch (err) {
      case EBUSY:
        *error =
            make_error(ErrorKind::kBusy, err,
                       "Device '" + path_ + "' is busy: another application is capturing from it.",
                       "VIDIOC_REQBUFS");
        break;
      case ENOMEM:
        *error =
            make_error(ErrorKind::kNoMemory, err,
                       "Device '" + path_ + "' could not allocate " + what + ".", "VIDIOC_REQBUFS");
        break;
      case ENODEV:
        *error = make_error(ErrorKind::kDisconnected, err,
                            "Device '" + path_ + "' was disconnected.", "VIDIOC_REQBUFS");
        break;
      case EINVAL:
        *error =
            make_error(ErrorKind::kUnsupported, err,
                       memory == Memory::kUserptr ? "Device '" + path_ +
                                                        "' does not accept user-pointer "
                                                        "(USERPTR) buffers."
                                                  : "Device '" + path_ + "' refused " + what + ".",
                       "VIDIOC_REQBUFS");
        break;
      default:
        *error = make_error(ErrorKind::kFailed, err, "Device '" + path_ + "' refused " + what + ".",
                            "VIDIOC_REQBUFS");
    }
    return false;
  }
  if (req.count == 0) {
    *error = make_error(ErrorKind::kNoMemory, 0,
                        "Device '" + path_ + "' granted no " + memory_name(memory) + " buffers.",
                        nullptr);
    return false;
  }
  *count = req.count;
  return true;
}

bool Device::release_buffers(Memory memory, Error* error) {
  uint32_t none = 0;
  v4l2_requestbuffers req{};
  req.count = none;
  req.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
  req.memory = memory == Memory::kMmap ? V4L2_MEMORY_MMAP : V4L2_MEMORY_USERPTR;
  if (xioctl(fd_, VIDIOC_REQBUFS, &req) != 0) {
    *error = make_error(ErrorKind::kFailed, errno,
                        "Device '" + path_ + "' did not release its buffers.", "VIDIOC_REQBUFS");
    return false;
  }
  return true;
}

std::unique_ptr<Mapping> Device::map_buffer(uint32_t index, Error* error) {
  v4l2_buffer buf{};
  buf.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
  buf.memory = V4L2_MEMORY_MMAP;
  buf.index = index;
  if (xioctl(fd_, VIDIOC_QUERYBUF, &buf) != 0) {
    *error =
        make_error(ErrorKind::kFailed, errno,
                   "Cannot query buffer " + std::to_string(index) + " of device '" + path_ + "'.",
                   "VIDIOC_QUERYBUF");
    return nullptr;
  }
  void* data =
      v4l2_mmap(nullptr, buf.length, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, buf.m.offset);
  if (data == MAP_FAILED) {
    *error = make_error(
        ErrorKind::kNoMemory, errno,
        "Cannot map buffer " + std::to_string(index) + " of device '" + path_ + "'.", "mmap");
    return nullptr;
  }
  return std::make_unique<Mapping>(data, buf.length);
}

bool Device::queue_mmap(uint32_t index, Error* error) {
  v4l2_buffer buf{};
  buf.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
  buf.memory = V4L2_MEMORY_MMAP;
  buf.index = index;
  if (xioctl(fd_, VIDIOC_QBUF, &buf) != 0) {
    const int err = errno;
    // EIO: the queue is in an error state (vb2_queue_error), ENODEV: unplugged.
    *error = err == ENODEV || err == EIO
                 ? capture_failure("VIDIOC_QBUF", err)
                 : make_error(ErrorKind::kFailed, err,
                              "Device '" + path_ + "' refused a capture buffer.", "VIDIOC_QBUF");
    return false;
  }
  return true;
}

bool Device::queue_userptr(uint32_t index, void* data, size_t length, Error* error) {
  v4l2_buffer buf{};
  buf.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
  buf.memory = V4L2_MEMORY_USERPTR;
  buf.index = index;
  buf.m.userptr = reinterpret_cast<unsigned long>(data);
  buf.length = static_cast<uint32_t>(length);
  if (xioctl(fd_, VIDIOC_QBUF, &buf) != 0) {
    const int err = errno;
    *error = err == ENODEV || err == EIO
                 ? capture_failure("VIDIOC_QBUF", err)
                 : make_error(ErrorKind::kFailed, err,
                              "Device '" + path_ +
                                  "' refused a user-pointer capture buffer (the memory may not "
                                  "be pinnable for DMA).",
                              "VIDIOC_QBUF");
    return false;
  }
  return true;
}

bool Device::stream_on(Error* error) {
  int type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
  if (xioctl(fd_, VIDIOC_STREAMON, &type) != 0) {
    const int err = errno;
    *error = make_error(
        err == ENODEV  ? ErrorKind::kDisconnected
        : err == EBUSY ? ErrorKind::kBusy
                       : ErrorKind::kFailed,
        err, "Device '" + path_ + "' could not start streaming: " + errno_text(err) + ".",
        "VIDIOC_STREAMON");
    return false;
  }
  return true;
}

bool Device::stream_off(Error* error) {
  int type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
  if (xioctl(fd_, VIDIOC_STREAMOFF, &type) != 0) {
    *error = make_error(ErrorKind::kFailed, errno,
                        "Device '" + path_ + "' could not stop streaming.", "VIDIOC_STREAMOFF");
    return false;
  }
  return true;
}

Error Device::capture_failure(const char* operation, int errnum) const {
  // An unplugged device answers every ioctl with ENODEV; one that only had a streaming error
  // still answers QUERYCAP.
  v4l2_capability cap{};
  const bool gone =
      errnum == ENODEV || (::ioctl(fd_, VIDIOC_QUERYCAP, &cap) != 0 && errno == ENODEV);
  if (gone)
    return make_error(ErrorKind::kDisconnected, errnum,
                      "Device '" + path_ + "' was disconnected while capturing.", operation);
  return make_error(
      ErrorKind::kStreamError, errnum,
      "Device '" + path_ + "' stopped capturing with an error: " + errno_text(errnum) + ".",
      operation);
}

WaitResult Device::wait_for_frame(int timeout_ms, Error* error) {
  pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  for (;;) {
    const int r = ::poll(fds, 2, timeout_ms);
    if (r < 0) {
      if (errno == EINTR) continue;  // the remaining time restarts; good enough for a timeout
      *error = make_error(ErrorKind::kFailed, errno,
                          "Waiting for a frame from device '" + path_ + "' failed.", "poll");
      return WaitResult::kError;
    }
    if (r == 0) return WaitResult::kTimeout;
    if (fds[1].revents & POLLIN) return WaitResult::kInterrupted;
    if (fds[0].revents & (POLLIN | POLLRDNORM)) return WaitResult::kReady;
    if (fds[0].revents & (POLLERR | POLLHUP | POLLNVAL)) {
      *error = capture_failure("poll", EIO);
      return WaitResult::kError;
    }
  }
}

bool Device::dequeue(Memory memory, Frame* frame, Error* error) {
  v4l2_buffer buf{};
  buf.type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
  buf.memory = memory == Memory::kMmap ? V4L2_MEMORY_MMAP : V4L2_MEMORY_USERPTR;
  if (xioctl(fd_, VIDIOC_DQBUF, &buf) != 0) {
    if (errno == EAGAIN) {
      *error = Error{};  // nothing ready after all: not an error
      return false;
    }
    *error = capture_failure("VIDIOC_DQBUF", errno);
    return false;
  }
  frame->index = buf.index;
  frame->bytes_used = buf.bytesused;
  frame->sequence = buf.sequence;
  frame->flags = buf.flags;
  frame->timestamp_ns = static_cast<uint64_t>(buf.timestamp.tv_sec) * 1000000000ull +
                        static_cast<uint64_t>(buf.timestamp.tv_usec) * 1000ull;
  frame->monotonic_timestamp =
      (buf.flags & V4L2_BUF_FLAG_TIMESTAMP_MASK) == V4L2_BUF_FLAG_TIMESTAMP_MONOTONIC &&
      (buf.timestamp.tv_sec != 0 || buf.timestamp.tv_usec != 0);
  return true;
}

void Device::interrupt() {
  const uint64_t one = 1;
  // The eventfd counter cannot overflow in practice; a failed write leaves it signalled.
  if (::write(wake_fd_, &one, sizeof one) < 0) {
  }
}

void Device::clear_interrupt() {
  uint64_t value;
  while (::read(wake_fd_, &value, sizeof value) > 0) {
  }
}

bool Device::set_control(const std::string& name, int32_t value, Error* error) {
  const std::string key = control_key(name);
  v4l2_queryctrl q{};
  q.id = V4L2_CTRL_FLAG_NEXT_CTRL;
  while (xioctl(fd_, VIDIOC_QUERYCTRL, &q) == 0) {
    if (!(q.flags & V4L2_CTRL_FLAG_DISABLED) && q.type != V4L2_CTRL_TYPE_CTRL_CLASS &&
        control_key(reinterpret_cast<const char*>(q.name)) == key) {
      v4l2_ext_control ctrl{};
      ctrl.id = q.id;
      ctrl.value = q.type == V4L2_CTRL_TYPE_BUTTON ? 1 : value;
      v4l2_ext_controls ctrls{};
      ctrls.which = V4L2_CTRL_WHICH_CUR_VAL;
      ctrls.count = 1;
      ctrls.controls = &ctrl;
      if (xioctl(fd_, VIDIOC_S_EXT_CTRLS, &ctrls) != 0) {
        *error = make_error(ErrorKind::kFailed, errno,
                            "Device '" + path_ + "' refused control '" + key + "'.",
                            "VIDIOC_S_EXT_CTRLS");
        return false;
      }
      return true;
    }
    q.id |= V4L2_CTRL_FLAG_NEXT_CTRL;
  }
  *error = make_error(ErrorKind::kUnsupported, 0,
                      "Device '" + path_ + "' has no control '" + key + "'.", nullptr);
  return false;
}

bool Device::set_input(uint32_t index, Error* error) {
  int input = static_cast<int>(index);
  if (xioctl(fd_, VIDIOC_S_INPUT, &input) != 0) {
    *error = make_error(errno == EINVAL ? ErrorKind::kUnsupported : ErrorKind::kFailed, errno,
                        "Device '" + path_ + "' refused input " + std::to_string(index) + ".",
                        "VIDIOC_S_INPUT");
    return false;
  }
  return true;
}

}  // namespace cipc_v4l2
