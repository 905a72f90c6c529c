// SPDX-License-Identifier: LGPL-2.1-or-later
// How rg10tobgra's input reaches the GPU (gst/camera/debayerinput), without the element: where a
// frame's rows lie, which memory is read in place, what input-mode fixes, and a frame too small
// for its format, on any machine; on a GPU, each of the three routes (in place, uploaded,
// copied) with what it counts and how long it keeps the buffer. GPU tests skip with the reason
// elsewhere.
#include <gst/gst.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "camera/debayerinput.h"
#include "cuda_test_util.h"
#include "memory/pinnedmemory.h"

namespace {

namespace cc = cipc_cuda;
using cipc_gst::DebayerInput;
using cipc_gst::InputPlacement;

GstBuffer* buffer_with_meta(gsize size, gint width, gint height, gsize offset, gint stride) {
  GstBuffer* b = gst_buffer_new_allocate(nullptr, size, nullptr);
  gsize offsets[GST_VIDEO_MAX_PLANES] = {offset};
  gint strides[GST_VIDEO_MAX_PLANES] = {stride};
  gst_buffer_add_video_meta_full(b, GST_VIDEO_FRAME_FLAG_NONE, GST_VIDEO_FORMAT_GRAY16_LE, width,
                                 height, 1, offsets, strides);
  return b;
}

// Rows of 16-bit samples whose value is row * 1000 + column, `stride` bytes apart.
void fill_rows(guint8* data, gint width, gint height, size_t stride) {
  for (gint y = 0; y < height; ++y) {
    auto* row = reinterpret_cast<guint16*>(data + static_cast<size_t>(y) * stride);
    for (gint x = 0; x < width; ++x) row[x] = static_cast<guint16>(y * 1000 + x);
  }
}

class DebayerInputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    gst_init(nullptr, nullptr);
    gst_cipc_pinned_init_debug();
  }
  void SetUp() override {
    // Errors go to a bus, as from rg10tobgra in a pipeline.
    pipeline_ = gst_pipeline_new(nullptr);
    element_ = gst_bin_new("debayer");
    gst_bin_add(GST_BIN(pipeline_), element_);
    bus_ = gst_pipeline_get_bus(GST_PIPELINE(pipeline_));
  }
  void TearDown() override {
    input_.stop();
    gst_object_unref(bus_);
    gst_object_unref(pipeline_);
  }

  // The first error posted on the bus: its text, and in `domain`/`code` its kind. "" if none.
  std::string posted_error(GQuark* domain = nullptr, gint* code = nullptr) {
    GstMessage* msg = gst_bus_pop_filtered(bus_, GST_MESSAGE_ERROR);
    if (!msg) return "";
    GError* err = nullptr;
    gst_message_parse_error(msg, &err, nullptr);
    const std::string text = err->message;
    if (domain) *domain = err->domain;
    if (code) *code = err->code;
    g_error_free(err);
    gst_message_unref(msg);
    return text;
  }

  GstFlowReturn locate(GstBuffer* b, gint width, gint height, GstCipcInputMode mode,
                       InputPlacement* in) {
    return input_.locate(element_, b, width, height, mode, cc::DebayerParams{}, in);
  }

  // GPU tests: the input on device 0 with a kernel stream of the test's own.
  void start_on_gpu() {
    ASSERT_OK(cc::Stream::create(0, &stream_));
    input_.start(0, stream_.handle());
  }

  GstElement* pipeline_ = nullptr;
  GstElement* element_ = nullptr;
  GstBus* bus_ = nullptr;
  cc::Stream stream_;
  DebayerInput input_;
};

#define SKIP_WITHOUT_GPU()                                                  \
  do {                                                                      \
    const std::string& why_ = cipc_test::cuda_missing_reason();             \
    if (!why_.empty()) GTEST_SKIP() << "needs a CUDA GPU (" << why_ << ")"; \
  } while (0)

// ---- Any machine ----------------------------------------------------------------------------

TEST_F(DebayerInputTest, RowsWithoutAVideoMetaAreFourSamplesAlignedFromTheStart) {
  GstBuffer* b = gst_buffer_new_allocate(nullptr, 16, nullptr);
  const cipc_gst::InputRows rows = cipc_gst::input_rows(b, 1921, 3);
  EXPECT_EQ(rows.offset, 0u);
  EXPECT_EQ(rows.stride, 1924u * 2);  // GST_ROUND_UP_4 (1921) samples
  EXPECT_EQ(rows.row_bytes, 1921u * 2);
  EXPECT_EQ(rows.needed, 2u * 1924 * 2 + 1921 * 2);  // the last row needs no padding
  gst_buffer_unref(b);
}

TEST_F(DebayerInputTest, RowsFollowTheVideoMetasOffsetAndStride) {
  GstBuffer* b = buffer_with_meta(16, 640, 4, 256, 4096);
  const cipc_gst::InputRows rows = cipc_gst::input_rows(b, 640, 4);
  EXPECT_EQ(rows.offset, 256u);
  EXPECT_EQ(rows.stride, 4096u);
  EXPECT_EQ(rows.row_bytes, 1280u);
  EXPECT_EQ(rows.needed, 3u * 4096 + 1280);
  gst_buffer_unref(b);
}

TEST_F(DebayerInputTest, OnlyOneMemoryOfThePinnedPoolIsReadInPlace) {
  cc::DevicePtr ptr = 0;
  GstBuffer* system = gst_buffer_new_allocate(nullptr, 4096, nullptr);
  EXPECT_FALSE(cipc_gst::in_pinned_memory(system, &ptr));
  gst_buffer_append_memory(system, gst_allocator_alloc(nullptr, 4096, nullptr));
  EXPECT_FALSE(cipc_gst::in_pinned_memory(system, &ptr));
  gst_buffer_unref(system);
  GstBuffer* empty = gst_buffer_new();
  EXPECT_FALSE(cipc_gst::in_pinned_memory(empty, &ptr));
  gst_buffer_unref(empty);
}

TEST_F(DebayerInputTest, InputModeFixesThePathExceptAutoWhichIsTimed) {
  cc::InputPath path = cc::InputPath::kUpload;
  EXPECT_TRUE(cipc_gst::fixed_input_path(GST_CIPC_INPUT_IN_PLACE, &path));
  EXPECT_EQ(path, cc::InputPath::kInPlace);
  EXPECT_TRUE(cipc_gst::fixed_input_path(GST_CIPC_INPUT_UPLOAD, &path));
  EXPECT_EQ(path, cc::InputPath::kUpload);
  EXPECT_FALSE(cipc_gst::fixed_input_path(GST_CIPC_INPUT_AUTO, &path));
}

TEST_F(DebayerInputTest, AFrameSmallerThanItsFormatIsAnErrorBeforeAnyGpuWork) {
  // 64 x 4 samples with a 256-byte offset: 256 + 3 * 128 + 128 bytes, one short.
  GstBuffer* b = buffer_with_meta(256 + 3 * 128 + 128 - 1, 64, 4, 256, 128);
  InputPlacement in;
  EXPECT_EQ(locate(b, 64, 4, GST_CIPC_INPUT_IN_PLACE, &in), GST_FLOW_ERROR);
  GQuark domain = 0;
  gint code = 0;
  EXPECT_EQ(posted_error(&domain, &code), "An input frame is smaller than its format says.");
  EXPECT_EQ(domain, GST_STREAM_ERROR);
  EXPECT_EQ(code, GST_STREAM_ERROR_FORMAT);
  EXPECT_EQ(in.ptr, 0u);
  EXPECT_EQ(input_.counters().copies.load(), 0u);
  EXPECT_EQ(input_.counters().path.load(), -1);
  gst_buffer_unref(b);
}

// ---- On a GPU -------------------------------------------------------------------------------

TEST_F(DebayerInputTest, SystemMemoryIsCopiedTightlyAndCounted) {
  SKIP_WITHOUT_GPU();
  start_on_gpu();
  const gint width = 61, height = 5;  // padded rows, behind an offset
  const size_t stride = 256, offset = 512;
  GstBuffer* b = buffer_with_meta(offset + stride * height, width, height, offset, stride);
  GstMapInfo map;
  ASSERT_TRUE(gst_buffer_map(b, &map, GST_MAP_WRITE));
  fill_rows(map.data + offset, width, height, stride);
  gst_buffer_unmap(b, &map);

  InputPlacement in;
  ASSERT_EQ(locate(b, width, height, GST_CIPC_INPUT_IN_PLACE, &in), GST_FLOW_OK) << posted_error();
  EXPECT_EQ(in.pitch, 2u * width);
  EXPECT_FALSE(in.uploaded);
  EXPECT_EQ(in.hold_on, nullptr);  // copied and waited for: upstream may reuse it now
  EXPECT_EQ(input_.counters().copies.load(), 1u);
  EXPECT_EQ(input_.counters().path.load(), -1);  // no pinned frame yet

  std::vector<guint8> back(2 * width * height), want(back.size());
  ASSERT_OK(cc::copy_2d_async(back.data(), 2 * width, cipc_test::as_ptr(in.ptr), in.pitch,
                              2 * width, height, stream_.handle()));
  ASSERT_OK(stream_.synchronize());
  fill_rows(want.data(), width, height, 2 * width);
  EXPECT_EQ(back, want);
  gst_buffer_unref(b);
}

class PinnedInput : public DebayerInputTest {
 protected:
  void SetUp() override {
    DebayerInputTest::SetUp();
    if (!cipc_test::cuda_missing_reason().empty()) return;
    start_on_gpu();
    GstAllocator* allocator = gst_cipc_pinned_allocator_new(0);
    buffer_ = gst_buffer_new_allocate(allocator, kStride * kHeight, nullptr);
    gst_object_unref(allocator);
    ASSERT_NE(buffer_, nullptr);
    GstMapInfo map;
    ASSERT_TRUE(gst_buffer_map(buffer_, &map, GST_MAP_WRITE));
    fill_rows(map.data, kWidth, kHeight, kStride);
    gst_buffer_unmap(buffer_, &map);
  }
  void TearDown() override {
    if (buffer_) {
      ASSERT_OK(stream_.synchronize());
      // The release worker lets go of held buffers once the GPU is done with them.
      for (int i = 0; i < 200 && GST_MINI_OBJECT_REFCOUNT_VALUE(buffer_) > 1; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      EXPECT_EQ(GST_MINI_OBJECT_REFCOUNT_VALUE(buffer_), 1) << "still held after the GPU read it";
      gst_buffer_unref(buffer_);
    }
    DebayerInputTest::TearDown();
  }

  static constexpr gint kWidth = 64, kHeight = 8;
  static constexpr size_t kStride = 2 * 64;  // GST_ROUND_UP_4 (64) samples
  GstBuffer* buffer_ = nullptr;
};

TEST_F(PinnedInput, InPlaceTheKernelReadsThePoolAndTheBufferIsHeldUntilThen) {
  SKIP_WITHOUT_GPU();
  cc::DevicePtr pinned = 0;
  ASSERT_TRUE(cipc_gst::in_pinned_memory(buffer_, &pinned));
  InputPlacement in;
  ASSERT_EQ(locate(buffer_, kWidth, kHeight, GST_CIPC_INPUT_IN_PLACE, &in), GST_FLOW_OK);
  EXPECT_EQ(in.ptr, pinned);
  EXPECT_EQ(in.pitch, kStride);
  EXPECT_EQ(in.hold_on, stream_.handle());
  EXPECT_FALSE(in.uploaded);
  EXPECT_EQ(input_.counters().path.load(), static_cast<int>(cc::InputPath::kInPlace));
  EXPECT_EQ(input_.counters().copies.load(), 0u);
  ASSERT_OK(input_.hold_until_read(buffer_, in));
  // Dropped by the release worker once the stream has passed this point (TearDown checks).
}

TEST_F(PinnedInput, UploadedByTheCopyEngineOnItsOwnStreamAndCounted) {
  SKIP_WITHOUT_GPU();
  InputPlacement in;
  ASSERT_EQ(locate(buffer_, kWidth, kHeight, GST_CIPC_INPUT_UPLOAD, &in), GST_FLOW_OK)
      << posted_error();
  EXPECT_TRUE(in.uploaded);
  EXPECT_NE(in.hold_on, nullptr);
  EXPECT_NE(in.hold_on, stream_.handle());  // the uploader's copy stream
  EXPECT_EQ(input_.counters().uploads.load(), 1u);
  EXPECT_EQ(input_.counters().path.load(), static_cast<int>(cc::InputPath::kUpload));
  ASSERT_OK(input_.kernel_queued(in));
  ASSERT_OK(input_.hold_until_read(buffer_, in));

  // The kernel's stream waits for the upload: what it reads is the frame.
  std::vector<guint8> back(kStride * kHeight), want(back.size());
  ASSERT_OK(cc::copy_2d_async(back.data(), kStride, cipc_test::as_ptr(in.ptr), in.pitch, kStride,
                              kHeight, stream_.handle()));
  ASSERT_OK(stream_.synchronize());
  fill_rows(want.data(), kWidth, kHeight, kStride);
  EXPECT_EQ(back, want);
}

TEST_F(PinnedInput, AutoTimesBothPathsOncePerSizeAndTakesTheFaster) {
  SKIP_WITHOUT_GPU();
  InputPlacement in;
  ASSERT_EQ(locate(buffer_, kWidth, kHeight, GST_CIPC_INPUT_AUTO, &in), GST_FLOW_OK)
      << posted_error();
  const double in_place_us = input_.counters().in_place_us.load();
  const double upload_us = input_.counters().upload_us.load();
  EXPECT_GT(in_place_us, 0);
  EXPECT_GT(upload_us, 0);
  const cc::InputPath faster = cc::InputPathTimes{in_place_us, upload_us}.faster();
  EXPECT_EQ(input_.counters().path.load(), static_cast<int>(faster));
  EXPECT_EQ(in.uploaded, faster == cc::InputPath::kUpload);
  ASSERT_OK(input_.kernel_queued(in));
  ASSERT_OK(input_.hold_until_read(buffer_, in));
  // The same size again is not timed again.
  ASSERT_EQ(locate(buffer_, kWidth, kHeight, GST_CIPC_INPUT_AUTO, &in), GST_FLOW_OK);
  EXPECT_EQ(input_.counters().in_place_us.load(), in_place_us);
  EXPECT_EQ(input_.counters().upload_us.load(), upload_us);
  ASSERT_OK(input_.kernel_queued(in));
  ASSERT_OK(input_.hold_until_read(buffer_, in));
}

}  // namespace
