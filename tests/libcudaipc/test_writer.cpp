// SPDX-License-Identifier: LGPL-2.1-or-later
// libcudaipc's writer (cudaipc_writer_*, cudaipc_slot_*) in host memory, against consumers in
// other processes: cudasrc-ipc (cudaipc-e2e-peer consume) and the C reader in a forked child
// receive a writer's frames bit-exact; a full ring times out (block and drop), abandoned slots
// are never sent, EOS, a size change mid-stream, the path lock against a second writer and
// against cudasink-ipc, a writer killed while consumers hold its frames, a stuck consumer
// evicted, interrupt, the copy count of publish_copy, and the errors of bad options.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <cudaipc/cudaipc.h>
#include "crc32.h"
#include "frame_records.h"
#include "peer_fixture.h"
#include "process.h"

namespace {

using cipc_test::PeerFixture;
using cipc_test::Process;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr auto kStartTimeout = cipc_test::kPeerStartTimeout;
constexpr auto kExitTimeout = seconds(20);

// Rows and bytes per row that the peer's --record covers, for the formats the tests publish
// (packed 4:2:2: the luma's width, as the record measures it).
void visible_plane(const std::string& format, uint32_t width, uint32_t height, uint32_t plane,
                   size_t* row_bytes, size_t* rows) {
  *rows = height;
  if (format == "BGRx" || format == "BGRA" || format == "RGBA")
    *row_bytes = size_t(width) * 4;
  else if (format == "YUY2")
    *row_bytes = size_t(width) * 2;
  else
    *row_bytes = width;  // GRAY8, luma planes
  if (plane > 0) {
    *rows = (height + 1) / 2;
    *row_bytes = format == "NV12" ? size_t((width + 1) / 2) * 2 : (width + 1) / 2;
  }
}

// Frame `n`'s pixels, different in every frame, plane, row and column.
uint8_t pattern(uint64_t n, uint32_t plane, size_t y, size_t x) {
  return static_cast<uint8_t>(n * 7 + plane * 31 + y * 3 + x);
}

void draw(const cudaipc_slot_info& info, uint64_t n) {
  auto* base = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(info.data));
  for (uint32_t p = 0; p < info.n_planes; ++p) {
    size_t row_bytes = 0, rows = 0;
    visible_plane(info.format, info.width, info.height, p, &row_bytes, &rows);
    for (size_t y = 0; y < rows; ++y)
      for (size_t x = 0; x < row_bytes; ++x)
        base[info.plane_offset[p] + y * size_t(info.plane_stride[p]) + x] = pattern(n, p, y, x);
  }
}

// CRC-32 of frame `n`'s visible bytes, as the peer's --record computes it.
std::string expected_crc(const std::string& format, uint32_t width, uint32_t height,
                         uint32_t planes, uint64_t n) {
  uint32_t crc = 0;
  for (uint32_t p = 0; p < planes; ++p) {
    size_t row_bytes = 0, rows = 0;
    visible_plane(format, width, height, p, &row_bytes, &rows);
    std::vector<uint8_t> row(row_bytes);
    for (size_t y = 0; y < rows; ++y) {
      for (size_t x = 0; x < row_bytes; ++x) row[x] = pattern(n, p, y, x);
      crc = cipc_test::crc32_update(crc, row.data(), row.size());
    }
  }
  char text[16];
  std::snprintf(text, sizeof(text), "%08x", crc);
  return text;
}

std::string frame_crc(const cudaipc_frame_info& info) {
  const auto* base = reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(info.data));
  uint32_t crc = 0;
  for (uint32_t p = 0; p < info.n_planes; ++p) {
    size_t row_bytes = 0, rows = 0;
    visible_plane(info.format, info.width, info.height, p, &row_bytes, &rows);
    for (size_t y = 0; y < rows; ++y)
      crc = cipc_test::crc32_update(
          crc, base + info.plane_offset[p] + y * size_t(info.plane_stride[p]), row_bytes);
  }
  char text[16];
  std::snprintf(text, sizeof(text), "%08x", crc);
  return text;
}

class Writer : public PeerFixture {
 protected:
  void SetUp() override {
    init_peers("CUDAIPC_PEER", "cudaipc-e2e-peer", "cudaipc-writer", {kStartTimeout, kExitTimeout});
    socket_ = path("w.sock");
  }
  void TearDown() override {
    for (cudaipc_reader* r : readers_) cudaipc_reader_close(r);
    if (writer_) cudaipc_writer_close(writer_);
    PeerFixture::TearDown();
  }

  cudaipc_writer_options options(const char* format = "BGRx", uint32_t width = 64,
                                 uint32_t height = 48) {
    cudaipc_writer_options o;
    cudaipc_writer_options_init(&o);
    o.socket_path = socket_.c_str();
    o.memory = CUDAIPC_MEMORY_HOST;
    o.format = format;
    o.width = width;
    o.height = height;
    return o;
  }

  int open(const cudaipc_writer_options& o) { return cudaipc_writer_open(&o, &writer_); }

  cudaipc_reader* open_reader(uint32_t max_in_flight = 4) {
    cudaipc_reader_options o;
    cudaipc_reader_options_init(&o);
    o.socket_path = socket_.c_str();
    o.max_in_flight = max_in_flight;
    cudaipc_reader* r = nullptr;
    EXPECT_EQ(cudaipc_reader_open(&o, &r), CUDAIPC_OK) << cudaipc_last_error();
    if (r) readers_.push_back(r);
    return r;
  }

  cudaipc_slot* acquire(int timeout_ms = 5000) {
    cudaipc_slot* slot = nullptr;
    const int s = cudaipc_writer_acquire(writer_, timeout_ms, &slot);
    EXPECT_EQ(s, CUDAIPC_OK) << cudaipc_status_name(s) << ": " << cudaipc_last_error();
    return slot;
  }

  // Draws frame `n` into a slot and publishes it with pts n ms, duration 1 ms.
  void publish(uint64_t n) {
    cudaipc_slot* slot = acquire();
    ASSERT_NE(slot, nullptr);
    cudaipc_slot_info info;
    ASSERT_EQ(cudaipc_slot_get_info(slot, &info), CUDAIPC_OK);
    draw(info, n);
    ASSERT_EQ(cudaipc_slot_publish(slot, nullptr, 1000000000ull + n * 1000000ull, 1000000ull),
              CUDAIPC_OK)
        << cudaipc_last_error();
  }

  cudaipc_writer_stats stats() {
    cudaipc_writer_stats s{};
    EXPECT_EQ(cudaipc_writer_get_stats(writer_, &s), CUDAIPC_OK);
    return s;
  }

  // cudasrc-ipc in another process receives `frames` frames bit-exact, in order.
  void expect_cudasrc_bit_exact(const char* format, uint32_t width, uint32_t height,
                                uint64_t frames) {
    cudaipc_writer_options o = options(format, width, height);
    o.backpressure = CUDAIPC_BACKPRESSURE_BLOCK;  // every frame reaches the consumer
    o.live = 0;
    ASSERT_EQ(open(o), CUDAIPC_OK) << cudaipc_last_error();
    Process& c = consumer("consumer", {"--socket", socket_, "--frames", std::to_string(frames),
                                       "--record", path("received.txt"), "--timeout-s", "60"});
    ASSERT_EQ(cudaipc_writer_wait_for_consumer(writer_, 30000), CUDAIPC_OK)
        << cudaipc_last_error() << "\n"
        << c.transcript();
    uint32_t planes = 0;
    for (uint64_t n = 0; n < frames; ++n) {
      cudaipc_slot* slot = acquire(20000);
      ASSERT_NE(slot, nullptr) << "frame " << n << "\n" << c.transcript();
      cudaipc_slot_info info;
      cudaipc_slot_get_info(slot, &info);
      planes = info.n_planes;
      draw(info, n);
      ASSERT_EQ(cudaipc_slot_publish(slot, nullptr, CUDAIPC_NO_TIMESTAMP, 1000000ull), CUDAIPC_OK);
    }
    ASSERT_TRUE(c.wait_line("DONE", seconds(30))) << c.transcript();
    ASSERT_EQ(c.wait_exit(kExitTimeout), std::optional<int>(0)) << c.transcript();
    const auto received = cipc_test::read_frame_records(path("received.txt"));
    ASSERT_EQ(received.size(), frames);
    for (uint64_t n = 0; n < frames; ++n) {
      EXPECT_EQ(received[n].crc, expected_crc(format, width, height, planes, n)) << "frame " << n;
      EXPECT_EQ(received[n].offset, std::optional<uint64_t>(n)) << "frame " << n;
      EXPECT_EQ(received[n].duration, std::optional<uint64_t>(1000000ull));
    }
    EXPECT_EQ(stats().copies, 0u);
  }

  std::string socket_;
  cudaipc_writer* writer_ = nullptr;
  std::vector<cudaipc_reader*> readers_;
};

TEST_F(Writer, CudasrcIpcReceivesEveryFrameBitExactBgrx) {
  expect_cudasrc_bit_exact("BGRx", 320, 240, 120);
}

TEST_F(Writer, CudasrcIpcReceivesEveryFrameBitExactOddNv12) {
  expect_cudasrc_bit_exact("NV12", 322, 243, 60);
}

TEST_F(Writer, CudasrcIpcReceivesEveryFrameBitExactOddI420) {
  expect_cudasrc_bit_exact("I420", 161, 121, 60);
}

TEST_F(Writer, CudasrcIpcReceivesEveryFrameBitExactOddYuy2) {
  expect_cudasrc_bit_exact("YUY2", 161, 120, 60);
}

// The C reader, in a forked child (before the writer's threads exist), reads 200 frames and
// writes `offset crc pts` per frame to a file.
TEST_F(Writer, CReaderInAnotherProcessReceivesEveryFrameBitExact) {
  const uint64_t frames = 200;
  const std::string out = path("reader.txt");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    cudaipc_reader_options o;
    cudaipc_reader_options_init(&o);
    o.socket_path = socket_.c_str();
    o.connect_timeout_ms = 20000;
    cudaipc_reader* r = nullptr;
    if (cudaipc_reader_open(&o, &r) != CUDAIPC_OK) ::_exit(10);
    std::ofstream file(out);
    for (uint64_t i = 0; i < frames; ++i) {
      cudaipc_frame* f = nullptr;
      if (cudaipc_reader_next(r, 20000, &f) != CUDAIPC_OK) ::_exit(11);
      cudaipc_frame_info info;
      cudaipc_frame_get_info(f, &info);
      file << info.offset << " " << frame_crc(info) << " " << info.pts_ns << " " << info.format
           << " " << info.width << "x" << info.height << "\n";
      cudaipc_frame_release(f, nullptr);
    }
    file.close();
    cudaipc_reader_close(r);
    ::_exit(0);
  }
  cudaipc_writer_options o = options("BGRA", 96, 64);
  o.backpressure = CUDAIPC_BACKPRESSURE_BLOCK;
  o.live = 0;
  ASSERT_EQ(open(o), CUDAIPC_OK) << cudaipc_last_error();
  ASSERT_EQ(cudaipc_writer_wait_for_consumer(writer_, 30000), CUDAIPC_OK);
  for (uint64_t n = 0; n < frames; ++n) publish(n);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "reader child: " << status;
  std::ifstream in(out);
  for (uint64_t n = 0; n < frames; ++n) {
    uint64_t offset = 0, pts = 0;
    std::string crc, format, size;
    ASSERT_TRUE(in >> offset >> crc >> pts >> format >> size) << "frame " << n;
    EXPECT_EQ(offset, n);
    EXPECT_EQ(crc, expected_crc("BGRA", 96, 64, 1, n)) << "frame " << n;
    EXPECT_EQ(pts, 1000000000ull + n * 1000000ull);
    EXPECT_EQ(format, "BGRA");
    EXPECT_EQ(size, "96x64");
  }
  const cudaipc_writer_stats s = stats();
  EXPECT_EQ(s.frames_published, frames);
  EXPECT_EQ(s.frames_sent, frames);
  EXPECT_EQ(s.copies, 0u);
}

TEST_F(Writer, AcquireTimesOutWhileConsumersHoldEverySlot) {
  cudaipc_writer_options o = options();
  o.pool_size = 3;  // one consumer may hold one slot; the writer keeps two
  o.max_in_flight = 3;
  o.release_timeout_ms = 0;  // never evict: the slots stay held
  ASSERT_EQ(open(o), CUDAIPC_OK);
  cudaipc_reader* r = open_reader(3);
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(cudaipc_writer_wait_for_consumer(writer_, 5000), CUDAIPC_OK);
  std::vector<cudaipc_frame*> held;
  for (uint64_t n = 0; n < 3; ++n) {
    publish(n);
    cudaipc_frame* f = nullptr;
    ASSERT_EQ(cudaipc_reader_next(r, 5000, &f), CUDAIPC_OK) << cudaipc_last_error();
    held.push_back(f);
  }
  cudaipc_slot* slot = nullptr;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(cudaipc_writer_acquire(writer_, 300, &slot), CUDAIPC_TIMEOUT);
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(290));
  EXPECT_EQ(slot, nullptr);
  EXPECT_EQ(stats().acquire_timeouts, 1u);
  cudaipc_frame_release(held[0], nullptr);
  slot = acquire(5000);  // the released slot is lent again
  EXPECT_NE(slot, nullptr);
  cudaipc_slot_abandon(slot);
  for (size_t i = 1; i < held.size(); ++i) cudaipc_frame_release(held[i], nullptr);
}

TEST_F(Writer, BlockWaitsForTheSlowestConsumerAndTimesOut) {
  cudaipc_writer_options o = options();
  o.backpressure = CUDAIPC_BACKPRESSURE_BLOCK;
  o.max_in_flight = 2;
  o.release_timeout_ms = 0;
  ASSERT_EQ(open(o), CUDAIPC_OK);
  cudaipc_reader* r = open_reader(2);
  ASSERT_EQ(cudaipc_writer_wait_for_consumer(writer_, 5000), CUDAIPC_OK);
  publish(0);
  publish(1);  // the reader may hold two: it holds two now, unread
  cudaipc_slot* slot = nullptr;
  EXPECT_EQ(cudaipc_writer_acquire(writer_, 300, &slot), CUDAIPC_TIMEOUT);
  cudaipc_frame* f = nullptr;
  ASSERT_EQ(cudaipc_reader_next(r, 5000, &f), CUDAIPC_OK);
  cudaipc_frame_release(f, nullptr);
  EXPECT_NE(slot = acquire(5000), nullptr);
  cudaipc_slot_abandon(slot);
  EXPECT_EQ(stats().frames_dropped, 0u);
}

TEST_F(Writer, DropCountsTheFramesAConsumerHadNoRoomFor) {
  cudaipc_writer_options o = options();
  o.pool_size = 8;
  o.max_in_flight = 2;
  o.release_timeout_ms = 0;
  ASSERT_EQ(open(o), CUDAIPC_OK);
  cudaipc_reader* r = open_reader(2);
  ASSERT_EQ(cudaipc_writer_wait_for_consumer(writer_, 5000), CUDAIPC_OK);
  for (uint64_t n = 0; n < 5; ++n) publish(n);  // the reader takes two; three are dropped
  const cudaipc_writer_stats s = stats();
  EXPECT_EQ(s.frames_published, 5u);
  EXPECT_EQ(s.frames_sent, 2u);
  EXPECT_EQ(s.frames_dropped, 3u);
  for (uint64_t n = 0; n < 2; ++n) {
    cudaipc_frame* f = nullptr;
    ASSERT_EQ(cudaipc_reader_next(r, 5000, &f), CUDAIPC_OK);
    cudaipc_frame_info info;
    cudaipc_frame_get_info(f, &info);
    EXPECT_EQ(info.offset, n);
    EXPECT_EQ(frame_crc(info), expected_crc("BGRx", 64, 48, 1, n));
    cudaipc_frame_release(f, nullptr);
  }
}

// A reader imports every slot of the pool when it attaches (issue 46), not one per frame in the
// pool's first round; and after a format change, every slot of the new pool before its frames.
TEST_F(Writer, AReaderHasEverySlotBeforeTheFirstFrameAndAgainAfterAFormatChange) {
  cudaipc_writer_options o = options();
  o.pool_size = 5;
  ASSERT_EQ(open(o), CUDAIPC_OK);
  cudaipc_reader* r = open_reader();
  ASSERT_EQ(cudaipc_writer_wait_for_consumer(writer_, 5000), CUDAIPC_OK);
  publish(0);
  cudaipc_frame* f = nullptr;
  ASSERT_EQ(cudaipc_reader_next(r, 5000, &f), CUDAIPC_OK) << cudaipc_last_error();
  cudaipc_reader_stats rs{};
  ASSERT_EQ(cudaipc_reader_get_stats(r, &rs), CUDAIPC_OK);
  EXPECT_EQ(rs.slots_imported, 5u) << "every slot with the first frame";
  cudaipc_frame_release(f, nullptr);

  ASSERT_EQ(cudaipc_writer_set_format(writer_, "GRAY8", 32, 16), CUDAIPC_OK)
      << cudaipc_last_error();
  publish(1);
  ASSERT_EQ(cudaipc_reader_next(r, 5000, &f), CUDAIPC_OK) << cudaipc_last_error();
  cudaipc_frame_info info;
  cudaipc_frame_get_info(f, &info);
  EXPECT_EQ(info.width, 32u);
  EXPECT_EQ(frame_crc(info), expected_crc("GRAY8", 32, 16, 1, 1));
  ASSERT_EQ(cudaipc_reader_get_stats(r, &rs), CUDAIPC_OK);
  EXPECT_EQ(rs.slots_imported, 10u) << "the new pool's five with its first frame";
  cudaipc_frame_release(f, nullptr);
}

TEST_F(Writer, AbandonedSlotsAreNeverSent) {
  ASSERT_EQ(open(options()), CUDAIPC_OK);
  cudaipc_reader* r = open_reader();
  ASSERT_EQ(cudaipc_writer_wait_for_consumer(writer_, 5000), CUDAIPC_OK);
  for (uint64_t n = 0; n < 12; ++n) {
    cudaipc_slot* slot = acquire();
    ASSERT_NE(slot, nullptr);
    cudaipc_slot_info info;
    cudaipc_slot_get_info(slot, &info);
    draw(info, n);
    if (n % 3 == 1) {
      cudaipc_slot_abandon(slot);
      continue;
    }
    ASSERT_EQ(cudaipc_slot_publish(slot, nullptr, CUDAIPC_NO_TIMESTAMP, CUDAIPC_NO_TIMESTAMP),
              CUDAIPC_OK);
    cudaipc_frame* f = nullptr;
    ASSERT_EQ(cudaipc_reader_next(r, 5000, &f), CUDAIPC_OK);
    cudaipc_frame_info fi;
    cudaipc_frame_get_info(f, &fi);
    EXPECT_EQ(frame_crc(fi), expected_crc("BGRx", 64, 48, 1, n)) << "frame " << n;
    EXPECT_NE(fi.pts_ns, CUDAIPC_NO_TIMESTAMP);  // stamped with the publish time
    cudaipc_frame_release(f, nullptr);
  }
  cudaipc_frame* f = nullptr;
  EXPECT_EQ(cudaipc_reader_next(r, 200, &f), CUDAIPC_TIMEOUT);
  const cudaipc_writer_stats s = stats();
  EXPECT_EQ(s.frames_abandoned, 4u);
  EXPECT_EQ(s.frames_published, 8u);
  EXPECT_EQ(s.slots_allocated, 6u);  // the abandoned slots were lent again, not replaced
}

TEST_F(Writer, EndStreamEndsTheReadersStreamAndLaterAcquires) {
  ASSERT_EQ(open(options()), CUDAIPC_OK);
  cudaipc_reader* r = open_reader();
  ASSERT_EQ(cudaipc_writer_wait_for_consumer(writer_, 5000), CUDAIPC_OK);
  publish(0);
  cudaipc_slot* lent = acquire();
  ASSERT_EQ(cudaipc_writer_end_stream(writer_), CUDAIPC_OK);
  cudaipc_frame* f = nullptr;
  ASSERT_EQ(cudaipc_reader_next(r, 5000, &f), CUDAIPC_OK);
  cudaipc_frame_release(f, nullptr);
  EXPECT_EQ(cudaipc_reader_next(r, 5000, &f), CUDAIPC_END) << cudaipc_last_error();
  cudaipc_slot* slot = nullptr;
  EXPECT_EQ(cudaipc_writer_acquire(writer_, 100, &slot), CUDAIPC_END);
  EXPECT_EQ(cudaipc_slot_publish(lent, nullptr, CUDAIPC_NO_TIMESTAMP, CUDAIPC_NO_TIMESTAMP),
            CUDAIPC_END);
}

TEST_F(Writer, SizeChangeMidStreamReachesCudasrcIpcBitExact) {
  cudaipc_writer_options o = options("BGRx", 64, 48);
  o.backpressure = CUDAIPC_BACKPRESSURE_BLOCK;
  o.live = 0;
  ASSERT_EQ(open(o), CUDAIPC_OK);
  Process& c = consumer("consumer", {"--socket", socket_, "--frames", "40", "--record",
                                     path("received.txt"), "--timeout-s", "60"});
  ASSERT_EQ(cudaipc_writer_wait_for_consumer(writer_, 30000), CUDAIPC_OK) << c.transcript();
  for (uint64_t n = 0; n < 20; ++n) publish(n);
  cudaipc_slot* stale = acquire();  // lent before the change: not sent after it
  ASSERT_EQ(cudaipc_writer_set_format(writer_, "NV12", 130, 75), CUDAIPC_OK)
      << cudaipc_last_error();
  EXPECT_EQ(cudaipc_slot_publish(stale, nullptr, CUDAIPC_NO_TIMESTAMP, CUDAIPC_NO_TIMESTAMP),
            CUDAIPC_ERROR_INVALID_ARGUMENT);
  for (uint64_t n = 20; n < 40; ++n) publish(n);
  ASSERT_TRUE(c.wait_line("DONE", seconds(30))) << c.transcript();
  ASSERT_EQ(c.wait_exit(kExitTimeout), std::optional<int>(0)) << c.transcript();
  const auto received = cipc_test::read_frame_records(path("received.txt"));
  ASSERT_EQ(received.size(), 40u);
  for (uint64_t n = 0; n < 40; ++n)
    EXPECT_EQ(received[n].crc,
              n < 20 ? expected_crc("BGRx", 64, 48, 1, n) : expected_crc("NV12", 130, 75, 2, n))
        << "frame " << n;
  EXPECT_EQ(stats().generations, 2u);
}

TEST_F(Writer, ASecondWriterOnThePathIsBusy) {
  ASSERT_EQ(open(options()), CUDAIPC_OK);
  cudaipc_writer_options o = options();
  cudaipc_writer* second = nullptr;
  EXPECT_EQ(cudaipc_writer_open(&o, &second), CUDAIPC_ERROR_BUSY);
  EXPECT_EQ(second, nullptr);
  EXPECT_NE(std::string(cudaipc_last_error()).find(socket_), std::string::npos)
      << cudaipc_last_error();
}

TEST_F(Writer, WriterAndCudasinkIpcRefuseEachOthersPath) {
  ASSERT_EQ(open(options()), CUDAIPC_OK);
  Process& p = producer("producer", {"--socket", socket_, "--timeout-s", "30"}, false);
  EXPECT_EQ(p.wait_exit(seconds(60)), std::optional<int>(2)) << p.transcript();
  EXPECT_TRUE(p.first("ERROR").has_value()) << p.transcript();
  // The writer still serves.
  ASSERT_NE(open_reader(), nullptr);
  publish(0);
  cudaipc_writer_close(writer_);
  writer_ = nullptr;
  retire_processes();

  Process& sink = producer("sink", {"--socket", socket_, "--timeout-s", "60"}, false);
  ASSERT_TRUE(sink.wait_line("LISTENING", kStartTimeout)) << sink.transcript();
  cudaipc_writer_options o = options();
  cudaipc_writer* w = nullptr;
  EXPECT_EQ(cudaipc_writer_open(&o, &w), CUDAIPC_ERROR_BUSY) << cudaipc_last_error();
  stop_producer(sink);
}

// A writer killed while a reader holds its frames: the frames stay valid and unchanged, and the
// reader then learns the stream was cut.
TEST_F(Writer, FramesStayValidAfterTheWriterIsKilled) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    cudaipc_writer_options o = options();
    o.pool_size = 8;
    cudaipc_writer* w = nullptr;
    if (cudaipc_writer_open(&o, &w) != CUDAIPC_OK) ::_exit(10);
    if (cudaipc_writer_wait_for_consumer(w, 20000) != CUDAIPC_OK) ::_exit(11);
    for (uint64_t n = 0; n < 3; ++n) {
      cudaipc_slot* slot = nullptr;
      if (cudaipc_writer_acquire(w, 5000, &slot) != CUDAIPC_OK) ::_exit(12);
      cudaipc_slot_info info;
      cudaipc_slot_get_info(slot, &info);
      draw(info, n);
      cudaipc_slot_publish(slot, nullptr, CUDAIPC_NO_TIMESTAMP, CUDAIPC_NO_TIMESTAMP);
    }
    (void)!::write(ready[1], "x", 1);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  cudaipc_reader_options ro;
  cudaipc_reader_options_init(&ro);
  ro.socket_path = socket_.c_str();
  ro.connect_timeout_ms = 20000;
  cudaipc_reader* r = nullptr;
  ASSERT_EQ(cudaipc_reader_open(&ro, &r), CUDAIPC_OK) << cudaipc_last_error();
  readers_.push_back(r);
  char byte;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  std::vector<cudaipc_frame*> held;
  for (int i = 0; i < 3; ++i) {
    cudaipc_frame* f = nullptr;
    ASSERT_EQ(cudaipc_reader_next(r, 5000, &f), CUDAIPC_OK) << cudaipc_last_error();
    held.push_back(f);
  }
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  cudaipc_frame* f = nullptr;
  EXPECT_EQ(cudaipc_reader_next(r, 5000, &f), CUDAIPC_ERROR_DISCONNECTED) << cudaipc_last_error();
  for (uint64_t n = 0; n < 3; ++n) {
    cudaipc_frame_info info;
    cudaipc_frame_get_info(held[n], &info);
    EXPECT_EQ(frame_crc(info), expected_crc("BGRx", 64, 48, 1, n)) << "frame " << n;
    cudaipc_frame_release(held[n], nullptr);
  }
}

// A consumer that keeps frames the writer needs back is disconnected after release-timeout,
// and the writer's acquire goes on with its slots.
TEST_F(Writer, AStuckConsumerIsEvictedAndItsSlotsReplaced) {
  cudaipc_writer_options o = options();
  o.pool_size = 3;
  o.max_in_flight = 3;
  o.release_timeout_ms = 300;
  ASSERT_EQ(open(o), CUDAIPC_OK);
  cudaipc_reader* r = open_reader(3);
  ASSERT_EQ(cudaipc_writer_wait_for_consumer(writer_, 5000), CUDAIPC_OK);
  std::vector<cudaipc_frame*> held;
  for (uint64_t n = 0; n < 3; ++n) {
    publish(n);
    cudaipc_frame* f = nullptr;
    ASSERT_EQ(cudaipc_reader_next(r, 5000, &f), CUDAIPC_OK);
    held.push_back(f);
  }
  const auto start = std::chrono::steady_clock::now();
  cudaipc_slot* slot = acquire(10000);
  ASSERT_NE(slot, nullptr);
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(5));
  cudaipc_slot_abandon(slot);
  const cudaipc_writer_stats s = stats();
  EXPECT_EQ(s.consumers_evicted, 1u);
  EXPECT_EQ(s.consumers, 0u);
  EXPECT_GE(s.slots_retired, 1u);
  // The evicted reader's frames are still its own, unchanged.
  for (uint64_t n = 0; n < 3; ++n) {
    cudaipc_frame_info info;
    cudaipc_frame_get_info(held[n], &info);
    EXPECT_EQ(frame_crc(info), expected_crc("BGRx", 64, 48, 1, n)) << "frame " << n;
    cudaipc_frame_release(held[n], nullptr);
  }
  cudaipc_frame* f = nullptr;
  EXPECT_EQ(cudaipc_reader_next(r, 2000, &f), CUDAIPC_ERROR_DISCONNECTED);
}

TEST_F(Writer, InterruptEndsABlockedAcquire) {
  cudaipc_writer_options o = options();
  o.pool_size = 1;
  ASSERT_EQ(open(o), CUDAIPC_OK);
  cudaipc_slot* only = acquire();
  ASSERT_NE(only, nullptr);
  std::thread interrupter([this] {
    std::this_thread::sleep_for(milliseconds(200));
    cudaipc_writer_interrupt(writer_);
  });
  cudaipc_slot* slot = nullptr;
  EXPECT_EQ(cudaipc_writer_acquire(writer_, -1, &slot), CUDAIPC_INTERRUPTED);
  interrupter.join();
  cudaipc_slot_abandon(only);
  EXPECT_NE(slot = acquire(1000), nullptr);  // answered once: the next acquire works
  cudaipc_slot_abandon(slot);
}

TEST_F(Writer, PublishCopyCountsOneCopyPerFrameAndLandsBitExact) {
  ASSERT_EQ(open(options("BGRx", 64, 48)), CUDAIPC_OK);
  cudaipc_reader* r = open_reader();
  ASSERT_EQ(cudaipc_writer_wait_for_consumer(writer_, 5000), CUDAIPC_OK);
  const size_t stride = 64 * 4 + 12;  // a caller's own padding
  std::vector<uint8_t> frame(stride * 48);
  for (uint64_t n = 0; n < 4; ++n) {
    for (size_t y = 0; y < 48; ++y)
      for (size_t x = 0; x < 64 * 4; ++x) frame[y * stride + x] = pattern(n, 0, y, x);
    ASSERT_EQ(cudaipc_writer_publish_copy(writer_, frame.data(), stride, nullptr,
                                          CUDAIPC_NO_TIMESTAMP, CUDAIPC_NO_TIMESTAMP, 5000),
              CUDAIPC_OK)
        << cudaipc_last_error();
    cudaipc_frame* f = nullptr;
    ASSERT_EQ(cudaipc_reader_next(r, 5000, &f), CUDAIPC_OK);
    cudaipc_frame_info info;
    cudaipc_frame_get_info(f, &info);
    EXPECT_EQ(frame_crc(info), expected_crc("BGRx", 64, 48, 1, n));
    cudaipc_frame_release(f, nullptr);
  }
  publish(4);  // acquire/publish: no copy
  EXPECT_EQ(stats().copies, 4u);
  EXPECT_EQ(cudaipc_writer_publish_copy(writer_, frame.data(), 100, nullptr, 0, 0, 100),
            CUDAIPC_ERROR_INVALID_ARGUMENT);  // rows shorter than the frame's
}

// A stride that holds plane 0's rows but not a chroma plane's (odd widths) is refused before
// anything is read or waited for: the copy would read past the caller's frame.
TEST_F(Writer, PublishCopyRefusesAStrideTooShortForAChromaPlane) {
  cudaipc_writer_options o = options("NV12", 321, 241);
  ASSERT_EQ(open(o), CUDAIPC_OK);
  std::vector<uint8_t> frame(321 * 241 * 2);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(cudaipc_writer_publish_copy(writer_, frame.data(), 321, nullptr, CUDAIPC_NO_TIMESTAMP,
                                        CUDAIPC_NO_TIMESTAMP, 5000),
            CUDAIPC_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cudaipc_last_error()).find("plane 1"), std::string::npos)
      << cudaipc_last_error();
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(1000));
  EXPECT_EQ(stats().frames_abandoned, 0u);
  EXPECT_EQ(cudaipc_writer_publish_copy(writer_, frame.data(), 322, nullptr, CUDAIPC_NO_TIMESTAMP,
                                        CUDAIPC_NO_TIMESTAMP, 5000),
            CUDAIPC_OK)
      << cudaipc_last_error();
}

TEST_F(Writer, BadOptionsAreRefusedWithASentence) {
  struct Case {
    const char* format;
    uint32_t width, height;
    const char* says;
  } cases[] = {{"MJPG", 64, 48, "cannot be published"},
               {"BGRx", 0, 48, "out of range"},
               {nullptr, 64, 48, "no format"},
               {"BGRx", 40000, 48, "out of range"}};
  for (const Case& c : cases) {
    cudaipc_writer_options o = options(c.format ? c.format : "", c.width, c.height);
    if (!c.format) o.format = nullptr;
    cudaipc_writer* w = nullptr;
    EXPECT_EQ(cudaipc_writer_open(&o, &w), CUDAIPC_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(cudaipc_last_error()).find(c.says), std::string::npos)
        << cudaipc_last_error();
  }
  cudaipc_writer_options o = options();
  o.struct_size = 0;
  cudaipc_writer* w = nullptr;
  EXPECT_EQ(cudaipc_writer_open(&o, &w), CUDAIPC_ERROR_INVALID_ARGUMENT);
  o = options();
  o.pool_size = 0;
  EXPECT_EQ(cudaipc_writer_open(&o, &w), CUDAIPC_ERROR_INVALID_ARGUMENT);
  o = options();
  o.memory = CUDAIPC_MEMORY_ANY;
  EXPECT_EQ(cudaipc_writer_open(&o, &w), CUDAIPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(cudaipc_writer_acquire(nullptr, 0, nullptr), CUDAIPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(cudaipc_slot_publish(nullptr, nullptr, 0, 0), CUDAIPC_ERROR_INVALID_ARGUMENT);
  cudaipc_slot_abandon(nullptr);
  cudaipc_writer_close(nullptr);
}

}  // namespace
