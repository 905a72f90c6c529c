// SPDX-License-Identifier: LGPL-2.1-or-later
// Embedding the consumer in an application, the CPU fallback: frames from a cudasink-ipc in
// another process, mapped on the CPU through appsink. Host-memory frames (memory=host) are read
// in place; mapping a CUDA frame costs one device-to-host copy per map. For CUDA frames the
// recommended way is embed_cuda_kernel.cpp: the application's own kernel reads them in place, no
// copy (docs/embedding.md compares the ways in). Keeping a GstSample keeps the producer's slot
// claimed; dropping it releases the slot - there is no other API to call.
//
//   embed-consumer [SOCKET_PATH] [FRAMES]
#include <gst/app/gstappsink.h>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  gst_init(&argc, &argv);
  const char* socket_path = argc > 1 ? argv[1] : "/tmp/cudaipc.sock";
  const int frames = argc > 2 ? atoi(argv[2]) : 100;

  gchar* launch = g_strdup_printf(
      "cudasrc-ipc socket-path=%s reconnect=true ! appsink name=sink sync=false max-buffers=2 "
      "drop=true enable-last-sample=false",
      socket_path);
  GError* error = nullptr;
  GstElement* pipeline = gst_parse_launch(launch, &error);
  g_free(launch);
  if (!pipeline) {
    fprintf(stderr, "%s (is GST_PLUGIN_PATH set to the plugin's folder?)\n", error->message);
    return 1;
  }
  GstElement* sink = gst_bin_get_by_name(GST_BIN(pipeline), "sink");
  gst_element_set_state(pipeline, GST_STATE_PLAYING);

  for (int i = 0; i < frames; ++i) {
    GstSample* sample = gst_app_sink_try_pull_sample(GST_APP_SINK(sink), 10 * GST_SECOND);
    if (!sample) {
      fprintf(stderr, "no frame for 10 s (or end of stream)\n");
      break;
    }
    GstVideoInfo info;
    gst_video_info_from_caps(&info, gst_sample_get_caps(sample));
    GstVideoFrame frame;
    // Read-only: the slot is shared with the producer and other consumers.
    if (gst_video_frame_map(&frame, &info, gst_sample_get_buffer(sample), GST_MAP_READ)) {
      const guint8* row0 = static_cast<const guint8*>(GST_VIDEO_FRAME_PLANE_DATA(&frame, 0));
      printf("frame %d: %s %dx%d, stride %d, pts %" GST_TIME_FORMAT ", first byte 0x%02x\n", i,
             gst_video_format_to_string(GST_VIDEO_INFO_FORMAT(&info)), GST_VIDEO_INFO_WIDTH(&info),
             GST_VIDEO_INFO_HEIGHT(&info), GST_VIDEO_FRAME_PLANE_STRIDE(&frame, 0),
             GST_TIME_ARGS(GST_BUFFER_PTS(gst_sample_get_buffer(sample))), row0[0]);
      gst_video_frame_unmap(&frame);
    }
    gst_sample_unref(sample);  // the producer's slot is released here
  }
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(sink);
  gst_object_unref(pipeline);
  return 0;
}
