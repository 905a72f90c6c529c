// SPDX-License-Identifier: LGPL-2.1-or-later
// The fixture of the tests that drive gst/'s element-independent pieces without the plugin (the
// glue library): GStreamer initialised once, video infos from caps strings, and buffers that
// cost no memory until written.
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

namespace cipc_test {

// A buffer of `size` bytes that nothing touches until written: anonymous mapped memory, so that
// an 8K frame of every format costs no page and no memset (glibc's MALLOC_PERTURB_, which meson
// test sets, fills every g_malloc'ed byte and made this suite take over a minute).
struct Mapping {
  void* data;
  size_t size;
};
inline GstBuffer* untouched_buffer(gsize size) {
  if (size == 0) return gst_buffer_new();  // formats without a size of their own (DMA_DRM)
  void* data = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (data == MAP_FAILED) return nullptr;
  return gst_buffer_new_wrapped_full(GstMemoryFlags(0), data, size, 0, size,
                                     new Mapping{data, size}, [](gpointer m) {
                                       auto* mapping = static_cast<Mapping*>(m);
                                       munmap(mapping->data, mapping->size);
                                       delete mapping;
                                     });
}

class Glue : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { gst_init(nullptr, nullptr); }
  static GstVideoInfo info(const char* caps_string) {
    GstCaps* caps = gst_caps_from_string(caps_string);
    GstVideoInfo i;
    EXPECT_TRUE(gst_video_info_from_caps(&i, caps));
    gst_caps_unref(caps);
    return i;
  }
};

}  // namespace cipc_test
