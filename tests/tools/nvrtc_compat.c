// SPDX-License-Identifier: LGPL-2.1-or-later
//
// nvrtc compat: lets GStreamer 1.22's nvcodec (cudaconvert, cudascale) compile its kernels with
// the NVRTC of CUDA 13 or later.
//
// GStreamer 1.22 compiles every runtime kernel with "--gpu-architecture=compute_52", and only
// registers cudaconvert/cudascale when a test kernel compiles that way. CUDA 13's NVRTC no longer
// knows compute_52 (its oldest architecture is compute_75), so on a CUDA 13 machine the plugin
// silently leaves both elements out. This library stands in for libnvrtc.so: it forwards the
// seven functions GStreamer loads to the real NVRTC and raises a virtual architecture the real
// one does not support to the oldest one it does. The PTX is then JIT-compiled by the driver for
// the actual GPU as before.
//
//   GST_CUDA_NVRTC_LIBNAME=/path/libcudaipc-nvrtc-compat.so gst-inspect-1.0 cudaconvert
//
// CUDAIPC_NVRTC_REAL names the real library (default: libnvrtc.so, then libnvrtc.so.13). A
// failure to load it, or a missing symbol, makes every call return NVRTC_ERROR_INTERNAL_ERROR
// and prints one line naming the cause, so GStreamer reports a compile failure, not a crash.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

static const char kArchOption[] = "--gpu-architecture=compute_";

struct Real {
  nvrtcResult (*compile)(nvrtcProgram, int, const char* const*);
  nvrtcResult (*create)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                        const char* const*);
  nvrtcResult (*destroy)(nvrtcProgram*);
  nvrtcResult (*get_ptx)(nvrtcProgram, char*);
  nvrtcResult (*get_ptx_size)(nvrtcProgram, size_t*);
  nvrtcResult (*get_log)(nvrtcProgram, char*);
  nvrtcResult (*get_log_size)(nvrtcProgram, size_t*);
  nvrtcResult (*num_archs)(int*);
  nvrtcResult (*archs)(int*);
  int loaded;
};

static struct Real real;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void* symbol(void* lib, const char* name, int* ok) {
  void* f = dlsym(lib, name);
  if (!f) {
    fprintf(stderr, "nvrtc-compat: the real NVRTC has no %s\n", name);
    *ok = 0;
  }
  return f;
}

static void load(void) {
  const char* named = getenv("CUDAIPC_NVRTC_REAL");
  const char* candidates[] = {named, "libnvrtc.so", "libnvrtc.so.13"};
  void* lib = NULL;
  for (size_t i = 0; i < sizeof candidates / sizeof candidates[0] && !lib; ++i)
    if (candidates[i] && candidates[i][0]) lib = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "nvrtc-compat: cannot load the real NVRTC (%s); set CUDAIPC_NVRTC_REAL\n",
            dlerror());
    return;
  }
  // The real library must not resolve to this one (when both are called libnvrtc.so).
  if (dlsym(lib, "nvrtc_compat_marker")) {
    fprintf(stderr, "nvrtc-compat: libnvrtc.so is this library; set CUDAIPC_NVRTC_REAL\n");
    return;
  }
  int ok = 1;
  *(void**)&real.compile = symbol(lib, "nvrtcCompileProgram", &ok);
  *(void**)&real.create = symbol(lib, "nvrtcCreateProgram", &ok);
  *(void**)&real.destroy = symbol(lib, "nvrtcDestroyProgram", &ok);
  *(void**)&real.get_ptx = symbol(lib, "nvrtcGetPTX", &ok);
  *(void**)&real.get_ptx_size = symbol(lib, "nvrtcGetPTXSize", &ok);
  *(void**)&real.get_log = symbol(lib, "nvrtcGetProgramLog", &ok);
  *(void**)&real.get_log_size = symbol(lib, "nvrtcGetProgramLogSize", &ok);
  *(void**)&real.num_archs = symbol(lib, "nvrtcGetNumSupportedArchs", &ok);
  *(void**)&real.archs = symbol(lib, "nvrtcGetSupportedArchs", &ok);
  real.loaded = ok;
}

static int ready(void) {
  pthread_once(&once, load);
  return real.loaded;
}

// The oldest architecture the real NVRTC supports that is at least `wanted`; `wanted` itself
// when it is supported or the list cannot be read.
static int supported_arch(int wanted) {
  int n = 0;
  if (real.num_archs(&n) != NVRTC_SUCCESS || n <= 0 || n > 256) return wanted;
  int archs[256];
  if (real.archs(archs) != NVRTC_SUCCESS) return wanted;
  int best = 0;
  for (int i = 0; i < n; ++i) {
    if (archs[i] == wanted) return wanted;
    if (archs[i] > wanted && (best == 0 || archs[i] < best)) best = archs[i];
  }
  return best ? best : wanted;
}

EXPORT int nvrtc_compat_marker;

EXPORT nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int count, const char* const* options) {
  if (!ready()) return NVRTC_ERROR_INTERNAL_ERROR;
  if (count < 0 || count > 64) return real.compile(prog, count, options);
  const char* rewritten[64];
  char arch_option[64];
  for (int i = 0; i < count; ++i) {
    rewritten[i] = options[i];
    if (options[i] && strncmp(options[i], kArchOption, sizeof kArchOption - 1) == 0) {
      const int wanted = atoi(options[i] + sizeof kArchOption - 1);
      const int arch = supported_arch(wanted);
      if (arch != wanted) {
        snprintf(arch_option, sizeof arch_option, "%s%d", kArchOption, arch);
        rewritten[i] = arch_option;
      }
    }
  }
  return real.compile(prog, count, rewritten);
}

EXPORT nvrtcResult nvrtcCreateProgram(nvrtcProgram* prog, const char* src, const char* name,
                                      int headers, const char* const* sources,
                                      const char* const* names) {
  if (!ready()) return NVRTC_ERROR_INTERNAL_ERROR;
  return real.create(prog, src, name, headers, sources, names);
}

EXPORT nvrtcResult nvrtcDestroyProgram(nvrtcProgram* prog) {
  if (!ready()) return NVRTC_ERROR_INTERNAL_ERROR;
  return real.destroy(prog);
}

EXPORT nvrtcResult nvrtcGetPTX(nvrtcProgram prog, char* ptx) {
  if (!ready()) return NVRTC_ERROR_INTERNAL_ERROR;
  return real.get_ptx(prog, ptx);
}

EXPORT nvrtcResult nvrtcGetPTXSize(nvrtcProgram prog, size_t* size) {
  if (!ready()) return NVRTC_ERROR_INTERNAL_ERROR;
  return real.get_ptx_size(prog, size);
}

EXPORT nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char* log) {
  if (!ready()) return NVRTC_ERROR_INTERNAL_ERROR;
  return real.get_log(prog, log);
}

EXPORT nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t* size) {
  if (!ready()) return NVRTC_ERROR_INTERNAL_ERROR;
  return real.get_log_size(prog, size);
}
