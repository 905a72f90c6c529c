// SPDX-License-Identifier: LGPL-2.1-or-later
// Debayer kernel throughput against a device-to-device copy, measured in the same run.
//
//   bench-debayer [--iterations N] [--json FILE]
//
// Input: a camera-like frame (camera_frame below). For 1080p and 4K, bilinear and MHC, fixed and
// gray-world white balance, both precisions (fast: the default, within 1 code of the CPU
// reference; exact: bit-exact), input in device memory and in mapped pinned host memory: the mean
// GPU time per frame over N launches replayed from a CUDA graph (CUDA events around it; the copy is
// timed the same way), Gpixel/s, and the fraction of copy bandwidth:
//   kernel bytes = 2 (RAW10 word read) + 4 (BGRA written) per pixel
//   fraction     = (kernel bytes / kernel time) / (2 * copy bytes / copy time)
// where the copy is a cudaMemcpyAsync device-to-device of the BGRA frame (it reads and writes
// each byte once, hence 2 *). That is, 100% means the debayer moves its bytes as fast as the
// GPU's own copy engine path moves a frame. "one-by-one" is the time per frame when each run()
// is launched from the host in turn, as rg10tobgra does (the larger of GPU time and launch cost).
//
// Then rg10tobgra's two ways to a frame in its pinned pool (input-mode), for the default kernel
// (MHC, fast, fixed gains), frame by frame as the element queues them: in place (the kernel reads
// host memory over the bus) and uploaded (InputUploader: a copy engine uploads frame N + 1 on a
// stream of its own while the kernel debayers frame N); the input's GB/s is the RAW10 frame's
// bytes per frame time. Also what input-mode=auto measures (measure_input_paths) and chooses.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda_api.h"
#include "debayer_gpu.h"
#include "input_upload.h"
#include "mosaic.h"

namespace cb = cipc_bayer;
namespace cc = cipc_cuda;

namespace {

void die(const std::string& what) {
  std::fprintf(stderr, "bench-debayer: %s\n", what.c_str());
  std::exit(1);
}

void check(const cc::Status& st) {
  if (!st.is_ok()) die(st.message());
}

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorString(err));
}

// Milliseconds of GPU time between two events around what `enqueue` queues on `stream`;
// `joined`, a second stream whose work `stream` waits for, starts at the first event too.
template <typename Enqueue>
double elapsed_ms(cudaStream_t stream, Enqueue enqueue, cudaStream_t joined = nullptr) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  check(cudaEventRecord(start, stream), "cudaEventRecord");
  if (joined) check(cudaStreamWaitEvent(joined, start, 0), "cudaStreamWaitEvent");
  enqueue();
  check(cudaEventRecord(stop, stream), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return static_cast<double>(ms);
}

// Mean GPU milliseconds per call of `body`: `iterations` calls captured into a CUDA graph and
// replayed, so the time is the GPU's alone, not the host's cost of launching one by one.
template <typename Body>
double gpu_time_per_call(cudaStream_t stream, int iterations, Body body) {
  for (int i = 0; i < 3; ++i) body();  // warm-up
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  for (int i = 0; i < iterations; ++i) body();
  check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
  check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");  // warm-up
  const double ms =
      elapsed_ms(stream, [&] { check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch"); });
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return ms / iterations;
}

// Mean milliseconds per call of `body` over `iterations` calls queued back to back on `stream`
// (what a caller launching frame by frame sees: the larger of GPU time and launch cost).
template <typename Body>
double time_per_call(cudaStream_t stream, int iterations, Body body) {
  for (int i = 0; i < 5; ++i) body();  // warm-up
  return elapsed_ms(stream,
                    [&] {
                      for (int i = 0; i < iterations; ++i) body();
                    }) /
         iterations;
}

// A frame as a camera would give it: a smooth synthetic scene (gradients and waves), mosaicked
// into RGGB RAW10, with +-4 codes of noise. (Uniformly random samples would make the transfer
// table's lookups scatter as no picture does.)
std::vector<uint8_t> camera_frame(int width, int height) {
  std::vector<uint8_t> bgra(static_cast<size_t>(width) * height * 4);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* px = &bgra[(static_cast<size_t>(y) * width + x) * 4];
      px[0] = static_cast<uint8_t>(255 * x / width);
      px[1] = static_cast<uint8_t>(255 * y / height);
      px[2] = static_cast<uint8_t>(128 + 127 * std::sin(x / 37.0 + y / 53.0));
      px[3] = 255;
    }
  }
  std::vector<uint8_t> raw(static_cast<size_t>(width) * 2 * height);
  cb::mosaic_cpu(bgra.data(), static_cast<size_t>(width) * 4,
                 static_cast<int>(cb::MosaicInput::kBgra), raw.data(),
                 static_cast<size_t>(width) * 2, width, height, cb::MosaicParams{});
  std::mt19937 rng(1);
  for (size_t i = 0; i < raw.size(); i += 2) {
    int v = raw[i] | (raw[i + 1] << 8);
    v = std::min(1023, std::max(0, v + static_cast<int>(rng() % 9) - 4));
    raw[i] = static_cast<uint8_t>(v & 0xFF);
    raw[i + 1] = static_cast<uint8_t>(v >> 8);
  }
  return raw;
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 500;
  const char* json_path = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--iterations" && i + 1 < argc) {
      iterations = std::atoi(argv[++i]);
    } else if (arg == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else {
      die("usage: bench-debayer [--iterations N] [--json FILE]");
    }
  }
  std::string why;
  if (cc::device_count(&why) < 1) {
    std::fprintf(stderr, "bench-debayer: no CUDA device (%s)\n", why.c_str());
    return 77;
  }
  cc::DeviceInfo info;
  check(cc::query_device(0, &info));
  FILE* json = json_path ? std::fopen(json_path, "a") : nullptr;
  if (json_path && !json) die(std::string("cannot open ") + json_path);

  cc::Stream stream;
  check(cc::Stream::create(0, &stream));
  const auto s = static_cast<cudaStream_t>(stream.handle());
  cc::GpuDebayer debayer;
  check(cc::GpuDebayer::create(0, &debayer));

  struct Size {
    const char* name;
    int w, h;
  };
  std::printf("%-6s %-8s %-10s %-9s %-7s %9s %9s %10s %9s %9s %12s\n", "size", "method", "wb",
              "precision", "input", "us/frame", "Gpix/s", "kernel GB/s", "copy GB/s", "of copy",
              "one-by-one");
  for (const Size size : {Size{"1080p", 1920, 1080}, Size{"4K", 3840, 2160}}) {
    const size_t in_pitch = 2 * static_cast<size_t>(size.w);
    const size_t out_pitch = 4 * static_cast<size_t>(size.w);
    const size_t in_bytes = in_pitch * size.h, out_bytes = out_pitch * size.h;
    const std::vector<uint8_t> raw = camera_frame(size.w, size.h);
    cc::DeviceBuffer in_dev, out_dev, copy_dst;
    check(cc::DeviceBuffer::create(0, in_bytes, &in_dev));
    check(cc::DeviceBuffer::create(0, out_bytes, &out_dev));
    check(cc::DeviceBuffer::create(0, out_bytes, &copy_dst));
    cc::PinnedHostBuffer in_host;
    check(cc::PinnedHostBuffer::create(in_bytes, &in_host));
    std::memcpy(in_host.data(), raw.data(), in_bytes);
    cc::DevicePtr in_mapped = 0;
    check(cc::mapped_device_pointer(in_host.data(), &in_mapped));
    check(cc::copy_2d_async(reinterpret_cast<void*>(static_cast<uintptr_t>(in_dev.ptr())), in_bytes,
                            raw.data(), in_bytes, in_bytes, 1, stream.handle()));

    const double copy_ms = gpu_time_per_call(s, iterations, [&] {
      check(cudaMemcpyAsync(reinterpret_cast<void*>(static_cast<uintptr_t>(copy_dst.ptr())),
                            reinterpret_cast<void*>(static_cast<uintptr_t>(out_dev.ptr())),
                            out_bytes, cudaMemcpyDeviceToDevice, s),
            "cudaMemcpyAsync");
    });
    const double copy_gbs = 2.0 * out_bytes / (copy_ms * 1e-3) / 1e9;
    // For the mapped input: what an explicit upload of the same RAW10 frame would cost.
    const double upload_ms = gpu_time_per_call(s, iterations / 5 + 1, [&] {
      check(cudaMemcpyAsync(reinterpret_cast<void*>(static_cast<uintptr_t>(in_dev.ptr())),
                            in_host.data(), in_bytes, cudaMemcpyHostToDevice, s),
            "cudaMemcpyAsync");
    });
    std::printf("%-6s RAW10 upload (pinned host to device, cudaMemcpyAsync): %.1f us, %.1f GB/s\n",
                size.name, upload_ms * 1e3, in_bytes / (upload_ms * 1e-3) / 1e9);
    if (json) {
      std::fprintf(json,
                   "{\"bench\":\"debayer-upload\",\"gpu\":\"%s\",\"size\":\"%s\",\"bytes\":%zu,"
                   "\"us\":%.2f,\"gb_s\":%.2f}\n",
                   info.name.c_str(), size.name, in_bytes, upload_ms * 1e3,
                   in_bytes / (upload_ms * 1e-3) / 1e9);
    }

    {
      cc::DebayerParams p;  // the defaults: MHC, fast, fixed gains
      p.black_level = 50;
      check(debayer.configure(p, cc::WhiteBalance::kFixed, stream.handle()));
      cc::InputUploader uploader;
      check(cc::InputUploader::create(0, &uploader));
      const int n = iterations / 5 + 1;
      auto in_place = [&] {
        check(debayer.run(in_mapped, in_pitch, out_dev.ptr(), out_pitch, size.w, size.h,
                          stream.handle()));
      };
      auto uploaded = [&] {
        cc::DevicePtr in = 0;
        size_t pitch = 0;
        check(uploader.upload(in_host.data(), in_pitch, in_pitch, static_cast<size_t>(size.h),
                              stream.handle(), &in, &pitch));
        check(debayer.run(in, pitch, out_dev.ptr(), out_pitch, size.w, size.h, stream.handle()));
        check(uploader.kernel_queued(stream.handle()));
      };
      const double in_place_ms = time_per_call(s, n, in_place);
      for (int i = 0; i < 5; ++i) uploaded();  // warm-up
      const double uploaded_ms = elapsed_ms(
                                     s,
                                     [&] {
                                       for (int i = 0; i < n; ++i) uploaded();
                                     },
                                     static_cast<cudaStream_t>(uploader.copy_stream())) /
                                 n;
      cc::InputPathTimes times;
      check(cc::measure_input_paths(0, p, size.w, size.h, &times));
      const double gb = static_cast<double>(in_bytes) / 1e9;
      std::printf(
          "%-6s pinned input, MHC fast: in place %.1f us/frame (%.1f GB/s), uploaded %.1f "
          "us/frame (%.1f GB/s); input-mode=auto timed %.1f / %.1f us -> %s\n",
          size.name, in_place_ms * 1e3, gb / (in_place_ms * 1e-3), uploaded_ms * 1e3,
          gb / (uploaded_ms * 1e-3), times.in_place_us, times.upload_us,
          cc::input_path_name(times.faster()));
      if (json) {
        std::fprintf(json,
                     "{\"bench\":\"debayer-input\",\"gpu\":\"%s\",\"size\":\"%s\",\"bytes\":%zu,"
                     "\"in_place_us\":%.2f,\"in_place_gb_s\":%.2f,\"uploaded_us\":%.2f,"
                     "\"uploaded_gb_s\":%.2f,\"upload_only_us\":%.2f,\"auto_in_place_us\":%.2f,"
                     "\"auto_upload_us\":%.2f,\"auto_choice\":\"%s\"}\n",
                     info.name.c_str(), size.name, in_bytes, in_place_ms * 1e3,
                     gb / (in_place_ms * 1e-3), uploaded_ms * 1e3, gb / (uploaded_ms * 1e-3),
                     upload_ms * 1e3, times.in_place_us, times.upload_us,
                     cc::input_path_name(times.faster()));
      }
    }

    for (cc::Demosaic method : {cc::Demosaic::kBilinear, cc::Demosaic::kMhc}) {
      for (cc::WhiteBalance wb : {cc::WhiteBalance::kFixed, cc::WhiteBalance::kGrayWorld}) {
        for (cc::Precision precision : {cc::Precision::kFast, cc::Precision::kExact}) {
          for (bool mapped : {false, true}) {
            cc::DebayerParams p;
            p.method = method;
            p.black_level = 50;
            p.precision = precision;
            check(debayer.configure(p, wb, stream.handle()));
            const cc::DevicePtr in = mapped ? in_mapped : in_dev.ptr();
            auto run = [&] {
              check(debayer.run(in, in_pitch, out_dev.ptr(), out_pitch, size.w, size.h,
                                stream.handle()));
            };
            const int n = mapped ? iterations / 5 + 1 : iterations;
            const double ms = gpu_time_per_call(s, n, run);
            const double launched_ms = time_per_call(s, n, run);
            // What ran: kFast falls back to exact where its bound does not hold (not here).
            const char* precision_name =
                debayer.last_precision() == cc::Precision::kFast ? "fast" : "exact";
            const double pixels = static_cast<double>(size.w) * size.h;
            const double gpix = pixels / (ms * 1e-3) / 1e9;
            const double kernel_gbs = 6.0 * pixels / (ms * 1e-3) / 1e9;
            const char* method_name = method == cc::Demosaic::kMhc ? "mhc" : "bilinear";
            const char* wb_name = wb == cc::WhiteBalance::kGrayWorld ? "gray-world" : "fixed";
            const char* input = mapped ? "mapped" : "device";
            std::printf("%-6s %-8s %-10s %-9s %-7s %9.1f %9.2f %10.0f %9.0f %8.0f%% %9.1f us\n",
                        size.name, method_name, wb_name, precision_name, input, ms * 1e3, gpix,
                        kernel_gbs, copy_gbs, 100.0 * kernel_gbs / copy_gbs, launched_ms * 1e3);
            if (json) {
              std::fprintf(json,
                           "{\"bench\":\"debayer\",\"gpu\":\"%s\",\"size\":\"%s\",\"width\":%d,"
                           "\"height\":%d,\"method\":\"%s\",\"wb\":\"%s\",\"precision\":\"%s\","
                           "\"input\":\"%s\",\"us_per_frame\":%.2f,\"gpix_per_s\":%.3f,"
                           "\"kernel_gb_s\":%.1f,\"copy_gb_s\":%.1f,\"fraction_of_copy\":%.3f,"
                           "\"us_per_frame_launched\":%.2f}\n",
                           info.name.c_str(), size.name, size.w, size.h, method_name, wb_name,
                           precision_name, input, ms * 1e3, gpix, kernel_gbs, copy_gbs,
                           kernel_gbs / copy_gbs, launched_ms * 1e3);
            }
          }
        }
      }
    }
  }
  if (json) std::fclose(json);
  return 0;
}
