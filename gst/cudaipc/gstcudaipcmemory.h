/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Public, header-only API for applications and elements that handle cudaipc frames in CUDA
 * memory (caps feature "memory:CUDAIPCMemory"), e.g. an appsink consumer of cudasrc-ipc or a GPU
 * element writing into cudasink-ipc's pool. No library to link: the functions are reached
 * through a table that the plugin attaches to each memory.
 *
 * Reading a frame (consumer):
 *   guint64 ptr; gint pitch;
 *   gst_cuda_ipc_buffer_get_plane (buffer, 0, &ptr, &pitch);
 *   gst_cuda_ipc_memory_wait_ready (mem, stream);     // GPU-side wait for the producer's write
 *   my_kernel<<<..., stream>>> ((const uchar4 *) ptr, pitch, ...);
 *   gst_cuda_ipc_memory_record_release (mem, stream); // GPU-side: the producer may rewrite
 *   gst_buffer_unref (buffer);                        //   the slot once this stream is past here
 *
 * Writing a frame (producer, into a buffer from cudasink-ipc's pool):
 *   gst_cuda_ipc_memory_begin_write (mem, stream);    // waits for consumers' release fences
 *   my_kernel<<<..., stream>>> (...);
 *   gst_cuda_ipc_memory_end_write (mem, stream);      // records readiness; no CPU sync
 *   gst_pad_push (srcpad, buffer);
 *
 * Mapping such memory with gst_buffer_map() also works (through a copy to host memory), so
 * elements that know nothing of CUDA never crash on it; they are just slower.
 */
#ifndef GST_CUDA_IPC_MEMORY_H
#define GST_CUDA_IPC_MEMORY_H

#include <gst/gst.h>
#include <gst/video/video.h>

G_BEGIN_DECLS

#define GST_CAPS_FEATURE_MEMORY_CUDA_IPC "memory:CUDAIPCMemory"
#define GST_CUDA_IPC_MEMORY_TYPE "CudaIpcSlotMemory"

typedef struct _GstCudaIpcMemoryInfo GstCudaIpcMemoryInfo;

/* Describes one slot in CUDA memory. Fields are only ever added at the end; check struct_size. */
struct _GstCudaIpcMemoryInfo {
  guint32 struct_size;
  gint device;         /* CUDA device ordinal in this process */
  guint64 device_ptr;  /* CUdeviceptr of the slot's first byte (add GstMemory offset) */
  guint64 slot_size;
  /* `stream` is a cudaStream_t (NULL: the legacy default stream). Return FALSE on CUDA errors. */
  gboolean (*wait_ready) (GstMemory * mem, gpointer stream);
  gboolean (*record_release) (GstMemory * mem, gpointer stream);
  gboolean (*begin_write) (GstMemory * mem, gpointer stream);
  gboolean (*end_write) (GstMemory * mem, gpointer stream);
};

typedef struct {
  GstMemory mem;
  const GstCudaIpcMemoryInfo *cuda; /* NULL for host (memfd) slots */
} GstCudaIpcMemory;

/* The CUDA description of `mem`, or NULL if it is not cudaipc CUDA memory. */
static inline const GstCudaIpcMemoryInfo *
gst_cuda_ipc_memory_get_info (GstMemory * mem)
{
  if (mem == NULL || !gst_memory_is_type (mem, GST_CUDA_IPC_MEMORY_TYPE))
    return NULL;
  return ((GstCudaIpcMemory *) mem)->cuda;
}

/* Device address and pitch (bytes) of `plane` of a video buffer in cudaipc CUDA memory. */
static inline gboolean
gst_cuda_ipc_buffer_get_plane (GstBuffer * buffer, guint plane, guint64 * device_ptr, gint * pitch)
{
  GstMemory *mem;
  const GstCudaIpcMemoryInfo *info;
  GstVideoMeta *meta;
  if (gst_buffer_n_memory (buffer) != 1)
    return FALSE;
  mem = gst_buffer_peek_memory (buffer, 0);
  info = gst_cuda_ipc_memory_get_info (mem);
  meta = gst_buffer_get_video_meta (buffer);
  if (info == NULL || meta == NULL || plane >= meta->n_planes)
    return FALSE;
  *device_ptr = info->device_ptr + mem->offset + meta->offset[plane];
  *pitch = meta->stride[plane];
  return TRUE;
}

static inline gboolean
gst_cuda_ipc_memory_wait_ready (GstMemory * mem, gpointer stream)
{
  const GstCudaIpcMemoryInfo *info = gst_cuda_ipc_memory_get_info (mem);
  return info != NULL && info->wait_ready (mem, stream);
}

static inline gboolean
gst_cuda_ipc_memory_record_release (GstMemory * mem, gpointer stream)
{
  const GstCudaIpcMemoryInfo *info = gst_cuda_ipc_memory_get_info (mem);
  return info != NULL && info->record_release (mem, stream);
}

static inline gboolean
gst_cuda_ipc_memory_begin_write (GstMemory * mem, gpointer stream)
{
  const GstCudaIpcMemoryInfo *info = gst_cuda_ipc_memory_get_info (mem);
  return info != NULL && info->begin_write (mem, stream);
}

static inline gboolean
gst_cuda_ipc_memory_end_write (GstMemory * mem, gpointer stream)
{
  const GstCudaIpcMemoryInfo *info = gst_cuda_ipc_memory_get_info (mem);
  return info != NULL && info->end_write (mem, stream);
}

G_END_DECLS

#endif /* GST_CUDA_IPC_MEMORY_H */
