// SPDX-License-Identifier: LGPL-2.1-or-later
#include "camera/debayerinput.h"

#include <gst/video/video.h>

#include <memory>
#include <mutex>

#include "camera/bayercaps.h"
#include "memory/pinnedmemory.h"
#include "release_worker.h"

// rg10tobgra's category: what happens to its input belongs in its log.
GST_DEBUG_CATEGORY_STATIC(cipc_debayer_input_debug);
#define GST_CAT_DEFAULT cipc_debayer_input_debug

namespace cipc_gst {

namespace {

void init_category() {
  static std::once_flag once;
  std::call_once(once, [] {
    GST_DEBUG_CATEGORY_GET(cipc_debayer_input_debug, "cudaipc-rg10tobgra");
    if (!cipc_debayer_input_debug)  // no plugin (a test): the same category, made here
      GST_DEBUG_CATEGORY_INIT(cipc_debayer_input_debug, "cudaipc-rg10tobgra", 0,
                              "rg10tobgra element");
  });
}

void post_cuda_failure(GstElement* element, const char* what, const cipc_cuda::Status& s) {
  GST_ELEMENT_ERROR(element, RESOURCE, FAILED, ("%s", what), ("%s", s.message().c_str()));
}

}  // namespace

InputRows input_rows(GstBuffer* inbuf, gint width, gint height) {
  const GstVideoMeta* meta = gst_buffer_get_video_meta(inbuf);
  InputRows rows;
  rows.stride = meta ? static_cast<size_t>(meta->stride[0]) : bayer10_default_stride(width);
  rows.offset = meta ? meta->offset[0] : 0;
  rows.row_bytes = 2 * static_cast<size_t>(width);
  rows.needed = rows.stride * static_cast<size_t>(height - 1) + rows.row_bytes;
  return rows;
}

bool in_pinned_memory(GstBuffer* inbuf, cipc_cuda::DevicePtr* pinned) {
  GstMemory* mem = gst_buffer_n_memory(inbuf) == 1 ? gst_buffer_peek_memory(inbuf, 0) : nullptr;
  return mem && gst_cipc_pinned_memory_device_ptr(mem, pinned);
}

bool fixed_input_path(GstCipcInputMode mode, cipc_cuda::InputPath* path) {
  switch (mode) {
    case GST_CIPC_INPUT_IN_PLACE: *path = cipc_cuda::InputPath::kInPlace; return true;
    case GST_CIPC_INPUT_UPLOAD: *path = cipc_cuda::InputPath::kUpload; return true;
    case GST_CIPC_INPUT_AUTO: break;
  }
  return false;
}

void* device_address(cipc_cuda::DevicePtr ptr) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(ptr));
}

cipc_cuda::Status ensure_staging(cipc_cuda::DeviceBuffer& buffer, int device, size_t size) {
  if (buffer.ptr() && buffer.size() >= size) return cipc_cuda::Status::ok();
  buffer = cipc_cuda::DeviceBuffer();
  return cipc_cuda::DeviceBuffer::create(device, size, &buffer);
}

void DebayerInput::start(int device, cipc_cuda::StreamHandle kernel_stream) {
  device_ = device;
  stream_ = kernel_stream;
  read_done_ = cipc_cuda::RecycledEvents(device);
  counters_.copies = 0;
  counters_.uploads = 0;
  counters_.path = -1;
  counters_.in_place_us = 0;
  counters_.upload_us = 0;
}

void DebayerInput::stop() {
  // Nothing may still read what goes.
  if (uploader_.valid()) (void)cipc_cuda::synchronize_stream(uploader_.copy_stream());
  staging_ = cipc_cuda::DeviceBuffer();
  uploader_ = cipc_cuda::InputUploader();
  read_done_ = cipc_cuda::RecycledEvents(-1);  // those the release worker holds go with it
  timed_width_ = timed_height_ = 0;
  times_ = cipc_cuda::InputPathTimes{};
  stream_ = nullptr;
  device_ = -1;
}

GstFlowReturn DebayerInput::locate(GstElement* element, GstBuffer* inbuf, gint width, gint height,
                                   GstCipcInputMode mode, const cipc_cuda::DebayerParams& params,
                                   InputPlacement* in) {
  init_category();  // everything that logs or posts runs inside locate()
  *in = InputPlacement{};
  const InputRows rows = input_rows(inbuf, width, height);
  if (gst_buffer_get_size(inbuf) < rows.offset + rows.needed) {
    GST_ELEMENT_ERROR(element, STREAM, FORMAT, ("An input frame is smaller than its format says."),
                      ("%" G_GSIZE_FORMAT " bytes, %" G_GSIZE_FORMAT " needed",
                       gst_buffer_get_size(inbuf), rows.offset + rows.needed));
    return GST_FLOW_ERROR;
  }
  cipc_cuda::DevicePtr pinned = 0;
  if (!in_pinned_memory(inbuf, &pinned)) return copy_to_device(element, inbuf, rows, height, in);
  const cipc_cuda::DevicePtr frame = pinned + rows.offset;
  const cipc_cuda::InputPath path = pinned_path(element, mode, params, width, height);
  counters_.path = static_cast<int>(path);
  if (path == cipc_cuda::InputPath::kUpload) return upload(element, frame, rows, height, in);
  in->ptr = frame;
  in->pitch = rows.stride;
  in->hold_on = stream_;
  return GST_FLOW_OK;
}

// As input-mode says, or with auto what was timed for this frame size (timed now if not yet: a
// few milliseconds, once per size).
cipc_cuda::InputPath DebayerInput::pinned_path(GstElement* element, GstCipcInputMode mode,
                                               const cipc_cuda::DebayerParams& params, gint width,
                                               gint height) {
  cipc_cuda::InputPath fixed;
  if (fixed_input_path(mode, &fixed)) return fixed;
  if (timed_width_ == width && timed_height_ == height) return times_.faster();
  timed_width_ = width;
  timed_height_ = height;
  const cipc_cuda::Status status =
      cipc_cuda::measure_input_paths(device_, params, width, height, &times_);
  if (!status) {
    GST_WARNING_OBJECT(element, "could not time the input paths, reading in place: %s",
                       status.message().c_str());
    times_ = cipc_cuda::InputPathTimes{};
  }
  GST_INFO_OBJECT(element, "%dx%d pinned input: in place %.1f us, upload + kernel %.1f us: %s",
                  width, height, times_.in_place_us, times_.upload_us,
                  cipc_cuda::input_path_name(times_.faster()));
  counters_.in_place_us = times_.in_place_us;
  counters_.upload_us = times_.upload_us;
  return times_.faster();
}

GstFlowReturn DebayerInput::upload(GstElement* element, cipc_cuda::DevicePtr frame,
                                   const InputRows& rows, gint height, InputPlacement* in) {
  cipc_cuda::Status s = cipc_cuda::Status::ok();
  if (!uploader_.valid()) s = cipc_cuda::InputUploader::create(device_, &uploader_);
  if (s)
    s = uploader_.upload(device_address(frame), rows.stride, rows.row_bytes,
                         static_cast<size_t>(height), stream_, &in->ptr, &in->pitch);
  if (!s) {
    post_cuda_failure(element, "Could not upload an input frame to the GPU.", s);
    return GST_FLOW_ERROR;
  }
  in->uploaded = true;
  in->hold_on = uploader_.copy_stream();  // upstream gets it back once it is uploaded
  ++counters_.uploads;
  return GST_FLOW_OK;
}

// Foreign memory: one counted copy to the GPU.
GstFlowReturn DebayerInput::copy_to_device(GstElement* element, GstBuffer* inbuf,
                                           const InputRows& rows, gint height, InputPlacement* in) {
  GstMapInfo map;
  if (!gst_buffer_map(inbuf, &map, GST_MAP_READ)) {
    GST_ELEMENT_ERROR(element, STREAM, FAILED, ("Could not read an input frame."), (nullptr));
    return GST_FLOW_ERROR;
  }
  cipc_cuda::Status s = ensure_staging(staging_, device_, rows.row_bytes * height);
  if (s)
    s = cipc_cuda::copy_2d_async(device_address(staging_.ptr()), rows.row_bytes,
                                 map.data + rows.offset, rows.stride, rows.row_bytes,
                                 static_cast<size_t>(height), stream_);
  // A copy from pageable memory has left it once the call returns; from registered or pinned
  // memory it may still be running, so wait for it before upstream may reuse the buffer.
  if (s) s = cipc_cuda::synchronize_stream(stream_);
  gst_buffer_unmap(inbuf, &map);
  if (!s) {
    post_cuda_failure(element, "Could not copy an input frame to the GPU.", s);
    return GST_FLOW_ERROR;
  }
  ++counters_.copies;
  in->ptr = staging_.ptr();
  in->pitch = rows.row_bytes;
  return GST_FLOW_OK;
}

cipc_cuda::Status DebayerInput::kernel_queued(const InputPlacement& in) {
  return in.uploaded ? uploader_.kernel_queued(stream_) : cipc_cuda::Status::ok();
}

cipc_cuda::Status DebayerInput::hold_until_read(GstBuffer* inbuf, const InputPlacement& in) {
  if (!in.hold_on) return cipc_cuda::Status::ok();
  std::shared_ptr<cipc_cuda::Event> done;
  cipc_cuda::Status s = read_done_.next(&done);
  if (s) s = done->record(in.hold_on);
  if (!s) return s;
  std::shared_ptr<void> keepalive(gst_buffer_ref(inbuf),
                                  [](void* b) { gst_buffer_unref(static_cast<GstBuffer*>(b)); });
  cipc_slots::drop_when_done(std::move(done), std::move(keepalive));
  return s;
}

}  // namespace cipc_gst
