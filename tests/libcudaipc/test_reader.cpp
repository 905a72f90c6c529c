// SPDX-License-Identifier: LGPL-2.1-or-later
// libcudaipc's C API against real producer processes (cudaipc-e2e-peer running cudasink-ipc in
// host memory): frames bit-exact with the producer's record, the claim rules (max-in-flight,
// release from any thread, frames valid after close and after the producer's death), timeouts,
// interruption, end of stream and the errors a user sees. Also the caps reading and the layout
// check that protect the reader from a lying producer.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <cudaipc/cudaipc.h>
#include "crc32.h"
#include "frame_records.h"
#include "peer_fixture.h"
#include "process.h"
#include "video_caps.h"

namespace {

using cipc_test::PeerFixture;
using cipc_test::Process;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr auto kStartTimeout = cipc_test::kPeerStartTimeout;
constexpr auto kExitTimeout = seconds(20);

using cipc_test::crc32_update;

// CRC-32 of the visible bytes, plane by plane and row by row, as the peer's --record computes it.
std::string visible_crc(const cudaipc_frame_info& info) {
  const auto* base = reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(info.data));
  uint32_t crc = 0;
  const std::string format = info.format;
  for (uint32_t p = 0; p < info.n_planes; ++p) {
    size_t row_bytes = info.width, rows = info.height;
    if (format == "BGRA") row_bytes = size_t(info.width) * 4;
    if (format == "NV12" && p == 1) {
      row_bytes = size_t((info.width + 1) / 2) * 2;
      rows = (info.height + 1) / 2;
    }
    for (size_t y = 0; y < rows; ++y)
      crc = crc32_update(crc, base + info.plane_offset[p] + y * size_t(info.plane_stride[p]),
                         row_bytes);
  }
  char text[16];
  std::snprintf(text, sizeof(text), "%08x", crc);
  return text;
}

using Record = cipc_test::FrameRecord;
using cipc_test::read_frame_records;

class Reader : public PeerFixture {
 protected:
  void SetUp() override {
    init_peers("CUDAIPC_PEER", "cudaipc-e2e-peer", "cudaipc-lib", {kStartTimeout, kExitTimeout});
  }
  void TearDown() override {
    if (reader_) cudaipc_reader_close(reader_);
    PeerFixture::TearDown();
  }

  Process& start_producer(const std::vector<std::string>& extra) {
    std::vector<std::string> args{"--socket", path("p.sock"), "--timeout-s", "60"};
    args.insert(args.end(), extra.begin(), extra.end());
    Process& p = producer("producer", args, /*wait_ready=*/false);
    EXPECT_TRUE(p.wait_line("LISTENING", kStartTimeout));
    return p;
  }

  int open(uint32_t max_in_flight = 4, uint32_t connect_timeout_ms = 5000) {
    cudaipc_reader_options o;
    cudaipc_reader_options_init(&o);
    const std::string sock = path("p.sock");
    o.socket_path = sock.c_str();
    o.max_in_flight = max_in_flight;
    o.connect_timeout_ms = connect_timeout_ms;
    return cudaipc_reader_open(&o, &reader_);
  }

  cudaipc_frame* next_frame(int timeout_ms = 10000) {
    cudaipc_frame* f = nullptr;
    const int s = cudaipc_reader_next(reader_, timeout_ms, &f);
    EXPECT_EQ(s, CUDAIPC_OK) << cudaipc_status_name(s) << ": " << cudaipc_last_error();
    return s == CUDAIPC_OK ? f : nullptr;
  }

  cudaipc_reader_stats stats() const {
    cudaipc_reader_stats s{};
    EXPECT_EQ(cudaipc_reader_get_stats(reader_, &s), CUDAIPC_OK);
    return s;
  }

  // Reads `frames` unpaced frames of a producer that waits for us and compares each with its
  // record: the same pixels, in order, with the producer's offsets.
  void expect_bit_exact(const std::string& format, int width, int height, size_t frames) {
    Process& prod =
        start_producer({"--frames", std::to_string(frames), "--fps", "0", "--wait-for-consumer",
                        "--format", format, "--width", std::to_string(width), "--height",
                        std::to_string(height), "--record", path("produced.txt")});
    ASSERT_EQ(open(), CUDAIPC_OK) << cudaipc_last_error();
    std::vector<Record> received;
    std::vector<cudaipc_frame_info> infos;
    for (size_t i = 0; i < frames; ++i) {
      cudaipc_frame* f = next_frame();
      ASSERT_NE(f, nullptr) << "frame " << i;
      cudaipc_frame_info info;
      ASSERT_EQ(cudaipc_frame_get_info(f, &info), CUDAIPC_OK);
      EXPECT_EQ(std::string(info.format), format);
      EXPECT_EQ(info.width, uint32_t(width));
      EXPECT_EQ(info.height, uint32_t(height));
      EXPECT_EQ(info.memory, CUDAIPC_MEMORY_HOST);
      EXPECT_EQ(info.device, -1);
      EXPECT_EQ(info.n_planes, format == "NV12" ? 2u : 1u);
      EXPECT_NE(info.pts_ns, CUDAIPC_NO_TIMESTAMP);
      Record r;
      r.offset = info.offset;
      r.crc = visible_crc(info);
      received.push_back(r);
      infos.push_back(info);
      EXPECT_EQ(cudaipc_frame_release(f, nullptr), CUDAIPC_OK);
    }
    cudaipc_frame* after = nullptr;
    EXPECT_EQ(cudaipc_reader_next(reader_, 10000, &after), CUDAIPC_END) << cudaipc_last_error();
    EXPECT_EQ(prod.wait_exit(kExitTimeout), std::optional<int>(0));
    const std::vector<Record> produced = read_frame_records(path("produced.txt"));
    ASSERT_EQ(produced.size(), frames);
    size_t distinct = 0;
    for (size_t i = 0; i < frames; ++i) {
      EXPECT_EQ(received[i].crc, produced[i].crc) << "frame " << i;
      EXPECT_EQ(received[i].offset, produced[i].offset) << "frame " << i;
      if (i) distinct += produced[i].crc != produced[i - 1].crc;
    }
    EXPECT_GE(distinct + 1, frames * 9 / 10) << "the pattern frames should differ";
    // What else each frame carries (issue 43, test gaps): the producer's durations, its PTS
    // spacing to the nanosecond (the clocks differ, the intervals may not), one sequence number
    // after another, send times in order, and for this unpaced (not live) stream with nothing
    // skipped: neither LIVE nor, past the first frame, DISCONT.
    for (size_t i = 0; i < frames && !HasFailure(); ++i) {
      SCOPED_TRACE("frame " + std::to_string(i));
      const cudaipc_frame_info& info = infos[i];
      ASSERT_TRUE(produced[i].duration.has_value());
      EXPECT_EQ(info.duration_ns, *produced[i].duration);
      EXPECT_NE(info.send_time_ns, 0u);
      EXPECT_EQ(info.flags & CUDAIPC_FRAME_LIVE, 0u);
      if (i == 0) continue;
      ASSERT_TRUE(produced[i].pts && produced[i - 1].pts);
      EXPECT_EQ(info.pts_ns - infos[i - 1].pts_ns, *produced[i].pts - *produced[i - 1].pts);
      EXPECT_EQ(info.sequence, infos[i - 1].sequence + 1);
      EXPECT_GE(info.send_time_ns, infos[i - 1].send_time_ns);
      EXPECT_EQ(info.flags & CUDAIPC_FRAME_DISCONT, 0u);
    }
    const cudaipc_reader_stats s = stats();
    EXPECT_EQ(s.frames_received, frames);
    EXPECT_EQ(s.frames_held, 0u);
    const std::string pstats = prod.last("STATS ").value_or("");
    EXPECT_EQ(cipc_test::stat_of(pstats, "slots-exported"), s.slots_imported)
        << "each slot the producer shared is imported once: " << pstats;
  }

  cudaipc_reader* reader_ = nullptr;
};

// A reader slower than a live producer, holding its one frame in flight while it works: it
// misses frames, and the frame after each gap (and only those, past the first) says DISCONT;
// every frame of the live source says LIVE; the producer's offsets and sequence numbers show the
// same gaps (issue 43, test gaps).
TEST_F(Reader, FramesAfterMissedOnesAreDiscontAndALiveSourceIsLive) {
  Process& prod =
      start_producer({"--fps", "60", "--format", "GRAY8", "--width", "64", "--height", "48"});
  ASSERT_EQ(open(/*max_in_flight=*/1), CUDAIPC_OK) << cudaipc_last_error();
  std::vector<cudaipc_frame_info> infos;
  for (int i = 0; i < 20; ++i) {
    cudaipc_frame* f = next_frame();
    ASSERT_NE(f, nullptr) << "frame " << i;
    cudaipc_frame_info info;
    ASSERT_EQ(cudaipc_frame_get_info(f, &info), CUDAIPC_OK);
    infos.push_back(info);
    std::this_thread::sleep_for(std::chrono::milliseconds(40));  // the work, frame in hand
    EXPECT_EQ(cudaipc_frame_release(f, nullptr), CUDAIPC_OK);
  }
  size_t gaps = 0;
  for (size_t i = 0; i < infos.size(); ++i) {
    SCOPED_TRACE("frame " + std::to_string(i));
    EXPECT_NE(infos[i].flags & CUDAIPC_FRAME_LIVE, 0u);
    if (i == 0) continue;
    ASSERT_GT(infos[i].sequence, infos[i - 1].sequence);
    const bool gap = infos[i].sequence > infos[i - 1].sequence + 1;
    gaps += gap;
    EXPECT_EQ((infos[i].flags & CUDAIPC_FRAME_DISCONT) != 0, gap);
    EXPECT_EQ(infos[i].offset - infos[i - 1].offset, infos[i].sequence - infos[i - 1].sequence)
        << "the producer's frame numbers skip as its sequence numbers do";
  }
  EXPECT_GE(gaps, 5u) << "a reader at 25 frames/s of a 60 frames/s source misses frames";
  stop_producer(prod);
}

TEST_F(Reader, BgraFramesArriveBitExactWithTheirOffsets) {
  expect_bit_exact("BGRA", 64, 48, 200);
}

TEST_F(Reader, Nv12PlanesOfAnOddSizeArriveBitExact) {
  expect_bit_exact("NV12", 66, 50, 120);
}

// A reader holding max-in-flight frames gets nothing more (a timeout, not a hang); releasing one
// lets frames flow again. The producer is live: it never waits for us.
TEST_F(Reader, HoldingEveryClaimTimesOutUntilOneIsReleased) {
  start_producer({"--fps", "60"});
  ASSERT_EQ(open(/*max_in_flight=*/2), CUDAIPC_OK) << cudaipc_last_error();
  cudaipc_frame* a = next_frame();
  cudaipc_frame* b = next_frame();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(stats().frames_held, 2u);
  EXPECT_EQ(stats().max_in_flight, 2u);
  EXPECT_EQ(stats().cuda_mps, 0u) << "host memory: this reader has no CUDA context";
  cudaipc_frame* c = nullptr;
  EXPECT_EQ(cudaipc_reader_next(reader_, 400, &c), CUDAIPC_TIMEOUT) << cudaipc_last_error();
  EXPECT_EQ(c, nullptr);
  ASSERT_EQ(cudaipc_frame_release(a, nullptr), CUDAIPC_OK);
  c = next_frame(2000);
  ASSERT_NE(c, nullptr) << "releasing a frame did not let the next one through";
  cudaipc_frame_info bi, ci;
  cudaipc_frame_get_info(b, &bi);
  cudaipc_frame_get_info(c, &ci);
  EXPECT_GT(ci.sequence, bi.sequence);
  cudaipc_frame_release(b, nullptr);
  cudaipc_frame_release(c, nullptr);
  EXPECT_EQ(stats().frames_held, 0u);
}

// Frames may be released from any thread, concurrently with next().
TEST_F(Reader, FramesAreReleasedFromAnotherThread) {
  start_producer({"--fps", "200"});
  ASSERT_EQ(open(4), CUDAIPC_OK) << cudaipc_last_error();
  std::vector<cudaipc_frame*> queue;
  std::atomic<int> released{0};
  std::vector<std::thread> releasers;
  for (int i = 0; i < 100; ++i) {
    cudaipc_frame* f = next_frame(5000);
    ASSERT_NE(f, nullptr) << "frame " << i;
    releasers.emplace_back([f, &released] {
      std::this_thread::sleep_for(milliseconds(2));
      if (cudaipc_frame_release(f, nullptr) == CUDAIPC_OK) ++released;
    });
    if (releasers.size() >= 3) {
      releasers.front().join();
      releasers.erase(releasers.begin());
    }
  }
  for (auto& t : releasers) t.join();
  EXPECT_EQ(released.load(), 100);
  EXPECT_EQ(stats().frames_held, 0u);
}

// A frame is the producer's slot: it stays readable after the reader is closed and after the
// producer process is killed, until it is released.
TEST_F(Reader, HeldFramesOutliveTheReaderAndTheProducer) {
  Process& prod = start_producer({"--frames", "10", "--fps", "0", "--wait-for-consumer", "--format",
                                  "BGRA", "--record", path("produced.txt")});
  ASSERT_EQ(open(), CUDAIPC_OK) << cudaipc_last_error();
  cudaipc_frame* f = next_frame();
  ASSERT_NE(f, nullptr);
  cudaipc_frame_info info;
  cudaipc_frame_get_info(f, &info);
  const std::string crc = visible_crc(info);
  cudaipc_reader_close(reader_);
  reader_ = nullptr;
  prod.signal(SIGKILL);
  prod.wait_exit(kExitTimeout);
  EXPECT_EQ(visible_crc(info), crc)
      << "the held frame changed after close and the producer's death";
  const auto produced = read_frame_records(path("produced.txt"));
  ASSERT_FALSE(produced.empty());
  EXPECT_EQ(crc, produced[0].crc);
  EXPECT_EQ(cudaipc_frame_release(f, nullptr), CUDAIPC_OK);
}

// Issue 24, item 5: the end of a stream says how it ended, and says it again on every later call.
TEST_F(Reader, AfterEndOfStreamEveryNextReturnsEndAgain) {
  Process& prod = start_producer({"--frames", "2", "--fps", "0", "--wait-for-consumer"});
  ASSERT_EQ(open(), CUDAIPC_OK) << cudaipc_last_error();
  for (int i = 0; i < 2; ++i) {
    cudaipc_frame* f = next_frame();
    ASSERT_NE(f, nullptr);
    cudaipc_frame_release(f, nullptr);
  }
  for (int call = 0; call < 3; ++call) {
    cudaipc_frame* f = nullptr;
    EXPECT_EQ(cudaipc_reader_next(reader_, 200, &f), CUDAIPC_END) << "call " << call;
    EXPECT_EQ(f, nullptr);
    EXPECT_NE(std::string(cudaipc_last_error()).find("ended the stream"), std::string::npos)
        << cudaipc_last_error();
  }
  EXPECT_EQ(prod.wait_exit(kExitTimeout), std::optional<int>(0));
}

// An eviction is not an end of stream: the reader learns it was cut off, and why.
TEST_F(Reader, EvictionIsDisconnectedWithTheProducersReasonNotEnd) {
  start_producer(
      {"--frames", "100", "--fps", "0", "--wait-for-consumer", "--release-timeout", "300"});
  ASSERT_EQ(open(/*max_in_flight=*/1), CUDAIPC_OK) << cudaipc_last_error();
  cudaipc_frame* held = next_frame();
  ASSERT_NE(held, nullptr);
  // The producer needs the only slot back for its next frame; we keep it past 300 ms.
  std::this_thread::sleep_for(milliseconds(1500));
  cudaipc_frame* f = nullptr;
  int status = CUDAIPC_TIMEOUT;
  for (int i = 0; i < 50 && status == CUDAIPC_TIMEOUT; ++i)
    status = cudaipc_reader_next(reader_, 200, &f);
  EXPECT_EQ(status, CUDAIPC_ERROR_DISCONNECTED) << cudaipc_status_name(status);
  EXPECT_STREQ(cudaipc_status_name(status), "disconnected");
  const std::string reason = cudaipc_last_error();
  EXPECT_NE(reason.find("release-timeout"), std::string::npos) << reason;
  EXPECT_EQ(cudaipc_reader_next(reader_, 200, &f), CUDAIPC_ERROR_DISCONNECTED);
  EXPECT_EQ(std::string(cudaipc_last_error()), reason) << "a later call says the same";
  EXPECT_EQ(cudaipc_frame_release(held, nullptr), CUDAIPC_OK);
}

// Issue 43, defect 3: a reader that attaches and spends longer than release-timeout on its own
// set-up before its first next() no longer holds the blocking producer and its other readers up
// for the 30 s start-up grace: it is disconnected after release-timeout. Its first next() then
// says so, instead of handing out a frame that had been queued for it as if nothing happened.
TEST_F(Reader, ReaderThatReadsNothingIsDisconnectedAndItsFirstNextSaysSo) {
  start_producer({"--frames", "0", "--fps", "0", "--wait-for-consumer", "--release-timeout", "300",
                  "--backpressure", "block"});
  ASSERT_EQ(open(2), CUDAIPC_OK) << cudaipc_last_error();  // the honest reader
  std::atomic<bool> stop{false};
  std::atomic<int64_t> longest_gap_ms{0};
  std::atomic<int> frames{0};
  std::thread honest([&] {
    auto last = std::chrono::steady_clock::now();
    while (!stop) {
      cudaipc_frame* f = nullptr;
      const int s = cudaipc_reader_next(reader_, 200, &f);
      const auto now = std::chrono::steady_clock::now();
      if (s == CUDAIPC_OK) {
        const int64_t gap = std::chrono::duration_cast<milliseconds>(now - last).count();
        if (frames > 0 && gap > longest_gap_ms) longest_gap_ms = gap;
        last = now;
        ++frames;
        cudaipc_frame_release(f, nullptr);
      } else if (s != CUDAIPC_TIMEOUT) {
        ADD_FAILURE() << "the honest reader: " << cudaipc_status_name(s) << ": "
                      << cudaipc_last_error();
        return;
      }
    }
  });
  for (int i = 0; i < 2000 && frames <= 10; ++i) std::this_thread::sleep_for(milliseconds(10));
  if (frames <= 10) {
    stop = true;
    honest.join();
    FAIL() << "the honest reader got " << frames << " frames in 20 s";
  }
  cudaipc_reader_options o;
  cudaipc_reader_options_init(&o);
  const std::string sock = path("p.sock");
  o.socket_path = sock.c_str();
  cudaipc_reader* late = nullptr;
  const int opened = cudaipc_reader_open(&o, &late);
  if (opened == CUDAIPC_OK) {
    std::this_thread::sleep_for(milliseconds(2000));  // its own set-up: reads nothing
    const int before = frames;
    std::this_thread::sleep_for(milliseconds(500));
    EXPECT_GT(frames - before, 0) << "the honest reader is still held up";
    cudaipc_frame* f = nullptr;
    const int status = cudaipc_reader_next(late, 0, &f);
    EXPECT_EQ(status, CUDAIPC_ERROR_DISCONNECTED)
        << cudaipc_status_name(status) << ": a frame queued before the eviction came out";
    const std::string reason = cudaipc_last_error();
    EXPECT_NE(reason.find("had not read the frames"), std::string::npos) << reason;
    EXPECT_NE(reason.find("release-timeout"), std::string::npos) << reason;
    if (f) cudaipc_frame_release(f, nullptr);
    EXPECT_EQ(cudaipc_reader_next(late, 0, &f), CUDAIPC_ERROR_DISCONNECTED);
    EXPECT_EQ(std::string(cudaipc_last_error()), reason) << "a later call says the same";
    cudaipc_reader_stats st{};
    cudaipc_reader_get_stats(late, &st);
    EXPECT_EQ(st.frames_received, 0u);
    cudaipc_reader_close(late);
  }
  stop = true;
  honest.join();
  ASSERT_EQ(opened, CUDAIPC_OK) << cudaipc_last_error();
  // release-timeout, and a margin for two processes on a busy machine; it was 34 s.
  EXPECT_LE(longest_gap_ms.load(), 300 + 1500);
}

// A producer that dies without ending the stream cut it, too.
TEST_F(Reader, ProducerKilledMidStreamIsDisconnectedNotEnd) {
  Process& prod = start_producer({"--frames", "0", "--fps", "30"});
  ASSERT_EQ(open(), CUDAIPC_OK) << cudaipc_last_error();
  cudaipc_frame* f = next_frame();
  ASSERT_NE(f, nullptr);
  cudaipc_frame_release(f, nullptr);
  prod.signal(SIGKILL);
  prod.wait_exit(kExitTimeout);
  int status = CUDAIPC_OK;
  for (int i = 0; i < 100 && (status == CUDAIPC_OK || status == CUDAIPC_TIMEOUT); ++i) {
    f = nullptr;
    status = cudaipc_reader_next(reader_, 200, &f);
    if (f) cudaipc_frame_release(f, nullptr);
  }
  EXPECT_EQ(status, CUDAIPC_ERROR_DISCONNECTED) << cudaipc_status_name(status);
  EXPECT_NE(std::string(cudaipc_last_error()).find("lost the producer"), std::string::npos)
      << cudaipc_last_error();
  EXPECT_EQ(cudaipc_reader_next(reader_, 0, &f), CUDAIPC_ERROR_DISCONNECTED);
}

// Issue 43, item 5: a child made by fork() while the parent holds frames inherits the reader, its
// connection and the frames. Whatever the child does with them as it exits (next, interrupt,
// release, close) reaches neither the producer nor the parent: the parent's frames keep their
// bytes, and the parent stays connected and keeps receiving.
TEST_F(Reader, ForkedChildReleasingAndClosingLeavesTheParentsFramesAndConnection) {
  start_producer({"--fps", "100"});  // live: it overwrites any slot it gets back at once
  ASSERT_EQ(open(4), CUDAIPC_OK) << cudaipc_last_error();
  std::vector<cudaipc_frame*> held;
  std::vector<std::vector<uint8_t>> bytes;
  auto bytes_of = [](cudaipc_frame* f) {
    cudaipc_frame_info info;
    EXPECT_EQ(cudaipc_frame_get_info(f, &info), CUDAIPC_OK);
    const auto* p = reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(info.data));
    return std::vector<uint8_t>(p, p + info.size);
  };
  for (int i = 0; i < 4; ++i) {
    cudaipc_frame* f = next_frame();
    ASSERT_NE(f, nullptr) << "frame " << i;
    held.push_back(f);
    bytes.push_back(bytes_of(f));
  }
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::alarm(20);
    ::close(report[0]);
    cudaipc_frame* f = nullptr;
    const int next_status = cudaipc_reader_next(reader_, 100, &f);
    const std::string said = std::to_string(next_status) + " " + cudaipc_last_error();
    ssize_t n = ::write(report[1], said.data(), said.size());
    (void)n;
    cudaipc_reader_interrupt(reader_);
    for (cudaipc_frame* h : held) cudaipc_frame_release(h, nullptr);
    cudaipc_reader_close(reader_);
    ::_exit(0);
  }
  ::close(report[1]);
  std::string said;
  char buf[512];
  ssize_t n;
  while ((n = ::read(report[0], buf, sizeof(buf))) > 0) said.append(buf, size_t(n));
  ::close(report[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  EXPECT_EQ(said.rfind(std::to_string(CUDAIPC_ERROR_INVALID_ARGUMENT) + " ", 0), 0u)
      << "the child's next() should refuse a reader of its parent: " << said;
  EXPECT_NE(said.find("fork()"), std::string::npos) << said;

  // At 100 fps the producer would have rewritten slots it got back many times over by now.
  std::this_thread::sleep_for(milliseconds(300));
  for (size_t i = 0; i < held.size(); ++i)
    EXPECT_TRUE(bytes_of(held[i]) == bytes[i])
        << "held frame " << i << " was overwritten after the child released it";
  // Still attached and still holding every claim: nothing more comes, and nothing cut us off.
  cudaipc_frame* f = nullptr;
  const int after = cudaipc_reader_next(reader_, 300, &f);
  EXPECT_EQ(after, CUDAIPC_TIMEOUT) << cudaipc_status_name(after) << ": " << cudaipc_last_error();
  for (cudaipc_frame* h : held) EXPECT_EQ(cudaipc_frame_release(h, nullptr), CUDAIPC_OK);
  for (int i = 0; i < 10; ++i) {
    f = next_frame(5000);
    ASSERT_NE(f, nullptr) << "the parent stopped receiving after the child exited (frame " << i
                          << ")";
    cudaipc_frame_release(f, nullptr);
  }
  EXPECT_EQ(stats().connects, 1u);
  EXPECT_EQ(stats().frames_held, 0u);
}

TEST_F(Reader, NoProducerIsAnErrorNamingThePath) {
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(open(4, /*connect_timeout_ms=*/200), CUDAIPC_ERROR_NO_PRODUCER);
  const std::string why = cudaipc_last_error();
  EXPECT_NE(why.find(path("p.sock")), std::string::npos) << why;
  EXPECT_NE(why.find("200 ms"), std::string::npos) << why;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, seconds(3));
  EXPECT_EQ(reader_, nullptr);
}

TEST_F(Reader, NotASocketIsNamedAsSuch) {
  { std::ofstream(path("p.sock")) << "x"; }
  EXPECT_EQ(open(4, 200), CUDAIPC_ERROR_NO_PRODUCER);
  EXPECT_NE(std::string(cudaipc_last_error()).find("is not a socket"), std::string::npos)
      << cudaipc_last_error();
}

// interrupt() from another thread ends a next() that would wait forever; the reader still works.
TEST_F(Reader, InterruptEndsABlockingNext) {
  start_producer({"--fps", "30"});
  ASSERT_EQ(open(1), CUDAIPC_OK) << cudaipc_last_error();
  cudaipc_frame* held = next_frame();
  ASSERT_NE(held, nullptr);  // max-in-flight 1: nothing more comes while it is held
  std::thread interrupter([this] {
    std::this_thread::sleep_for(milliseconds(200));
    cudaipc_reader_interrupt(reader_);
  });
  const auto t0 = std::chrono::steady_clock::now();
  cudaipc_frame* f = nullptr;
  EXPECT_EQ(cudaipc_reader_next(reader_, -1, &f), CUDAIPC_INTERRUPTED);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, seconds(3));
  interrupter.join();
  cudaipc_frame_release(held, nullptr);
  cudaipc_frame* again = next_frame(5000);
  EXPECT_NE(again, nullptr) << "the reader did not work after an interruption";
  if (again) cudaipc_frame_release(again, nullptr);
}

TEST_F(Reader, BadArgumentsAreRefusedWithAReason) {
  EXPECT_EQ(cudaipc_reader_open(nullptr, nullptr), CUDAIPC_ERROR_INVALID_ARGUMENT);
  cudaipc_reader_options o;
  cudaipc_reader_options_init(&o);
  o.max_in_flight = 0;
  EXPECT_EQ(cudaipc_reader_open(&o, &reader_), CUDAIPC_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cudaipc_last_error()).find("max_in_flight"), std::string::npos);
  cudaipc_reader_options_init(&o);
  o.struct_size = 0;
  EXPECT_EQ(cudaipc_reader_open(&o, &reader_), CUDAIPC_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cudaipc_last_error()).find("cudaipc_reader_options_init"),
            std::string::npos);
  cudaipc_reader_options_init(&o);
  o.memory = static_cast<cudaipc_memory>(7);
  EXPECT_EQ(cudaipc_reader_open(&o, &reader_), CUDAIPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(cudaipc_frame_release(nullptr, nullptr), CUDAIPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(cudaipc_reader_next(nullptr, 0, nullptr), CUDAIPC_ERROR_INVALID_ARGUMENT);
  cudaipc_reader_close(nullptr);  // ignored
  EXPECT_STREQ(cudaipc_status_name(CUDAIPC_ERROR_NO_PRODUCER), "no producer");
}

// ---- reading caps and checking layouts, without GStreamer --------------------------------------

TEST(VideoCaps, ReadsFormatAndSizeWithOrWithoutTypes) {
  cipc_libcudaipc::VideoCaps c;
  std::string why;
  ASSERT_TRUE(cipc_libcudaipc::parse_video_caps(
      "video/x-raw, format=(string)BGRA, width=(int)1920, height=(int)1080, "
      "framerate=(fraction)60/1, multiview-mode=(string)mono",
      &c, &why))
      << why;
  EXPECT_EQ(c.format, "BGRA");
  EXPECT_EQ(c.width, 1920u);
  EXPECT_EQ(c.height, 1080u);
  ASSERT_TRUE(
      cipc_libcudaipc::parse_video_caps("video/x-raw,format=\"NV12\",width=3,height=5", &c, &why))
      << why;
  EXPECT_EQ(c.format, "NV12");
  EXPECT_EQ(c.width, 3u);
  EXPECT_FALSE(
      cipc_libcudaipc::parse_video_caps("video/x-raw, format=BGRA, width=(int)0, "
                                        "height=(int)10",
                                        &c, &why));
  EXPECT_FALSE(
      cipc_libcudaipc::parse_video_caps("video/x-raw, width=(int)4, height=(int)4", &c, &why));
  EXPECT_NE(why.find("format"), std::string::npos) << why;
  EXPECT_FALSE(cipc_libcudaipc::parse_video_caps("audio/x-raw, format=S16LE", &c, &why));
  // "chroma-format=" must not be read as the format.
  ASSERT_TRUE(cipc_libcudaipc::parse_video_caps(
      "video/x-raw, chroma-format=(string)4:2:0, format=(string)I420, width=(int)8, "
      "height=(int)8",
      &c, &why));
  EXPECT_EQ(c.format, "I420");
}

TEST(VideoCaps, PlanesOutsideThePayloadAreRefused) {
  cipc_libcudaipc::VideoCaps nv12{"NV12", 64, 48};
  cipc::Frame f;
  f.size = 64 * 48 * 3 / 2;
  f.n_planes = 2;
  f.plane_offset[0] = 0;
  f.plane_stride[0] = 64;
  f.plane_offset[1] = 64 * 48;
  f.plane_stride[1] = 64;
  std::string why;
  EXPECT_TRUE(cipc_libcudaipc::frame_fits(nv12, f, &why)) << why;
  f.plane_offset[1] = 64 * 48 + 64;  // the chroma plane's last row would end past the payload
  EXPECT_FALSE(cipc_libcudaipc::frame_fits(nv12, f, &why));
  EXPECT_NE(why.find("plane 1"), std::string::npos) << why;

  cipc_libcudaipc::VideoCaps bgra{"BGRA", 64, 4};
  cipc::Frame g;
  g.size = 64 * 4 * 4;
  g.n_planes = 1;
  g.plane_stride[0] = 64 * 4;
  EXPECT_TRUE(cipc_libcudaipc::frame_fits(bgra, g, &why)) << why;
  g.plane_stride[0] = 64 * 3;  // rows shorter than 64 BGRA pixels
  EXPECT_FALSE(cipc_libcudaipc::frame_fits(bgra, g, &why));
  g.plane_stride[0] = -256;
  EXPECT_FALSE(cipc_libcudaipc::frame_fits(bgra, g, &why));
  g.n_planes = 0;
  EXPECT_FALSE(cipc_libcudaipc::frame_fits(bgra, g, &why));
}

}  // namespace
