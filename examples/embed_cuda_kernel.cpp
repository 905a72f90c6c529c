// SPDX-License-Identifier: LGPL-2.1-or-later
// Embedding the consumer, the recommended way: frames of a cudasink-ipc in another process are
// read in place on the GPU by the application's own CUDA kernel, through the public header
// gst/cudaipc/gstcudaipcmemory.h. No copy of the frame is made anywhere: appsink hands over the
// producer's own slot (caps video/x-raw(memory:CUDAIPCMemory)) and the kernel reads it there.
//
// Per frame, everything is queued on this program's own CUDA stream and nothing waits on the CPU:
//   1. gst_cuda_ipc_memory_wait_ready: the stream waits, on the GPU, for the producer's write;
//   2. a kernel adds up each channel of the frame (channel_sums.cu) into a small device buffer;
//   3. gst_cuda_ipc_memory_record_release: the slot goes back to the producer once the stream is
//      past this point - the sample is dropped right after queueing it, not after the kernel;
//   4. the four sums are copied into pinned host memory and an event is recorded.
// Sums are printed once their event has completed (polled, not waited for, while frames come in).
// The frame is read-only - the producer and other consumers share it: never write into it.
//
//   embed-cuda-kernel [SOCKET_PATH] [FRAMES]          (defaults: /tmp/cudaipc.sock, 300)
//
// The producer must share CUDA memory (cudasink-ipc memory=cuda, the default) of 4-byte pixels:
//   gst-launch-1.0 videotestsrc is-live=true ! video/x-raw,format=BGRA,width=1920,height=1080 !
//       cudasink-ipc socket-path=/tmp/cudaipc.sock
//
// Exit status: 0 done (FRAMES frames, or the stream ended), 1 bad arguments, 2 could not start
// (no usable GPU, plugin not found, no producer, frames not in CUDA memory or not 4-byte pixels),
// 3 a failure while streaming.
//
// embed_consumer.cpp is the CPU fallback: it maps frames, one device-to-host copy per frame.
#include <cuda_runtime.h>
#include <gst/app/gstappsink.h>
#include <gst/cudaipc/gstcudaipcmemory.h>
#include <gst/gst.h>
#include <gst/video/video.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "channel_sums.h"

namespace {

enum ExitStatus { kExitDone = 0, kExitUsage = 1, kExitCannotStart = 2, kExitStreamFailed = 3 };

constexpr int kChannels = 4;
// Frame n keeps its sums in result slot n % kResultSlots until they are printed. By the time a
// slot comes round again its sums have long arrived; the CPU waits only if the GPU falls this
// many frames behind (counted in `cpu_waits`).
constexpr guint64 kResultSlots = 8;
constexpr GstClockTime kPullInterval = 100 * GST_MSECOND;
constexpr GstClockTime kMaxIdle = 10 * GST_SECOND;

bool cuda_ok(cudaError_t status, const char* doing) {
  if (status == cudaSuccess) return true;
  fprintf(stderr, "CUDA failed while %s: %s (%s).\n", doing, cudaGetErrorString(status),
          cudaGetErrorName(status));
  return false;
}

// What is printed with a frame's sums, once they are back.
struct FrameRecord {
  GstClockTime pts = GST_CLOCK_TIME_NONE;
  int width = 0;
  int height = 0;
  const char* format = "";  // GStreamer's name; its letters name the bytes of a pixel in order
};

// The CUDA side: one stream, and the result slots (device sums, pinned copies, events).
struct GpuWork {
  int device = -1;
  cudaStream_t stream = nullptr;
  unsigned long long* device_sums = nullptr;  // kResultSlots x kChannels
  unsigned long long* host_sums = nullptr;    // pinned: the copy back is truly asynchronous
  cudaEvent_t sums_arrived[kResultSlots] = {};
  FrameRecord records[kResultSlots];
  guint64 submitted = 0;  // frames queued on the stream
  guint64 reported = 0;   // frames whose sums were printed (always the oldest first)
  guint64 cpu_waits = 0;  // times the CPU had to wait for sums that had not arrived yet

  bool start(int cuda_device) {
    device = cuda_device;
    if (!cuda_ok(cudaSetDevice(device), "selecting the producer's GPU")) return false;
    cudaDeviceProp properties;
    if (!cuda_ok(cudaGetDeviceProperties(&properties, device), "reading the GPU's properties"))
      return false;
    printf("Reading frames in place on GPU %d (%s).\n", device, properties.name);
    if (!cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "creating a stream") ||
        !cuda_ok(cudaMalloc(&device_sums, sizeof(*device_sums) * kChannels * kResultSlots),
                 "allocating the sums on the GPU") ||
        !cuda_ok(cudaMallocHost(&host_sums, sizeof(*host_sums) * kChannels * kResultSlots),
                 "allocating pinned host memory for the sums"))
      return false;
    for (cudaEvent_t& event : sums_arrived)
      if (!cuda_ok(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "creating an event"))
        return false;
    return true;
  }

  // Prints the sums that have arrived, oldest first; frames before `wait_before` are waited for.
  bool report(guint64 wait_before) {
    while (reported < submitted) {
      const guint64 slot = reported % kResultSlots;
      cudaError_t status = cudaEventQuery(sums_arrived[slot]);
      if (status == cudaErrorNotReady) {
        (void)cudaGetLastError();  // not an error: keep it from being taken for the next one's
        if (reported >= wait_before) return true;  // still on the GPU: print it later
        ++cpu_waits;
        status = cudaEventSynchronize(sums_arrived[slot]);
      }
      if (!cuda_ok(status, "computing a frame's sums")) return false;
      const FrameRecord& record = records[slot];
      const unsigned long long* sums = host_sums + slot * kChannels;
      const double pixels = double(record.width) * record.height;
      printf("frame %" G_GUINT64_FORMAT ": %s %dx%d, pts %" GST_TIME_FORMAT ", mean", reported,
             record.format, record.width, record.height, GST_TIME_ARGS(record.pts));
      for (int c = 0; c < kChannels; ++c)
        printf(" %c %.2f", record.format[c], double(sums[c]) / pixels);
      printf("\n");
      ++reported;
    }
    return true;
  }

  // Queues the frame's work. The sample is dropped here, before the GPU has read the frame: the
  // recorded release keeps the producer from rewriting the slot until the kernel is done.
  bool submit(GstSample* sample, GstMemory* memory, guint64 frame_ptr, int pitch,
              const FrameRecord& record) {
    // Slot reuse: the sums of frame `submitted - kResultSlots` must have been printed.
    if (!report(submitted + 1 > kResultSlots ? submitted + 1 - kResultSlots : 0)) {
      gst_sample_unref(sample);
      return false;
    }
    const guint64 slot = submitted % kResultSlots;
    unsigned long long* sums = device_sums + slot * kChannels;
    if (!gst_cuda_ipc_memory_wait_ready(memory, stream)) {
      fprintf(stderr,
              "Could not make the stream wait for the producer's frame (a CUDA error in "
              "the plugin; GST_DEBUG=3 may say more).\n");
      gst_sample_unref(sample);
      return false;
    }
    const bool queued =
        cuda_ok(cudaMemsetAsync(sums, 0, sizeof(*sums) * kChannels, stream), "clearing the sums") &&
        cuda_ok(queue_channel_sums(reinterpret_cast<const void*>(uintptr_t(frame_ptr)),
                                   size_t(pitch), record.width, record.height, sums, stream),
                "starting the kernel");
    // Recorded even if queueing failed, so that whatever reached the stream is ordered before
    // the producer's next write into this slot.
    const bool released = gst_cuda_ipc_memory_record_release(memory, stream);
    gst_sample_unref(sample);
    if (!released)
      fprintf(stderr,
              "Could not record the frame's release on the stream (a CUDA error in the "
              "plugin; GST_DEBUG=3 may say more).\n");
    if (!queued || !released) return false;
    if (!cuda_ok(cudaMemcpyAsync(host_sums + slot * kChannels, sums, sizeof(*sums) * kChannels,
                                 cudaMemcpyDeviceToHost, stream),
                 "copying the sums back") ||
        !cuda_ok(cudaEventRecord(sums_arrived[slot], stream), "recording an event"))
      return false;
    records[slot] = record;
    ++submitted;
    return true;
  }

  void stop() {
    if (device < 0) return;
    if (stream) cuda_ok(cudaStreamSynchronize(stream), "finishing the last frames");
    for (cudaEvent_t event : sums_arrived)
      if (event) cudaEventDestroy(event);
    cudaFreeHost(host_sums);
    cudaFree(device_sums);
    if (stream) cudaStreamDestroy(stream);
  }
};

// Prints the first error on the pipeline's bus as the element worded it; false if there is none.
bool print_pipeline_error(GstElement* pipeline) {
  GstBus* bus = gst_element_get_bus(pipeline);
  GstMessage* message = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR);
  gst_object_unref(bus);
  if (!message) return false;
  GError* error = nullptr;
  gchar* details = nullptr;
  gst_message_parse_error(message, &error, &details);
  fprintf(stderr, "%s: %s\n", GST_OBJECT_NAME(GST_MESSAGE_SRC(message)), error->message);
  if (details) fprintf(stderr, "  (%s)\n", details);
  g_error_free(error);
  g_free(details);
  gst_message_unref(message);
  return true;
}

// cudasrc-ipc's own count of copies: both stay 0 when frames are read in place.
void print_source_stats(GstElement* source) {
  GstStructure* stats = nullptr;
  g_object_get(source, "stats", &stats, nullptr);
  if (!stats) return;
  guint64 received = 0, skipped = 0, downloads = 0, device_copies = 0;
  gst_structure_get_uint64(stats, "frames-received", &received);
  gst_structure_get_uint64(stats, "frames-skipped", &skipped);
  gst_structure_get_uint64(stats, "downloads", &downloads);
  gst_structure_get_uint64(stats, "device-copies", &device_copies);
  printf("cudasrc-ipc: %" G_GUINT64_FORMAT " frames received, %" G_GUINT64_FORMAT
         " skipped, %" G_GUINT64_FORMAT " downloads, %" G_GUINT64_FORMAT " device copies.\n",
         received, skipped, downloads, device_copies);
  gst_structure_free(stats);
}

// The pixel layouts the kernel reads: four 8-bit channels, one plane.
bool is_four_byte_pixel(GstVideoFormat format) {
  switch (format) {
    case GST_VIDEO_FORMAT_BGRA:
    case GST_VIDEO_FORMAT_BGRx:
    case GST_VIDEO_FORMAT_RGBA:
    case GST_VIDEO_FORMAT_RGBx:
    case GST_VIDEO_FORMAT_ARGB:
    case GST_VIDEO_FORMAT_xRGB:
    case GST_VIDEO_FORMAT_ABGR:
    case GST_VIDEO_FORMAT_xBGR: return true;
    default: return false;
  }
}

// Reads `max_frames` frames (fewer if the stream ends). Returns an ExitStatus.
int stream_frames(GstElement* pipeline, GstAppSink* sink, guint64 max_frames, GpuWork& gpu) {
  GstClockTime idle = 0;
  gint64 first_frame_us = 0;
  while (gpu.submitted < max_frames) {
    if (!gpu.report(0)) return kExitStreamFailed;
    GstSample* sample = gst_app_sink_try_pull_sample(sink, kPullInterval);
    if (!sample) {
      if (print_pipeline_error(pipeline))
        return gpu.submitted ? kExitStreamFailed : kExitCannotStart;
      if (gst_app_sink_is_eos(sink)) {
        printf("The stream ended.\n");
        break;
      }
      if ((idle += kPullInterval) >= kMaxIdle) {
        fprintf(stderr, "No frame for %d s: is the producer stalled or paused?\n",
                int(kMaxIdle / GST_SECOND));
        return kExitStreamFailed;
      }
      continue;
    }
    idle = 0;
    GstBuffer* buffer = gst_sample_get_buffer(sample);
    GstMemory* memory =
        gst_buffer_n_memory(buffer) == 1 ? gst_buffer_peek_memory(buffer, 0) : nullptr;
    const GstCudaIpcMemoryInfo* cuda = gst_cuda_ipc_memory_get_info(memory);
    if (!cuda) {
      fprintf(stderr,
              "The frames are not in CUDA memory: the producer shares host memory. Start "
              "it with cudasink-ipc memory=cuda (the default; it needs a GPU), or read "
              "host frames with embed-consumer, which maps them on the CPU.\n");
      gst_sample_unref(sample);
      return kExitCannotStart;
    }
    GstVideoInfo info;
    guint64 frame_ptr = 0;
    int pitch = 0;
    if (!gst_video_info_from_caps(&info, gst_sample_get_caps(sample)) ||
        !is_four_byte_pixel(GST_VIDEO_INFO_FORMAT(&info))) {
      fprintf(stderr,
              "The producer sends %s; this example's kernel reads 4-byte pixels (BGRA, "
              "BGRx, RGBA, RGBx, ARGB, xRGB, ABGR, xBGR).\n",
              gst_video_format_to_string(GST_VIDEO_INFO_FORMAT(&info)));
      gst_sample_unref(sample);
      return gpu.submitted ? kExitStreamFailed : kExitCannotStart;
    }
    if (!gst_cuda_ipc_buffer_get_plane(buffer, 0, &frame_ptr, &pitch) || frame_ptr % 4 ||
        pitch % 4) {
      fprintf(stderr,
              "The frame has no usable plane description (GstVideoMeta, 4-byte aligned "
              "rows): the producer's plugin may be of another version.\n");
      gst_sample_unref(sample);
      return kExitStreamFailed;
    }
    if (gpu.device < 0) {
      if (!gpu.start(cuda->device)) {
        gst_sample_unref(sample);
        return kExitCannotStart;
      }
      first_frame_us = g_get_monotonic_time();
    } else if (cuda->device != gpu.device) {
      fprintf(stderr,
              "The frames moved from GPU %d to GPU %d (a new producer?); this example "
              "stays on one GPU.\n",
              gpu.device, cuda->device);
      gst_sample_unref(sample);
      return kExitStreamFailed;
    }
    FrameRecord record;
    record.pts = GST_BUFFER_PTS(buffer);
    record.width = GST_VIDEO_INFO_WIDTH(&info);
    record.height = GST_VIDEO_INFO_HEIGHT(&info);
    record.format = gst_video_format_to_string(GST_VIDEO_INFO_FORMAT(&info));
    if (!gpu.submit(sample, memory, frame_ptr, pitch, record)) return kExitStreamFailed;
  }
  if (!gpu.report(gpu.submitted)) return kExitStreamFailed;  // the last few sums
  if (gpu.submitted > 0) {
    const double seconds = (g_get_monotonic_time() - first_frame_us) / 1e6;
    printf("%" G_GUINT64_FORMAT
           " frames in %.2f s: %.1f frames/s; the CPU waited for sums %" G_GUINT64_FORMAT
           " time(s) while streaming.\n",
           gpu.submitted, seconds, seconds > 0 ? gpu.submitted / seconds : 0.0, gpu.cpu_waits);
  }
  return kExitDone;
}

}  // namespace

int main(int argc, char** argv) {
  gst_init(&argc, &argv);
  if (argc > 3 || (argc > 1 && (g_str_equal(argv[1], "-h") || g_str_equal(argv[1], "--help")))) {
    fprintf(stderr, "usage: %s [SOCKET_PATH] [FRAMES]\n", argv[0]);
    return kExitUsage;
  }
  const char* socket_path = argc > 1 ? argv[1] : "/tmp/cudaipc.sock";
  const long long max_frames = argc > 2 ? atoll(argv[2]) : 300;
  if (max_frames <= 0) {
    fprintf(stderr, "FRAMES must be a positive number, not '%s'.\n", argv[2]);
    return kExitUsage;
  }

  // Fail early, before claiming any of the producer's slots, where there is no GPU to read on.
  int gpu_count = 0;
  const cudaError_t probe = cudaGetDeviceCount(&gpu_count);
  if (probe != cudaSuccess || gpu_count == 0) {
    const char* why =
        probe == cudaErrorInsufficientDriver ? "no NVIDIA driver is loaded, or it is too old for "
                                               "the CUDA runtime this program was built with"
        : probe == cudaErrorNoDevice || probe == cudaSuccess ? "no CUDA device is visible"
                                                             : cudaGetErrorString(probe);
    fprintf(stderr,
            "This example reads frames with a CUDA kernel, and no CUDA GPU is usable "
            "here: %s. Without a GPU, read a producer started with memory=host using "
            "embed-consumer or read-frames.\n",
            why);
    return kExitCannotStart;
  }

  GstElement* pipeline = gst_pipeline_new("consumer");
  GstElement* source = gst_element_factory_make("cudasrc-ipc", "cudasrc-ipc");
  GstElement* sink = gst_element_factory_make("appsink", "appsink");
  if (!source || !sink) {
    fprintf(stderr,
            "The GStreamer element %s was not found: install the plugin, or set "
            "GST_PLUGIN_PATH to the build's gst/ folder.\n",
            source ? "appsink" : "cudasrc-ipc");
    return kExitCannotStart;
  }
  g_object_set(source, "socket-path", socket_path, nullptr);
  // CUDA memory caps, plus system memory only so that a host-memory producer is recognised and
  // named (above) rather than failing negotiation with a less telling error.
  GstCaps* caps =
      gst_caps_from_string("video/x-raw(" GST_CAPS_FEATURE_MEMORY_CUDA_IPC "); video/x-raw");
  // A sample holds the producer's slot until it is dropped: keep few, and no "last sample".
  g_object_set(sink, "caps", caps, "sync", FALSE, "max-buffers", 2, "drop", TRUE,
               "enable-last-sample", FALSE, nullptr);
  gst_caps_unref(caps);
  gst_bin_add_many(GST_BIN(pipeline), source, sink, nullptr);
  gst_element_link(source, sink);

  int status = kExitCannotStart;
  GpuWork gpu;
  if (gst_element_set_state(pipeline, GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE) {
    if (!print_pipeline_error(pipeline)) fprintf(stderr, "The pipeline could not start.\n");
  } else {
    printf("Waiting for frames from '%s'.\n", socket_path);
    status = stream_frames(pipeline, GST_APP_SINK(sink), guint64(max_frames), gpu);
  }
  if (gpu.submitted > 0) print_source_stats(source);
  gpu.stop();  // first, so that no work of ours still reads a slot when the pipeline lets go
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);
  return status;
}
