// SPDX-License-Identifier: LGPL-2.1-or-later
// CUDA memory across real processes: producers and consumers are separate cudaipc-cuda-peer
// processes (cuda_peer.cpp: cudasink-ipc fed by a GPU writer, cudasrc-ipc read on the GPU) around
// the built plugin. This binary starts them, reads their stdout (READY, FRAME k, EOS, ERROR,
// STATS) and checks docs/architecture.md's memory, synchronisation and failure rules from the
// outside: frames arrive bit-exact
// (GPU checksums on both sides, spot-checked against the CPU reference of the pattern), each slot
// is imported once, nothing is copied on the way, killed peers leave the other side working and
// leak no GPU memory, and a wrong device id is a clear error.
//
// Needs a CUDA device: without one every test is skipped, saying why. Environment:
// CUDAIPC_CUDA_PEER (the peer binary) and GST_PLUGIN_PATH (the plugin's build folder) are set by
// meson; without them the peer is taken from this executable's folder and the plugin from ../../gst
// next to it. Each test gets its own temporary folder for sockets, records and a GStreamer
// registry.
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cuda_api.h"
#include "mps_expectation.h"
#include "nvidia_smi.h"
#include "peer_fixture.h"
#include "process.h"
#include "test_pattern.h"

namespace {

using cipc_test::Clock;
using cipc_test::contains;
using cipc_test::flag_of;
using cipc_test::PeerFixture;
using cipc_test::Process;
using cipc_test::self_dir;
using cipc_test::stat_of;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Generous: a child's start includes building the GStreamer registry and initialising CUDA.
constexpr auto kStartTimeout = cipc_test::kPeerStartTimeout;
constexpr auto kEventTimeout = seconds(30);
constexpr auto kExitTimeout = seconds(30);
constexpr auto kRunTimeout = seconds(240);  // a whole finite run of a few hundred frames

// ---------------------------------------------------------------------------------------------
// Records: `index checksum` per frame (cuda_peer.cpp --record), checksums computed on the GPU.

struct Record {
  uint64_t index = 0;
  uint64_t checksum = 0;
};

std::vector<Record> read_records(const std::string& path) {
  std::vector<Record> records;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    Record r;
    if (s >> r.index >> r.checksum) records.push_back(r);
  }
  return records;
}

// The checksum of frame `index` as the producer's pattern kernel writes it, computed on the CPU
// by the CUDA layer's reference implementations (independent of both peers' GPU code).
uint64_t expected_checksum(int width, int height, uint64_t index) {
  const size_t row_bytes = size_t(width) * 4;  // BGRA
  std::vector<uint8_t> image(row_bytes * size_t(height));
  cipc_cuda::fill_pattern_cpu(image.data(), row_bytes, row_bytes, size_t(height), uint32_t(index));
  return cipc_cuda::image_checksum_cpu(image.data(), row_bytes, row_bytes, size_t(height));
}

// Every received frame is the producer's frame of that index, by the CPU reference.
void expect_frames_match_reference(const std::vector<Record>& records, int width, int height,
                                   const std::string& who) {
  size_t mismatches = 0;
  for (const Record& r : records) {
    const uint64_t want = expected_checksum(width, height, r.index);
    if (r.checksum != want && ++mismatches <= 5)
      ADD_FAILURE() << who << " frame " << r.index << ": checksum " << r.checksum
                    << ", the pattern for that frame has " << want;
  }
  EXPECT_EQ(mismatches, 0u) << who << ": frames that differ from the reference";
}

// Producer and consumer records of one finite run: `frames` lines each, indices 0..frames-1 in
// order, equal checksums for equal indices; a few frames also against the CPU reference.
void expect_bit_exact(const std::vector<Record>& produced, const std::vector<Record>& received,
                      size_t frames, int width, int height) {
  ASSERT_EQ(produced.size(), frames) << "producer record lines";
  ASSERT_EQ(received.size(), frames) << "consumer record lines";
  size_t mismatches = 0;
  for (size_t i = 0; i < frames; ++i) {
    const Record& p = produced[i];
    const Record& r = received[i];
    if (p.index != i || r.index != i || p.checksum != r.checksum) {
      if (++mismatches <= 5)
        ADD_FAILURE() << "line " << i << ": produced frame " << p.index << " checksum "
                      << p.checksum << ", received frame " << r.index << " checksum " << r.checksum;
    }
  }
  EXPECT_EQ(mismatches, 0u) << "frames that differ between producer and consumer";
  // The frames really differ from each other, so equal checksums mean something...
  size_t distinct = 0;
  for (size_t i = 1; i < frames; ++i) distinct += produced[i].checksum != produced[i - 1].checksum;
  EXPECT_EQ(distinct + 1, frames) << "pattern frames should all differ";
  // ...and both GPU checksums are the pattern itself, not the same garbage on both sides.
  std::vector<Record> sample;
  for (size_t i : {size_t(0), size_t(1), frames / 2, frames - 1}) sample.push_back(received[i]);
  expect_frames_match_reference(sample, width, height, "consumer");
}

// ---------------------------------------------------------------------------------------------

class GpuTwoProcess : public PeerFixture {
 protected:
  void SetUp() override {
    std::string why;
    if (cipc_cuda::device_count(&why) == 0) GTEST_SKIP() << "no CUDA device: " << why;
    init_peers("CUDAIPC_CUDA_PEER", "cudaipc-cuda-peer", "cudaipc-gpu",
               {kStartTimeout, kExitTimeout});
  }

  // One producer and one consumer over `frames` unpaced frames of width x height, both recording
  // GPU checksums; checks both exit cleanly, the records match, and what docs/architecture.md says
  // about the slots (none copied by the sink, each imported once). Returns the two STATS lines.
  // `max_imports`: the producer's slots (8), or more where upstream's pool grows. `downloads`:
  // the consumer's device-to-host copies (none, unless it was asked for system memory).
  std::pair<std::string, std::string> run_bit_exact(int width, int height, size_t frames,
                                                    const std::vector<std::string>& producer_extra,
                                                    const std::vector<std::string>& consumer_extra,
                                                    uint64_t producer_copies = 0,
                                                    std::string* consumer_transcript = nullptr,
                                                    uint64_t max_imports = 8,
                                                    uint64_t downloads = 0) {
    const std::string sock = path("bitexact.sock");
    const std::string n = std::to_string(frames);
    std::vector<std::string> pargs{"--socket", sock,
                                   "--frames", n,
                                   "--width",  std::to_string(width),
                                   "--height", std::to_string(height),
                                   "--record", path("produced.txt")};
    pargs.insert(pargs.end(), producer_extra.begin(), producer_extra.end());
    Process& prod = producer("producer", pargs);
    std::vector<std::string> cargs{"--socket", sock, "--frames", n, "--timeout-s", "180"};
    cargs.insert(cargs.end(), {"--record", path("received.txt")});
    cargs.insert(cargs.end(), consumer_extra.begin(), consumer_extra.end());
    Process& cons = consumer("consumer", cargs);
    EXPECT_EQ(cons.wait_exit(kRunTimeout), std::optional<int>(0)) << "consumer";
    EXPECT_EQ(prod.wait_exit(kRunTimeout), std::optional<int>(0)) << "producer";
    EXPECT_EQ(cons.count("ERROR"), 0u);
    EXPECT_EQ(prod.count("ERROR"), 0u);
    EXPECT_EQ(cons.frames(), frames);

    const std::string pstats = prod.last("STATS ").value_or("");
    EXPECT_EQ(stat_of(pstats, "frames-rendered"), frames) << pstats;
    EXPECT_EQ(stat_of(pstats, "copies"), producer_copies)
        << (producer_copies ? "one copy into a slot per frame: "
                            : "the writer filled the slots directly: ")
        << pstats;
    EXPECT_EQ(stat_of(pstats, "frames-dropped"), 0u) << pstats;
    const std::string cstats = cons.last("STATS ").value_or("");
    EXPECT_EQ(stat_of(cstats, "frames-received"), frames) << cstats;
    EXPECT_EQ(stat_of(cstats, "downloads"), downloads)
        << (downloads ? "one download per frame: " : "frames stayed in GPU memory: ") << cstats;
    const uint64_t imported = stat_of(cstats, "slots-imported").value_or(0);
    EXPECT_GE(imported, 1u) << cstats;
    EXPECT_LE(imported, max_imports) << "each of the producer's slots is imported once: " << cstats;

    expect_bit_exact(read_records(path("produced.txt")), read_records(path("received.txt")), frames,
                     width, height);
    if (consumer_transcript) *consumer_transcript = cons.transcript();
    return {pstats, cstats};
  }

  // GPU memory in use after the last of `cycles` cycles is within 64 MiB of what it was after
  // cycle 5 (nvidia-smi's readings). No reading is a failure: a leak check that cannot look has
  // not passed.
  static void expect_gpu_memory_flat(std::optional<uint64_t> at_5, std::optional<uint64_t> at_last,
                                     int cycles) {
    ASSERT_TRUE(at_5 && at_last) << "nvidia-smi gave no reading of GPU memory in use: the leak "
                                    "check could not look";
    std::cout << "[   NOTE   ] GPU memory used: " << *at_5 << " MiB after cycle 5, " << *at_last
              << " MiB after cycle " << cycles << "\n";
    EXPECT_LT(*at_last, *at_5 + 64) << "GPU memory grew by " << (*at_last - *at_5) << " MiB";
  }

  // A consumer that tries to write into the frames it gets (cuda_peer.cpp --vandal `how`) joins;
  // its write must be refused and end it alone, never reaching the producer's memory.
  void expect_vandal_refused(const std::string& sock, const std::string& how) {
    Process& vandal = consumer(
        "vandal", {"--socket", sock, "--frames", "0", "--vandal", how, "--timeout-s", "60"});
    EXPECT_EQ(vandal.wait_exit(seconds(60)), std::optional<int>(2)) << vandal.transcript();
    EXPECT_EQ(vandal.count("VANDALISED"), 0u) << "a consumer wrote into the producer's frame";
    const auto why = vandal.first("ERROR");
    ASSERT_TRUE(why) << vandal.transcript();
    EXPECT_TRUE(contains(*why, "vandal write failed")) << *why;
  }

  // A consumer holding frames sees its producer SIGKILLed: EOS within 10 s, every frame it got
  // (the held ones too) equal to the CPU reference.
  void expect_killed_producer_leaves_held_frames_valid(
      const std::vector<std::string>& producer_extra);

  // The consumer attached all along still gets frames; both then stop cleanly, no claim left.
  void expect_good_consumer_goes_on(Process& good, Process& prod) {
    const size_t good_frames = good.frames();
    EXPECT_TRUE(good.wait_frames(good_frames + 30, kEventTimeout)) << "the good consumer stopped";
    EXPECT_EQ(good.count("ERROR"), 0u) << good.transcript();
    good.signal(SIGINT);
    EXPECT_EQ(good.wait_exit(kExitTimeout), std::optional<int>(0));
    const std::string pstats = stop_producer(prod);
    EXPECT_EQ(stat_of(pstats, "claims-outstanding"), 0u) << pstats;
  }
};

// Memory and synchronisation (docs/architecture.md): a GPU writer fills cudasink-ipc's slots, the
// consumer imports each slot once and waits for readiness on the GPU; 600 frames arrive in order
// and bit-exact.
TEST_F(GpuTwoProcess, FramesArriveBitExact1080p) {
  const auto stats = run_bit_exact(1920, 1080, 600, {}, {});
  EXPECT_EQ(stat_of(stats.second, "device-copies"), 0u) << stats.second;
}

// Both elements say in their stats whether their CUDA context is an MPS client: true under
// run-on-gpu's mps step (CIPC_EXPECT_MPS=1), false without a daemon. Frames stay bit-exact either
// way.
TEST_F(GpuTwoProcess, StatsSayWhetherBothSidesRunAsMpsClients) {
  const bool mps = cipc_test::mps_expected();
  const auto stats = run_bit_exact(1280, 720, 120, {}, {});
  EXPECT_EQ(flag_of(stats.first, "cuda-mps"), std::optional<bool>(mps)) << stats.first;
  EXPECT_EQ(flag_of(stats.second, "cuda-mps"), std::optional<bool>(mps)) << stats.second;
}

TEST_F(GpuTwoProcess, FramesArriveBitExact4K) {
  const auto stats = run_bit_exact(3840, 2160, 600, {}, {});
  EXPECT_EQ(stat_of(stats.second, "device-copies"), 0u) << stats.second;
}

// io-mode=copy: the consumer hands downstream a private device copy of every frame (and releases
// the slot right after the copy); the copies are bit-exact too.
TEST_F(GpuTwoProcess, CopyModeIsBitExactAndReleasesAtOnce) {
  const auto stats = run_bit_exact(1920, 1080, 600, {}, {"--io-mode", "copy"});
  EXPECT_EQ(stat_of(stats.second, "device-copies"), 600u) << stats.second;
}

// Issue 27: frames born in system memory cross in CUDA memory with one upload each. Into the
// pinned pool cudasink-ipc offers, the upload is asynchronous (no pageable upload counted); the
// pool's buffers come back to the writer only once their upload has read them, or later frames
// would overwrite earlier ones before they crossed.
TEST_F(GpuTwoProcess, FramesWrittenIntoTheOfferedPinnedPoolUploadBitExact) {
  const auto stats = run_bit_exact(1920, 1080, 300, {"--source", "sysmem-pool"}, {}, 300);
  EXPECT_EQ(stat_of(stats.first, "pageable-uploads"), 0u) << stats.first;
  EXPECT_EQ(stat_of(stats.first, "pageable-upload-ns"), 0u) << stats.first;
  EXPECT_EQ(stat_of(stats.first, "device-copies"), 0u) << stats.first;
}

// Upstream's own pageable buffers: still exact, and every such upload is counted, with the
// streaming thread's time in it: no bus moves 8 MB in 40 us, so less would be a wrong clock.
TEST_F(GpuTwoProcess, FramesInPageableMemoryUploadBitExactAndAreCounted) {
  const auto stats = run_bit_exact(1920, 1080, 300, {"--source", "sysmem"}, {}, 300);
  EXPECT_EQ(stat_of(stats.first, "pageable-uploads"), 300u) << stats.first;
  EXPECT_GE(stat_of(stats.first, "pageable-upload-ns"), 300u * 40'000u) << stats.first;
}

// GStreamer's cudaupload writes GstCudaMemory. From GStreamer 1.24 it writes into the exportable
// pool cudasink-ipc proposes, and each frame crosses by reference (issue 29: no device copy of
// ours, gst-cuda-frames-shared); before 1.24 it is copied once on the GPU (device-copies), after
// whatever its stream still writes. Its pool grows while consumers hold frames: each of its
// buffers is imported once.
TEST_F(GpuTwoProcess, CudauploadFramesCrossByReferenceFrom124AndAreCopiedOnceBefore) {
  const bool exports = CIPC_TEST_GST_CUDA_EXPORTS;
  const uint64_t copies = exports ? 0 : 300;
  const auto stats =
      run_bit_exact(1920, 1080, 300, {"--source", "cudaupload"}, {}, copies, nullptr, 24);
  EXPECT_EQ(stat_of(stats.first, "device-copies"), copies) << stats.first;
  EXPECT_EQ(stat_of(stats.first, "gst-cuda-frames-shared"), 300 - copies) << stats.first;
  EXPECT_EQ(stat_of(stats.first, "pageable-uploads"), 0u) << stats.first;
}

// The same with sync-mode=cpu: the producer waits for cudaupload's stream before each send.
TEST_F(GpuTwoProcess, CudauploadFramesCrossBitExactWithCpuSync) {
  const bool exports = CIPC_TEST_GST_CUDA_EXPORTS;
  const uint64_t copies = exports ? 0 : 120;
  const auto stats = run_bit_exact(1280, 720, 120, {"--source", "cudaupload", "--sync-mode", "cpu"},
                                   {}, copies, nullptr, 24);
  EXPECT_EQ(stat_of(stats.first, "gst-cuda-frames-shared"), 120 - copies) << stats.first;
}

// Issue 29, both directions at once: cudaupload's exportable memory crosses by reference and the
// consumer hands it downstream wrapped as GstCudaMemory - no device copy on either side.
TEST_F(GpuTwoProcess, CudauploadIntoGstCudaMemoryDownstreamCopiesNothingFrom124) {
#if !CIPC_TEST_GST_CUDA
  GTEST_SKIP() << "built without GStreamer's CUDA library: no memory:CUDAMemory output";
#endif
  const bool exports = CIPC_TEST_GST_CUDA_EXPORTS;
  const auto stats = run_bit_exact(1920, 1080, 300, {"--source", "cudaupload"},
                                   {"--transport", "gst-cuda"}, exports ? 0 : 300, nullptr, 24);
  EXPECT_EQ(stat_of(stats.first, "device-copies"), exports ? 0u : 300u) << stats.first;
  EXPECT_EQ(stat_of(stats.second, "device-copies"), exports ? 0u : 300u) << stats.second;
}

// Issue 29: GStreamer's CUDA memory downstream (memory:CUDAMemory, as nvcodec elements take it).
// From GStreamer 1.24 the consumer hands on the producer's slot itself, wrapped as read-only
// GstCudaMemory: no device copy of ours, every frame bit-exact, and each wrapped frame's claim
// goes back once the memory is freed (600 unpaced frames through the producer's 8 slots). Before
// 1.24 GstCudaMemory cannot wrap foreign memory: one device copy per frame.
TEST_F(GpuTwoProcess, GstCudaMemoryDownstreamGetsTheSlotWrappedFromGstreamer124) {
#if !CIPC_TEST_GST_CUDA
  GTEST_SKIP() << "built without GStreamer's CUDA library: no memory:CUDAMemory output";
#endif
  const bool wraps = CIPC_TEST_GST_CUDA_WRAPS;
  std::string transcript;
  const auto stats =
      run_bit_exact(1920, 1080, 600, {}, {"--transport", "gst-cuda"}, 0, &transcript);
  EXPECT_EQ(stat_of(stats.second, "device-copies"), wraps ? 0u : 600u) << stats.second;
  EXPECT_TRUE(contains(transcript, wraps ? "GSTCUDA readonly=1" : "GSTCUDA readonly=0"))
      << (wraps ? "a wrapped slot must be read-only: " : "a pool buffer is writable: ")
      << transcript.substr(0, 2000);
}

// Issue 26: a CUDA producer's frames reach GL memory (as glimagesink takes them) by one copy on
// the GPU into each texture, never through the CPU: the consumer reads the textures back with
// gldownload and checksums them, every frame must equal the producer's, and cudasrc-ipc counts
// one device copy and no download per frame. Headless GPU machines give GL through EGL on the
// device (tests/gpu/run-on-gpu sets GST_GL_WINDOW=egl-device GST_GL_PLATFORM=egl).
TEST_F(GpuTwoProcess, GlMemoryDownstreamGetsEachFrameCopiedOnTheGpuBitExact) {
#if !CIPC_TEST_GST_GL
  GTEST_SKIP() << "built without GStreamer's GL library: no memory:GLMemory output";
#endif
  if (!std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY") && !std::getenv("GST_GL_PLATFORM"))
    GTEST_SKIP() << "no display and no GST_GL_PLATFORM: GL has nothing to run on here";
  std::string transcript;
  const auto stats = run_bit_exact(1920, 1080, 300, {}, {"--transport", "gl"}, 0, &transcript);
  EXPECT_EQ(stat_of(stats.second, "device-copies"), 300u) << stats.second;
  EXPECT_EQ(stat_of(stats.second, "downloads"), 0u) << stats.second;
  EXPECT_FALSE(contains(transcript, "ERROR")) << transcript.substr(0, 3000);
}

// gl-import=memory-object: the producer's slots imported into GL (GL_EXT_memory_object_fd), GL
// copies each frame into the texture: no CUDA copy at all, no download, every frame the
// producer's, 4K included (the row length and the offset into the slot reach GL right). At
// 1080p the consumer may hold one frame only: a claim waiting for GL's fence must go back
// without a next frame to trigger it, or the producer would wait for ever.
TEST_F(GpuTwoProcess, GlMemoryObjectImportGivesEachFrameWithNoCudaCopyBitExact) {
#if !CIPC_TEST_GST_GL
  GTEST_SKIP() << "built without GStreamer's GL library: no memory:GLMemory output";
#endif
  if (!std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY") && !std::getenv("GST_GL_PLATFORM"))
    GTEST_SKIP() << "no display and no GST_GL_PLATFORM: GL has nothing to run on here";
  for (const auto& size : {std::pair<int, int>{1920, 1080}, {3840, 2160}}) {
    SCOPED_TRACE(std::to_string(size.first) + "x" + std::to_string(size.second));
    std::string transcript;
    const uint64_t in_flight = size.first == 1920 ? 1 : 4;
    const auto stats = run_bit_exact(size.first, size.second, 300, {},
                                     {"--transport", "gl", "--gl-import", "memory-object",
                                      "--max-in-flight", std::to_string(in_flight)},
                                     0, &transcript);
    EXPECT_EQ(stat_of(stats.second, "gl-copies"), 300u) << stats.second;
    EXPECT_EQ(stat_of(stats.second, "device-copies"), 0u) << stats.second;
    EXPECT_EQ(stat_of(stats.second, "downloads"), 0u) << stats.second;
    // The producer reads its stats right after its last frame: every claim but the last few
    // (those GL may still be reading) has come back, and none is unaccounted for.
    const auto outstanding = stat_of(stats.first, "claims-outstanding");
    const auto releases = stat_of(stats.first, "releases");
    ASSERT_TRUE(outstanding && releases) << stats.first;
    EXPECT_LE(*outstanding, in_flight) << stats.first;
    EXPECT_EQ(*releases + *outstanding, 300u) << stats.first;
    EXPECT_FALSE(contains(transcript, "ERROR")) << transcript.substr(0, 3000);
    if (HasFailure()) break;
  }
}

// Issue 43, item 11: a consumer whose frames go into GL textures, evicted mid-stream (stopped
// with SIGSTOP past the producer's 2 s release-timeout), says why once it runs again, ends its
// stream (reconnect=false: a warning naming release-timeout, then EOS) and reaches NULL within
// seconds, for each way into GL; the producer keeps serving and, once the consumer is gone, has
// every claim back.
TEST_F(GpuTwoProcess, GlOutputConsumerEvictedMidStreamStopsWithinSeconds) {
#if !CIPC_TEST_GST_GL
  GTEST_SKIP() << "built without GStreamer's GL library: no memory:GLMemory output";
#endif
  if (!std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY") && !std::getenv("GST_GL_PLATFORM"))
    GTEST_SKIP() << "no display and no GST_GL_PLATFORM: GL has nothing to run on here";
  for (const std::string way : {"cuda-interop", "memory-object"}) {
    SCOPED_TRACE(way);
    const std::string sock = path("evict-" + way + ".sock");
    Process& prod = producer("producer-" + way, {"--socket", sock, "--frames", "0", "--fps", "60"});
    Process& cons = consumer(
        "consumer-" + way, {"--socket", sock, "--frames", "0", "--width", "1920", "--height",
                            "1080", "--transport", "gl", "--gl-import", way, "--timeout-s", "120"});
    ASSERT_TRUE(cons.wait_frames(30, kEventTimeout)) << cons.transcript();
    cons.signal(SIGSTOP);
    std::this_thread::sleep_for(milliseconds(3500));  // release-timeout (2 s) and a margin
    cons.signal(SIGCONT);
    const auto resumed = Clock::now();
    const auto code = cons.wait_exit(seconds(10));
    ASSERT_TRUE(code) << "the evicted GL consumer still runs 10 s after it resumed\n"
                      << cons.transcript();
    EXPECT_EQ(*code, 0) << cons.transcript();
    const auto why = cons.first("WARNING");
    EXPECT_TRUE(why && contains(*why, "release-timeout")) << cons.transcript();
    EXPECT_TRUE(cons.last("EOS")) << cons.transcript();
    EXPECT_EQ(cons.count("ERROR"), 0u) << cons.transcript();
    std::cout << "[   NOTE   ] " << way << ": the evicted consumer exited "
              << std::chrono::duration_cast<milliseconds>(Clock::now() - resumed).count()
              << " ms after it resumed\n";
    Process& next =
        consumer("next-" + way, {"--socket", sock, "--frames", "30", "--timeout-s", "60"});
    EXPECT_EQ(next.wait_exit(seconds(60)), std::optional<int>(0)) << next.transcript();
    std::this_thread::sleep_for(milliseconds(500));
    const std::string final_stats = stop_producer(prod);
    EXPECT_EQ(stat_of(final_stats, "claims-outstanding"), 0u) << final_stats;
    EXPECT_GE(stat_of(final_stats, "consumers-timed-out").value_or(0), 1u) << final_stats;
  }
}

// GL that is not on the producer's GPU (a display on another GPU; here Mesa's software GL, set
// up by tests/gpu/run-on-gpu gl-elsewhere, which sets CIPC_TEST_GL_ELSEWHERE=1): `auto` warns
// once and fills the textures through system memory, every frame still the producer's;
// `cuda-interop` stops with an error saying GL and CUDA must share a GPU; `memory-object` stops
// before GL is handed a descriptor it cannot map, naming GL's device and the producer's GPU.
// The producer goes on serving throughout and gets every claim back.
TEST_F(GpuTwoProcess, GlNotOnTheProducersGpuFallsBackOrStopsNamingIt) {
#if !CIPC_TEST_GST_GL
  GTEST_SKIP() << "built without GStreamer's GL library: no memory:GLMemory output";
#endif
  if (!std::getenv("CIPC_TEST_GL_ELSEWHERE"))
    GTEST_SKIP() << "needs a GL on another device than CUDA's (tests/gpu/run-on-gpu gl-elsewhere)";
  std::string transcript;
  const auto stats = run_bit_exact(1280, 720, 120, {}, {"--transport", "gl", "--gl-import", "auto"},
                                   0, &transcript, 8, /*downloads=*/120);
  EXPECT_EQ(stat_of(stats.second, "device-copies"), 0u) << stats.second;
  size_t warnings = 0;
  for (size_t at = transcript.find("\n  WARNING "); at != std::string::npos;
       at = transcript.find("\n  WARNING ", at + 1)) {
    ++warnings;
    EXPECT_TRUE(contains(transcript.substr(at, 300), "system memory"))
        << transcript.substr(at, 300);
  }
  EXPECT_EQ(warnings, 1u) << "auto warns once: " << transcript.substr(0, 3000);

  const std::string sock = path("gl-elsewhere.sock");
  Process& prod = producer("producer", {"--socket", sock, "--frames", "0", "--fps", "120"});
  const std::pair<const char*, const char*> ways[] = {
      {"cuda-interop", "GL and CUDA must run on the same GPU"},
      {"memory-object", "not on the producer's GPU"}};
  for (const auto& [way, cause] : ways) {
    SCOPED_TRACE(way);
    Process& refused =
        consumer(std::string("refused-") + way, {"--socket", sock, "--frames", "0", "--transport",
                                                 "gl", "--gl-import", way, "--timeout-s", "60"});
    EXPECT_EQ(refused.wait_exit(kExitTimeout), std::optional<int>(2)) << refused.transcript();
    const auto why = refused.first("ERROR");
    ASSERT_TRUE(why) << refused.transcript();
    EXPECT_TRUE(contains(*why, cause)) << *why;
  }
  const std::string pstats = stop_producer(prod);
  EXPECT_EQ(stat_of(pstats, "claims-outstanding"), 0u) << pstats;
}

// Issue 29: consumers SIGKILLed while they hold frames as GstCudaMemory (wrapped slots from 1.24):
// the producer reclaims every claim and keeps streaming, GPU memory in use is flat from cycle 5
// to cycle 50 (the producer stays up throughout), and a last consumer gets exact frames.
TEST_F(GpuTwoProcess, ConsumersKilledHoldingGstCudaMemoryLeakNothing) {
#if !CIPC_TEST_GST_CUDA
  GTEST_SKIP() << "built without GStreamer's CUDA library: no memory:CUDAMemory output";
#endif
  const std::string sock = path("gstcuda-kill.sock");
  Process& prod = producer("producer", {"--socket", sock, "--frames", "0", "--fps", "120"});
  constexpr int kCycles = 50;
  std::optional<uint64_t> used_at_5, used_at_50;
  for (int cycle = 1; cycle <= kCycles && !HasFailure(); ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    Process& held = consumer("held-" + std::to_string(cycle),
                             {"--socket", sock, "--frames", "0", "--transport", "gst-cuda",
                              "--hold-ms", "20", "--timeout-s", "60"});
    ASSERT_TRUE(held.wait_frames(5, kEventTimeout)) << held.transcript();
    held.signal(SIGKILL);
    EXPECT_EQ(held.wait_exit(kExitTimeout), std::optional<int>(128 + SIGKILL));
    if (cycle == 5 || cycle == kCycles)
      (cycle == 5 ? used_at_5 : used_at_50) = cipc_test::gpu_memory_used_mib();
  }
  Process& last = consumer("last", {"--socket", sock, "--frames", "60", "--transport", "gst-cuda",
                                    "--record", path("last.txt"), "--timeout-s", "60"});
  EXPECT_EQ(last.wait_exit(seconds(90)), std::optional<int>(0)) << last.transcript();
  const auto records = read_records(path("last.txt"));
  EXPECT_EQ(records.size(), 60u);
  expect_frames_match_reference(records, 1920, 1080, "last consumer");
  std::this_thread::sleep_for(milliseconds(500));
  const std::string pstats = stop_producer(prod);
  EXPECT_EQ(stat_of(pstats, "claims-outstanding"), 0u) << pstats;
  EXPECT_GE(stat_of(pstats, "consumers-total").value_or(0), uint64_t(kCycles + 1)) << pstats;
  expect_gpu_memory_flat(used_at_5, used_at_50, kCycles);
}

// Issue 27: one producer, many consumers in CUDA memory. The writer bounds the pool it takes
// slots from (--pool-size); the producer grants each consumer what is left of it, so the writer
// never waits on frames consumers legitimately hold. Paced 60 fps, every consumer gets every
// frame (backpressure: the writer is not live), in order and bit-exact.
class GpuFanOut : public GpuTwoProcess {
 protected:
  void run_fan_out(int consumers, int pool_size, size_t frames) {
    const std::string sock = path("fanout.sock");
    const std::string n = std::to_string(frames);
    Process& prod = producer(
        "producer", {"--socket", sock, "--frames", n, "--fps", "60", "--width", "1920", "--height",
                     "1080", "--consumers", std::to_string(consumers), "--pool-size",
                     std::to_string(pool_size), "--record", path("produced.txt")});
    std::vector<Process*> readers;
    for (int i = 0; i < consumers; ++i) {
      readers.push_back(
          &consumer("consumer" + std::to_string(i),
                    {"--socket", sock, "--frames", n, "--timeout-s", "200", "--max-in-flight", "2",
                     "--record", path("received" + std::to_string(i) + ".txt")}));
    }
    for (int i = 0; i < consumers; ++i)
      EXPECT_EQ(readers[i]->wait_exit(kRunTimeout), std::optional<int>(0))
          << "consumer " << i << "\n"
          << readers[i]->transcript();
    EXPECT_EQ(prod.wait_exit(kRunTimeout), std::optional<int>(0)) << prod.transcript();
    const std::string pstats = prod.last("STATS ").value_or("");
    EXPECT_EQ(stat_of(pstats, "consumers-timed-out"), 0u) << pstats;
    EXPECT_EQ(stat_of(pstats, "consumers-rejected"), 0u) << pstats;
    const std::vector<Record> produced = read_records(path("produced.txt"));
    ASSERT_EQ(produced.size(), frames);
    for (int i = 0; i < consumers; ++i) {
      const std::vector<Record> received =
          read_records(path("received" + std::to_string(i) + ".txt"));
      ASSERT_EQ(received.size(), frames) << "consumer " << i;
      size_t mismatches = 0;
      for (size_t k = 0; k < frames; ++k)
        mismatches += received[k].index != k || received[k].checksum != produced[k].checksum;
      EXPECT_EQ(mismatches, 0u) << "consumer " << i << ": frames out of order or not bit-exact";
    }
    expect_frames_match_reference({produced[0], produced[frames - 1]}, 1920, 1080, "producer");
  }
};

TEST_F(GpuFanOut, SixteenConsumersInCudaMemoryGetEveryFrameInOrderBitExact) {
  run_fan_out(16, 40, 300);
}

// An MPS server takes at most 48 client processes per GPU (Volta and later): on the H200 the
// 49th got cudaErrorDevicesUnavailable and the server logged "Maximum number of clients (48)
// reached". So 64 consumers run without MPS, and 40 (with the producer, well under the limit)
// as MPS clients under run-on-gpu's mps step.
TEST_F(GpuFanOut, SixtyFourConsumersInCudaMemoryGetEveryFrameInOrderBitExact) {
  if (cipc_test::mps_expected())
    GTEST_SKIP() << "beyond an MPS server's 48 clients per GPU; "
                    "FortyConsumersAsMpsClientsGetEveryFrameInOrderBitExact runs instead";
  run_fan_out(64, 136, 300);
}

TEST_F(GpuFanOut, FortyConsumersAsMpsClientsGetEveryFrameInOrderBitExact) {
  if (!cipc_test::mps_expected())
    GTEST_SKIP() << "runs as MPS clients only (tests/gpu/run-on-gpu mps); "
                    "SixtyFourConsumersInCudaMemoryGetEveryFrameInOrderBitExact runs instead";
  run_fan_out(40, 88, 300);
}

// The CUDA driver's cuda-EvtHandlr thread wakes about 0.17 times per frame at 60 fps in an idle
// process (its poll times out every 100 ms). A consumer's blocking-sync release event recorded
// after its GPU-side wait for the producer's interprocess event used to wake it in the producer
// and in every consumer once per consumer per frame (4.1 here with 4 consumers), which made the
// cost of fan-out grow with the square of the consumers (docs/bench-h200-runs.md, "What woke
// cuda-EvtHandlr"). Counted from each process's own per-thread figures.
TEST_F(GpuFanOut, DriverEventThreadsStayAtTheirBackgroundRateWithFourConsumers) {
  constexpr int kConsumers = 4;
  const std::string sock = path("evthandlr.sock");
  std::vector<Process*> all{
      &producer("producer", {"--socket", sock, "--frames", "300", "--fps", "60", "--width", "1920",
                             "--height", "1080", "--consumers", std::to_string(kConsumers),
                             "--pool-size", std::to_string(kConsumers * 2 + 4)})};
  for (int i = 0; i < kConsumers; ++i)
    all.push_back(&consumer("consumer" + std::to_string(i),
                            {"--socket", sock, "--frames", "300", "--timeout-s", "60"}));
  for (Process* p : all) {
    ASSERT_EQ(p->wait_exit(kRunTimeout), std::optional<int>(0)) << p->transcript();
    const std::string line = p->last("THREAD name=cuda-EvtHandlr ").value_or("");
    const size_t at = line.find("wakeups_per_frame=");
    ASSERT_NE(at, std::string::npos) << "no cuda-EvtHandlr figures:\n" << p->transcript();
    const double wakeups = std::stod(line.substr(at + std::strlen("wakeups_per_frame=")));
    EXPECT_LT(wakeups, 0.5) << line;
  }
}

// Synchronisation, sync-mode=cpu (no interprocess events): stream synchronisation instead, still
// exact.
TEST_F(GpuTwoProcess, CpuSyncModeIsBitExact) {
  run_bit_exact(1920, 1080, 300, {"--sync-mode", "cpu"}, {});
}

// Failure semantics, consumer killed: the producer drops that consumer's claims and keeps
// streaming; the next consumer gets correct frames and, once it has left too, no claim is
// outstanding.
TEST_F(GpuTwoProcess, KilledConsumerLeavesProducerStreaming) {
  const std::string sock = path("killc.sock");
  Process& prod = producer("producer", {"--socket", sock, "--frames", "0", "--fps", "60"});
  Process& a = consumer("consumer-a", {"--socket", sock, "--frames", "0", "--hold-ms", "20"});
  ASSERT_TRUE(a.wait_frames(30, kEventTimeout)) << "consumer A got no frames";
  a.signal(SIGKILL);
  EXPECT_EQ(a.wait_exit(kExitTimeout), std::optional<int>(128 + SIGKILL));

  Process& b = consumer("consumer-b", {"--socket", sock, "--frames", "60", "--record",
                                       path("b.txt"), "--timeout-s", "60"});
  EXPECT_EQ(b.wait_exit(seconds(90)), std::optional<int>(0)) << "consumer B";
  EXPECT_EQ(b.frames(), 60u);
  EXPECT_EQ(b.count("ERROR"), 0u);
  const std::string bstats = b.last("STATS ").value_or("");
  // It may have taken in a frame or two more than it used before it stopped.
  EXPECT_GE(stat_of(bstats, "frames-received").value_or(0), 60u) << bstats;
  const auto records = read_records(path("b.txt"));
  EXPECT_EQ(records.size(), 60u);
  for (size_t i = 1; i < records.size(); ++i)
    EXPECT_GT(records[i].index, records[i - 1].index) << "frames out of order at line " << i;
  expect_frames_match_reference(records, 1920, 1080, "consumer B");

  // Let the producer take in B's goodbye before asking for its final numbers.
  std::this_thread::sleep_for(milliseconds(500));
  const std::string pstats = stop_producer(prod);
  EXPECT_EQ(stat_of(pstats, "claims-outstanding"), 0u) << pstats;
  EXPECT_GE(stat_of(pstats, "consumers-total").value_or(0), 2u) << pstats;
  EXPECT_EQ(stat_of(pstats, "copies"), 0u) << pstats;
}

// Issue 17, defect 2: consumers import CUDA slots read-only. A consumer whose GPU work writes into
// a frame faults in its own process (its CUDA context is lost, it reports the error); the
// producer and another consumer keep streaming, and that consumer's frames stay exactly the
// producer's.
TEST_F(GpuTwoProcess, ConsumerWritingIntoAFrameFaultsAloneAndOthersStayBitExact) {
  const std::string sock = path("vandal.sock");
  Process& prod = producer("producer", {"--socket", sock, "--frames", "0", "--fps", "60"});
  Process& good = consumer("good", {"--socket", sock, "--frames", "0"});
  ASSERT_TRUE(good.wait_frames(10, kEventTimeout));
  expect_vandal_refused(sock, "1");

  // The good consumer, attached all along, then records 120 more frames: all the producer's.
  Process& check = consumer("check", {"--socket", sock, "--frames", "120", "--record",
                                      path("check.txt"), "--timeout-s", "60"});
  EXPECT_EQ(check.wait_exit(seconds(90)), std::optional<int>(0)) << check.transcript();
  const auto records = read_records(path("check.txt"));
  EXPECT_EQ(records.size(), 120u);
  expect_frames_match_reference(records, 1920, 1080, "a consumer after the vandal");
  expect_good_consumer_goes_on(good, prod);
}

// The same from a kernel: a write through the read-only mapping is a GPU fault. Without MPS it
// ends the faulting consumer's context alone, like the memset above. Under MPS the server tears
// down every client on the GPU at that moment (its log on the H200: "Server is handling a fatal
// GPU error", then a sticky error for every client process): the producer and the good consumer
// end as well, each with an error and never a hang or a crash, and a new pair streams bit-exact
// on the recovered server. This is why docs/deployment.md keeps consumers that are not trusted off
// a shared MPS server.
TEST_F(GpuTwoProcess, ConsumerKernelWritingIntoAFrameFaultsAloneExceptUnderMps) {
  const std::string sock = path("vandal-kernel.sock");
  Process& prod = producer("producer", {"--socket", sock, "--frames", "0", "--fps", "60"});
  Process& good = consumer("good", {"--socket", sock, "--frames", "0"});
  ASSERT_TRUE(good.wait_frames(10, kEventTimeout));
  expect_vandal_refused(sock, "kernel");
  if (!cipc_test::mps_expected()) {
    expect_good_consumer_goes_on(good, prod);
    return;
  }
  for (Process* p : {&prod, &good}) {
    const auto code = p->wait_exit(seconds(30));
    ASSERT_TRUE(code) << p->name() << " still runs 30 s after the fault\n" << p->transcript();
    EXPECT_NE(*code, 0) << p->name() << "\n" << p->transcript();
    EXPECT_LT(*code, 128) << p->name() << " was killed by a signal\n" << p->transcript();
    EXPECT_TRUE(p->first("ERROR")) << p->name() << " ended without saying why\n" << p->transcript();
  }
  run_bit_exact(1280, 720, 60, {}, {});
}

// Failure semantics, producer killed: the consumer ends with EOS within seconds, and the frames it
// still held or had queued - imported memory of a process that no longer exists - are read after
// the kill and are still exactly the producer's frames.
TEST_F(GpuTwoProcess, KilledProducerEndsConsumerAndHeldFramesStayValid) {
  expect_killed_producer_leaves_held_frames_valid({});
}

// Issue 29: the same when the frames the consumer holds are cudaupload's exportable GstCudaMemory,
// sent by reference: the memory lives on in the consumer's import after its owner died.
TEST_F(GpuTwoProcess, KilledProducerOfExportedGstCudaMemoryLeavesHeldFramesValid) {
  expect_killed_producer_leaves_held_frames_valid({"--source", "cudaupload"});
}

void GpuTwoProcess::expect_killed_producer_leaves_held_frames_valid(
    const std::vector<std::string>& producer_extra) {
  const std::string sock = path("killp.sock");
  std::vector<std::string> pargs{"--socket", sock, "--frames", "0", "--fps", "60"};
  pargs.insert(pargs.end(), producer_extra.begin(), producer_extra.end());
  Process& prod = producer("producer", pargs);
  // It keeps its last 3 frames to the end and reads them again after the kill (--reread).
  Process& cons = consumer(
      "consumer", {"--socket", sock, "--frames", "0", "--hold-ms", "30", "--record", path("c.txt"),
                   "--keep-held", "3", "--reread", path("reread.txt"), "--timeout-s", "120"});
  ASSERT_TRUE(cons.wait_frames(30, kEventTimeout)) << "the consumer got no frames";
  prod.signal(SIGKILL);
  const auto killed_at = Clock::now();
  EXPECT_EQ(prod.wait_exit(kExitTimeout), std::optional<int>(128 + SIGKILL));
  const auto eos = cons.wait_line("EOS", seconds(10));
  ASSERT_TRUE(eos) << "the consumer did not end with EOS within 10 s of the producer's death";
  EXPECT_LT(std::chrono::duration_cast<milliseconds>(eos->at - killed_at).count(), 10000);
  EXPECT_EQ(cons.wait_exit(kExitTimeout), std::optional<int>(0));
  EXPECT_EQ(cons.count("ERROR"), 0u);
  const auto records = read_records(path("c.txt"));
  EXPECT_EQ(records.size(), cons.frames());
  EXPECT_GE(records.size(), 30u);
  expect_frames_match_reference(records, 1920, 1080, "consumer");
  // The frames it still held when its producer died, read after the death.
  EXPECT_EQ(cons.last("REREAD"), std::optional<std::string>("REREAD 3")) << cons.transcript();
  const auto reread = read_records(path("reread.txt"));
  EXPECT_EQ(reread.size(), 3u);
  expect_frames_match_reference(reread, 1920, 1080, "frames read again after the kill");
}

// Failure semantics, producer restarts and stale socket files, repeated: 50 producers SIGKILLed on
// the same path, each replacing the last one's socket file and serving a consumer its 20 frames.
// GPU memory in use after cycle 50 is what it was after cycle 5 (all processes gone both times).
TEST_F(GpuTwoProcess, FiftyKillRestartCyclesDoNotGrowGpuMemory) {
  const std::string sock = path("cycle.sock");
  constexpr int kCycles = 50;
  std::optional<uint64_t> used_at_5, used_at_50;
  bool memory_readable = true;  // once a reading fails, none is taken
  for (int cycle = 1; cycle <= kCycles; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    // Both start at once (the consumer retries until the producer serves the path), which
    // keeps a cycle short.
    Process& prod = producer("producer-" + std::to_string(cycle),
                             {"--socket", sock, "--frames", "0", "--fps", "120"},
                             /*wait_ready=*/false);
    Process& cons = consumer("consumer-" + std::to_string(cycle),
                             {"--socket", sock, "--frames", "20", "--timeout-s", "60"});
    EXPECT_EQ(cons.wait_exit(seconds(90)), std::optional<int>(0));
    EXPECT_EQ(cons.frames(), 20u);
    EXPECT_GE(stat_of(cons.last("STATS ").value_or(""), "frames-received").value_or(0), 20u);
    EXPECT_EQ(prod.count("ERROR"), 0u);
    prod.signal(SIGKILL);
    EXPECT_EQ(prod.wait_exit(kExitTimeout), std::optional<int>(128 + SIGKILL));
    if (HasFailure()) break;  // transcripts of this cycle's peers follow
    retire_processes();
    if (memory_readable && (cycle == 5 || cycle == kCycles)) {
      const auto used = cipc_test::gpu_memory_used_mib();
      if (!used) memory_readable = false;
      (cycle == 5 ? used_at_5 : used_at_50) = used;
    }
  }
  if (HasFailure()) return;
  expect_gpu_memory_flat(used_at_5, used_at_50, kCycles);
}

// Issue 29: 50 producers SIGKILLed while their consumer holds frames of cudaupload's exportable
// GstCudaMemory sent by reference. Each consumer ends with EOS, no error; GPU memory in use after
// cycle 50 is what it was after cycle 5 (all processes gone both times).
TEST_F(GpuTwoProcess, FiftyProducersKilledUnderHeldExportedGstCudaMemoryLeakNothing) {
  const std::string sock = path("exported-kill.sock");
  constexpr int kCycles = 50;
  std::optional<uint64_t> used_at_5, used_at_50;
  for (int cycle = 1; cycle <= kCycles && !HasFailure(); ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    Process& prod =
        producer("producer-" + std::to_string(cycle),
                 {"--socket", sock, "--frames", "0", "--fps", "120", "--source", "cudaupload"},
                 /*wait_ready=*/false);
    Process& cons =
        consumer("consumer-" + std::to_string(cycle),
                 {"--socket", sock, "--frames", "0", "--hold-ms", "20", "--timeout-s", "60"});
    ASSERT_TRUE(cons.wait_frames(5, kEventTimeout)) << cons.transcript();
    prod.signal(SIGKILL);
    EXPECT_EQ(prod.wait_exit(kExitTimeout), std::optional<int>(128 + SIGKILL));
    EXPECT_EQ(cons.wait_exit(kExitTimeout), std::optional<int>(0)) << cons.transcript();
    EXPECT_EQ(cons.count("ERROR"), 0u) << cons.transcript();
    if (HasFailure()) break;
    retire_processes();
    if (cycle == 5 || cycle == kCycles)
      (cycle == 5 ? used_at_5 : used_at_50) = cipc_test::gpu_memory_used_mib();
  }
  if (HasFailure()) return;
  expect_gpu_memory_flat(used_at_5, used_at_50, kCycles);
}

// Failure semantics, GPU mismatch / no usable device: a consumer told to import on a device that
// does not exist fails with an element error naming the setting, and the producer keeps running; a
// producer told to allocate on one fails to start with an error saying so.
// An element that maps CUDA frames for the CPU (gst_buffer_map) reads the right bytes, through
// the staging download, instead of crashing.
TEST_F(GpuTwoProcess, CpuMappingOfCudaFramesReadsTheFrame) {
  const auto stats = run_bit_exact(1280, 720, 120, {}, {"--cpu-map", "1"});
  EXPECT_EQ(stat_of(stats.second, "downloads"), 0u) << stats.second;
}

// A producer on a GPU this process cannot see (a fake one: a one-GPU machine has no other): the
// consumer refuses it with an error naming the reason, and tells the producer why.
TEST_F(GpuTwoProcess, ProducerOnAnotherGpuIsAClearError) {
  const std::string sock = path("other-gpu.sock");
  Process& fake = spawn("fake-producer", "fake-producer", {"--socket", sock});
  ASSERT_TRUE(fake.wait_line("READY", kStartTimeout));
  Process& cons = consumer("consumer", {"--socket", sock, "--frames", "10", "--timeout-s", "30"});
  EXPECT_EQ(cons.wait_exit(kRunTimeout), std::optional<int>(2));
  const auto error = cons.first("ERROR");
  ASSERT_TRUE(error) << "the consumer printed no error";
  EXPECT_TRUE(contains(*error, "GPU is not visible")) << *error;
  EXPECT_TRUE(fake.wait_line("PEER-ERROR", kEventTimeout)) << "the producer was not told why";
}

TEST_F(GpuTwoProcess, WrongDeviceIdIsAClearError) {
  const std::string sock = path("device.sock");
  Process& prod = producer("producer", {"--socket", sock, "--frames", "0", "--fps", "60"});
  Process& cons = consumer(
      "consumer", {"--socket", sock, "--frames", "10", "--device", "99", "--timeout-s", "60"});
  EXPECT_EQ(cons.wait_exit(kRunTimeout), std::optional<int>(2));
  const auto error = cons.first("ERROR");
  ASSERT_TRUE(error) << "the consumer printed no error";
  EXPECT_TRUE(contains(*error, "cuda-device-id=99") || contains(*error, "CUDA device(s)"))
      << *error;
  EXPECT_EQ(cons.frames(), 0u);

  Process& bad = producer("producer-device-99",
                          {"--socket", path("device99.sock"), "--frames", "10", "--device", "99"},
                          /*wait_ready=*/false);
  EXPECT_EQ(bad.wait_exit(kRunTimeout), std::optional<int>(2));
  const auto sink_error = bad.first("ERROR");
  ASSERT_TRUE(sink_error) << "the producer printed no error";
  EXPECT_TRUE(contains(*sink_error, "No usable CUDA device")) << *sink_error;
  EXPECT_TRUE(contains(*sink_error, "cuda-device-id=99")) << *sink_error;
  EXPECT_EQ(bad.count("READY"), 0u);

  // The first producer was not disturbed by the consumer it could not serve.
  const std::string pstats = stop_producer(prod);
  EXPECT_EQ(stat_of(pstats, "claims-outstanding"), 0u) << pstats;
}

}  // namespace
