// SPDX-License-Identifier: LGPL-2.1-or-later
// Writes the seed corpus of the fuzz targets: usage `cudaipc-fuzz-make-seeds DIR` creates
// DIR/decode, DIR/producer, DIR/consumer and DIR/frame-layout. The checked-in seeds in
// tests/fuzz/corpus were made with it; run it again after changing the input language in
// fuzz_ops.h. Seeds are valid messages and well-behaved scenarios: the fuzzers mutate them into
// the hostile ones.
#include <gst/gst.h>
#include <gst/video/video.h>
#include <stdio.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz_ops.h"
#include "fuzz_util.h"
#include "protocol.h"

using cipc_fuzz::ConsumerOp;
using cipc_fuzz::HandshakeAnswer;
using cipc_fuzz::InputWriter;
using cipc_fuzz::ProducerOp;

namespace {

void write(const std::filesystem::path& dir, const std::string& name,
           const std::vector<uint8_t>& bytes) {
  std::filesystem::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

uint8_t op(ProducerOp o) {
  return static_cast<uint8_t>(o);
}
uint8_t op(ConsumerOp o) {
  return static_cast<uint8_t>(o);
}

// ---- decode: [descriptor count][datagram]

void decode_seeds(const std::filesystem::path& dir) {
  cipc::Hello hello;
  hello.memory_kind = cipc::MemoryKind::kHost;
  cipc::Welcome welcome;
  welcome.instance_id = 0x1234;
  cipc::Caps caps;
  caps.generation = 1;
  caps.frame_size = 115200;
  caps.caps = "video/x-raw, format=I420, width=320, height=240, framerate=30/1";
  cipc::Slot slot;
  slot.generation = 1;
  slot.index = 3;
  slot.size = 115200;
  cipc::Frame frame;
  frame.generation = 1;
  frame.slot = 3;
  frame.sequence = 7;
  frame.size = 115200;
  frame.n_planes = 3;
  frame.plane_offset = {0, 76800, 96000, 0};
  frame.plane_stride = {320, 160, 160, 0};
  frame.pts = 1000000;
  cipc::Release release;
  release.generation = 1;
  release.slot = 3;
  release.sequence = 7;
  cipc::Fence fence;
  fence.generation = 1;
  fence.slot = 3;
  cipc::Bye bye;
  bye.reason = cipc::Bye::kTimeout;
  cipc::ErrorMessage error;
  error.code = 8;
  error.text = "consumer (pid 42) leaves: protocol error";
  const std::vector<std::pair<std::string, cipc::Message>> messages = {
      {"hello", cipc::Message{hello}},
      {"welcome", cipc::Message{welcome}},
      {"caps", cipc::Message{caps}},
      {"slot", cipc::Message{slot}},
      {"frame", cipc::Message{frame}},
      {"release", cipc::Message{release}},
      {"fence", cipc::Message{fence}},
      {"eos", cipc::Message{cipc::Eos{}}},
      {"bye", cipc::Message{bye}},
      {"error", cipc::Message{error}},
      {"retire", cipc::Message{cipc::Retire{1, 2}}}};
  for (const auto& [name, message] : messages) {
    InputWriter w;
    w.u8(static_cast<uint8_t>(cipc::expected_fd_count(message.type())));
    w.bytes(cipc::encode(message));
    write(dir, name, w.data());
  }
}

// ---- producer: setup [max_in_flight, release step, hello step, flags] then operations

InputWriter producer_setup(uint8_t flags = 0) {
  InputWriter w;
  w.u8(3).u8(0x80).u8(0x80).u8(flags);  // long timeouts
  return w;
}

void connect_and_hello(InputWriter& w, uint8_t client) {
  w.u8(op(ProducerOp::kConnect));
  w.u8(op(ProducerOp::kHello)).u8(client).u8(1).u8(4).u8(0);
  w.u8(op(ProducerOp::kAwaitReply)).u8(client);
}

void release_first(InputWriter& w, uint8_t client) {
  w.u8(op(ProducerOp::kReleaseReceived)).u8(client).u8(0).u8(0).u8(0);
}

void producer_seeds(const std::filesystem::path& dir) {
  {  // one consumer streams and releases everything
    InputWriter w = producer_setup();
    connect_and_hello(w, 0);
    for (uint8_t i = 0; i < 4; ++i) {
      w.u8(op(ProducerOp::kPublish)).u8(i);
      w.u8(op(ProducerOp::kAwaitReply)).u8(0);
      release_first(w, 0);
    }
    w.u8(op(ProducerOp::kClose)).u8(0);
    write(dir, "stream-and-release", w.data());
  }
  {  // two consumers; one keeps its frames past the (short) release timeout
    InputWriter w;
    w.u8(3).u8(4).u8(0x80).u8(0);
    connect_and_hello(w, 0);
    connect_and_hello(w, 1);
    for (uint8_t i = 0; i < 3; ++i) {
      w.u8(op(ProducerOp::kPublish)).u8(i);
      w.u8(op(ProducerOp::kAwaitReply)).u8(0);
      w.u8(op(ProducerOp::kAwaitReply)).u8(1);
      release_first(w, 1);
    }
    w.u8(op(ProducerOp::kStall)).u8(9).u8(op(ProducerOp::kStall)).u8(3);
    w.u8(op(ProducerOp::kDrain)).u8(0);
    w.u8(op(ProducerOp::kPublish)).u8(3);
    w.u8(op(ProducerOp::kAwaitReply)).u8(1);
    write(dir, "stuck-consumer-times-out", w.data());
  }
  {  // caps change mid-stream, fences, EOS
    InputWriter w = producer_setup();
    connect_and_hello(w, 0);
    w.u8(op(ProducerOp::kPublish)).u8(0);
    w.u8(op(ProducerOp::kAwaitReply)).u8(0);
    w.u8(op(ProducerOp::kFenceReceived)).u8(0).u8(0).u8(0);
    w.u8(op(ProducerOp::kReleaseReceived)).u8(0).u8(0).u8(1).u8(0);
    w.u8(op(ProducerOp::kNewCaps));
    w.u8(op(ProducerOp::kPublish)).u8(1);
    w.u8(op(ProducerOp::kAwaitReply)).u8(0);
    release_first(w, 0);
    w.u8(op(ProducerOp::kEos));
    w.u8(op(ProducerOp::kAwaitReply)).u8(0);
    write(dir, "caps-change-fence-eos", w.data());
  }
  {  // frames before any caps, then caps
    InputWriter w = producer_setup(1);
    connect_and_hello(w, 0);
    w.u8(op(ProducerOp::kPublish)).u8(0);
    w.u8(op(ProducerOp::kNewCaps));
    w.u8(op(ProducerOp::kPublish)).u8(0);
    w.u8(op(ProducerOp::kAwaitReply)).u8(0);
    write(dir, "frames-before-caps", w.data());
  }
  {  // a bad client next to a good one
    InputWriter w = producer_setup();
    connect_and_hello(w, 0);
    w.u8(op(ProducerOp::kConnect));
    w.u8(op(ProducerOp::kRawBytes)).u8(1).u16(16).bytes(std::vector<uint8_t>(16, 0x43));
    w.u8(op(ProducerOp::kConnect));
    // HELLO (type byte 0: kind, max_in_flight, pid) carrying two memfds
    w.u8(op(ProducerOp::kWithDescriptors)).u8(2).u8(2).u8(0).u8(0).u8(1).u8(4).u32(0);
    w.u8(op(ProducerOp::kPublish)).u8(0);
    w.u8(op(ProducerOp::kAwaitReply)).u8(0);
    release_first(w, 0);
    write(dir, "hostile-next-to-good", w.data());
  }
}

// ---- consumer: setup [max_in_flight, answer, answer parameters] then operations

InputWriter welcomed() {
  InputWriter w;
  w.u8(3).u8(static_cast<uint8_t>(HandshakeAnswer::kWelcome)).u64(0x5eed).u8(3).u8(0);
  return w;
}

void caps(InputWriter& w, uint8_t generation, uint32_t frame_size) {
  const std::string c = "video/x-raw, format=GRAY8, width=64, height=64";
  w.u8(op(ConsumerOp::kCaps)).u8(generation).u32(frame_size).u8(static_cast<uint8_t>(c.size()));
  w.bytes(std::vector<uint8_t>(c.begin(), c.end()));
}

void slot(InputWriter& w, uint8_t generation, uint16_t index, uint32_t size) {
  w.u8(op(ConsumerOp::kSlot)).u8(generation).u16(index).u32(size).u8(0).u8(0);
}

void frame(InputWriter& w, uint8_t generation, uint16_t index, uint32_t size) {
  w.u8(op(ConsumerOp::kFrame)).u8(generation).u16(index).u32(size).u8(1).u32(0).u16(64);
}

void consumer_seeds(const std::filesystem::path& dir) {
  {  // caps, two slots, frames, releases in another order
    InputWriter w = welcomed();
    caps(w, 1, 4096);
    slot(w, 1, 0, 4096);
    frame(w, 1, 0, 4096);
    slot(w, 1, 1, 4096);
    frame(w, 1, 1, 4096);
    frame(w, 1, 0, 4096);
    for (int i = 0; i < 4; ++i) w.u8(op(ConsumerOp::kNext));
    w.u8(op(ConsumerOp::kDropFrame)).u8(1);
    w.u8(op(ConsumerOp::kDrain));
    w.u8(op(ConsumerOp::kDropFrame)).u8(0);
    w.u8(op(ConsumerOp::kDrain));
    w.u8(op(ConsumerOp::kEos)).u8(op(ConsumerOp::kNext));
    write(dir, "stream", w.data());
  }
  {  // a new generation while frames of the old one are held, then the producer leaves
    InputWriter w = welcomed();
    caps(w, 1, 4096);
    slot(w, 1, 0, 4096);
    frame(w, 1, 0, 4096);
    w.u8(op(ConsumerOp::kNext)).u8(op(ConsumerOp::kNext));
    caps(w, 2, 8192);
    slot(w, 2, 0, 8192);
    frame(w, 2, 0, 8192);
    w.u8(op(ConsumerOp::kNext)).u8(op(ConsumerOp::kNext));
    w.u8(op(ConsumerOp::kBye)).u8(1).u8(op(ConsumerOp::kNext));
    w.u8(op(ConsumerOp::kDropFrame)).u8(0).u8(op(ConsumerOp::kDrain));
    write(dir, "generation-change-then-bye", w.data());
  }
  {  // frames held past the consumer's destruction
    InputWriter w = welcomed();
    caps(w, 1, 4096);
    slot(w, 1, 2, 4096);
    frame(w, 1, 2, 4096);
    w.u8(op(ConsumerOp::kNext)).u8(op(ConsumerOp::kNext));
    w.u8(op(ConsumerOp::kDestroy)).u8(op(ConsumerOp::kDropFrame)).u8(0);
    write(dir, "frames-outlive-consumer", w.data());
  }
  {  // refused at the handshake
    InputWriter w;
    const std::string text = "consumer runs as uid 1000 but this producer runs as uid 0";
    w.u8(4).u8(static_cast<uint8_t>(HandshakeAnswer::kError)).u32(12);
    w.u8(static_cast<uint8_t>(text.size())).bytes(std::vector<uint8_t>(text.begin(), text.end()));
    write(dir, "refused", w.data());
  }
}

// ---- frame-layout: [format][width-1][height-1 (u16, mod 1088)][size choice][n_planes][per
// plane: flag, off, stride]

// One seed: format `index` of `formats` at width x height, in its default layout.
void frame_layout_seed(const std::filesystem::path& dir, const GstVideoFormat* formats, guint index,
                       guint width, guint height, const std::string& name) {
  GstVideoInfo info;
  if (!gst_video_info_set_format(&info, formats[index], width, height)) return;
  InputWriter w;
  w.u8(static_cast<uint8_t>(index))
      .u8(static_cast<uint8_t>(width - 1))
      .u16(static_cast<uint16_t>(height - 1))
      .u32(static_cast<uint32_t>(GST_VIDEO_INFO_SIZE(&info) - 1));
  w.u8(static_cast<uint8_t>(GST_VIDEO_INFO_N_PLANES(&info)));
  for (guint p = 0; p < cipc::kMaxPlanes; ++p) w.u8(1).u32(0).u32(8);
  write(dir, name, w.data());
}

void frame_layout_seeds(const std::filesystem::path& dir) {
  guint n = 0;
  const GstVideoFormat* formats = gst_video_formats_raw(&n);
  for (guint i = 0; i < n; i += 7)
    frame_layout_seed(dir, formats, i, 64, 48, gst_video_format_to_string(formats[i]));
  // A palette format taller than its 256 palette entries (issue 24, item 4).
  for (guint i = 0; i < n; ++i)
    if (formats[i] == GST_VIDEO_FORMAT_RGB8P)
      frame_layout_seed(dir, formats, i, 64, 300, "RGB8P-64x300");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 1;
  }
  gst_init(nullptr, nullptr);
  const std::filesystem::path dir(argv[1]);
  decode_seeds(dir / "decode");
  producer_seeds(dir / "producer");
  consumer_seeds(dir / "consumer");
  frame_layout_seeds(dir / "frame-layout");
  printf("seeds written to %s\n", argv[1]);
  return 0;
}
