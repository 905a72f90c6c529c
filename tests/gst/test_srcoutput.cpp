// SPDX-License-Identifier: LGPL-2.1-or-later
// cudasrc-ipc's outputs (gst/ipcsrc/srcoutput, srccudamemoryoutput): which one the negotiated
// caps, the producer's memory and io-mode choose.
#include <gst/gst.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>

#include <atomic>

#include "ipcsrc/srcnegotiation.h"
#include "ipcsrc/srcoutput.h"
#ifdef CIPC_HAVE_GST_CUDA
#include "common/gstcudainterop.h"
#include "ipcsrc/srccudamemoryoutput.h"
#endif
#include "glue_fixture.h"

namespace {

using namespace cipc_test;

// Issue 26, item 5: cudasrc-ipc's outputs are classes behind one interface; which one the
// negotiated caps ask for is a table, checked here row by row.
TEST_F(Glue, SourceOutputFollowsProducerMemoryCapsAndIoMode) {
  using cipc_gst::SrcOutputKind;
  struct Row {
    bool producer_cuda, caps_cuda_ipc, caps_gst_cuda, io_copy;
    SrcOutputKind expected;
    bool can_wrap = false;  // GStreamer >= 1.24 and the slots' own context
    bool caps_gl = false;   // memory:GLMemory
  };
  const Row rows[] = {
      // A host producer's slots go downstream as they are, whatever the caps or io-mode.
      {false, false, false, false, SrcOutputKind::kShared},
      {false, false, false, true, SrcOutputKind::kShared},
      {false, true, false, true, SrcOutputKind::kShared},
      // A CUDA producer: our memory (the slot, or io-mode=copy's private copy) ...
      {true, true, false, false, SrcOutputKind::kShared},
      {true, true, false, true, SrcOutputKind::kCopy},
      // ... GStreamer's CUDA memory: one device copy where GstCudaMemory cannot wrap the slot
      // (before 1.24, or another context), else the slot wrapped unless io-mode=copy asks for
      // the slot back at once ...
      {true, false, true, false, SrcOutputKind::kGstCuda},
      {true, false, true, true, SrcOutputKind::kGstCuda},
      {true, false, true, false, SrcOutputKind::kGstCudaWrapped, true},
      {true, false, true, true, SrcOutputKind::kGstCuda, true},
      // (a host producer's slots are never wrapped)
      {false, false, true, false, SrcOutputKind::kShared, true},
      // ... GL memory: one copy into a texture, with or without io-mode=copy (a host
      // producer's frames reach GL through glupload, as system memory) ...
      {true, false, false, false, SrcOutputKind::kGl, false, true},
      {true, false, false, true, SrcOutputKind::kGl, false, true},
      {false, false, false, false, SrcOutputKind::kShared, false, true},
      // ... or system memory (one download).
      {true, false, false, false, SrcOutputKind::kDownload},
      {true, false, false, true, SrcOutputKind::kDownload},
  };
  for (const Row& r : rows) {
    cipc_gst::SrcOutputRequest request;
    request.producer_cuda = r.producer_cuda;
    request.caps_cuda_ipc = r.caps_cuda_ipc;
    request.caps_gst_cuda = r.caps_gst_cuda;
    request.io_mode_copy = r.io_copy;
    request.gst_cuda_can_wrap = r.can_wrap;
    request.caps_gl = r.caps_gl;
    const SrcOutputKind kind = cipc_gst::choose_src_output(request);
    EXPECT_EQ(kind, r.expected) << "producer_cuda " << r.producer_cuda << " cuda-ipc caps "
                                << r.caps_cuda_ipc << " gst-cuda caps " << r.caps_gst_cuda
                                << " io-mode=copy " << r.io_copy << " can wrap " << r.can_wrap
                                << " gl caps " << r.caps_gl << ": " << cipc_gst::describe(kind);
  }
  // Every build makes the shared output; the CUDA ones only a CUDA build (their frames, and
  // the shared output's, are checked end to end: tests/e2e, tests/gpu).
  GstVideoInfo vinfo = info("video/x-raw,format=NV12,width=64,height=48");
  cipc_gst::SrcCudaSide cuda;
  std::atomic<guint64> downloads{0}, device_copies{0};
  auto shared =
      cipc_gst::make_src_output(SrcOutputKind::kShared, vinfo, &cuda, {&downloads, &device_copies});
  ASSERT_TRUE(shared);
  EXPECT_EQ(shared->kind(), SrcOutputKind::kShared);
#ifndef CIPC_HAVE_CUDA
  EXPECT_FALSE(cipc_gst::make_src_output(SrcOutputKind::kDownload, vinfo, &cuda,
                                         {&downloads, &device_copies}));
#endif

  // The wrapped output needs a GStreamer CUDA context: without one it is not made (the element
  // then copies).
  EXPECT_FALSE(cipc_gst::make_src_output(SrcOutputKind::kGstCudaWrapped, vinfo, &cuda,
                                         {&downloads, &device_copies}, nullptr));
}

#ifdef CIPC_HAVE_GST_CUDA
// Issue 29: GstCudaMemory describes memory as one pitch (its first plane's stride) over
// size / pitch rows. A layout it cannot describe is copied instead of wrapped.
TEST_F(Glue, WrappedGstCudaMemoryTakesOnlyLayoutsWithOnePitch) {
  GstVideoInfo nv12 = info("video/x-raw,format=NV12,width=64,height=48");
  nv12.stride[0] = nv12.stride[1] = 128;  // a slot's pitch, wider than the rows
  nv12.offset[1] = 128 * 48;
  nv12.size = 128 * 72;
  EXPECT_TRUE(cipc_gst::gst_cuda_memory_can_describe(nv12));
  GstVideoInfo uneven = nv12;
  uneven.stride[1] = 64;  // the chroma plane packed tighter than the luma plane
  EXPECT_FALSE(cipc_gst::gst_cuda_memory_can_describe(uneven));
  GstVideoInfo narrow = info("video/x-raw,format=BGRA,width=64,height=48");
  EXPECT_TRUE(cipc_gst::gst_cuda_memory_can_describe(narrow));
  narrow.stride[0] = 128;  // a pitch shorter than a row of 64 BGRA pixels (256 bytes)
  EXPECT_FALSE(cipc_gst::gst_cuda_memory_can_describe(narrow));
  // I420's chroma stride is half the luma's: one contiguous block when rows have no padding...
  GstVideoInfo i420 = info("video/x-raw,format=I420,width=64,height=48");
  EXPECT_TRUE(cipc_gst::gst_cuda_memory_can_describe(i420));
  // ...but not with a padded pitch: CPU mappings would miss chroma rows.
  i420.stride[0] = 128;
  i420.stride[1] = i420.stride[2] = 64;
  i420.offset[1] = 128 * 48;
  i420.offset[2] = i420.offset[1] + 64 * 24;
  i420.size = i420.offset[2] + 64 * 24;
  EXPECT_FALSE(cipc_gst::gst_cuda_memory_can_describe(i420));
}
#endif

}  // namespace
