// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Checks the nvrtc compat library (nvrtc_compat.c) the way GStreamer 1.22 uses NVRTC: a kernel
// compiled with "--gpu-architecture=compute_52" through the library must give PTX for an
// architecture the real NVRTC supports, while the real NVRTC alone refuses compute_52 (else the
// library is not needed and the test says so). Needs no GPU: NVRTC compiles on the CPU.
//   nvrtc-compat-test /path/libcudaipc-nvrtc-compat.so
// Exit 0: pass, 1: fail, 77: skipped (no real NVRTC on this machine).
#include <dlfcn.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef nvrtcResult (*CreateFn)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                                const char* const*);
typedef nvrtcResult (*CompileFn)(nvrtcProgram, int, const char* const*);
typedef nvrtcResult (*SizeFn)(nvrtcProgram, size_t*);
typedef nvrtcResult (*PtxFn)(nvrtcProgram, char*);
typedef nvrtcResult (*DestroyFn)(nvrtcProgram*);

static const char kKernel[] = "extern \"C\" __global__ void my_kernel(void) {}";
static const char* const kOptions[] = {"--gpu-architecture=compute_52"};

// Compiles kKernel through `lib`; returns the NVRTC result and, on success, the PTX's ".target".
static nvrtcResult compile(void* lib, char* target, size_t target_size) {
  CreateFn create = (CreateFn)dlsym(lib, "nvrtcCreateProgram");
  CompileFn compile_program = (CompileFn)dlsym(lib, "nvrtcCompileProgram");
  SizeFn ptx_size = (SizeFn)dlsym(lib, "nvrtcGetPTXSize");
  PtxFn get_ptx = (PtxFn)dlsym(lib, "nvrtcGetPTX");
  DestroyFn destroy = (DestroyFn)dlsym(lib, "nvrtcDestroyProgram");
  if (!create || !compile_program || !ptx_size || !get_ptx || !destroy) {
    fprintf(stderr, "a symbol is missing: %s\n", dlerror());
    exit(1);
  }
  nvrtcProgram prog = NULL;
  nvrtcResult r = create(&prog, kKernel, "test.cu", 0, NULL, NULL);
  if (r != NVRTC_SUCCESS) return r;
  r = compile_program(prog, 1, kOptions);
  size_t size = 0;
  if (r == NVRTC_SUCCESS && ptx_size(prog, &size) == NVRTC_SUCCESS && size > 0) {
    char* ptx = malloc(size);
    if (ptx && get_ptx(prog, ptx) == NVRTC_SUCCESS) {
      const char* t = strstr(ptx, ".target ");
      if (t) snprintf(target, target_size, "%.*s", (int)strcspn(t, "\n"), t);
    }
    free(ptx);
  }
  destroy(&prog);
  return r;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s libcudaipc-nvrtc-compat.so\n", argv[0]);
    return 1;
  }
  const char* real_name = getenv("CUDAIPC_NVRTC_REAL");
  void* real = dlopen(real_name ? real_name : "libnvrtc.so", RTLD_NOW | RTLD_LOCAL);
  if (!real) {
    printf("SKIP: no real NVRTC to compare with (%s)\n", dlerror());
    return 77;
  }
  char target[64] = "";
  const nvrtcResult direct = compile(real, target, sizeof target);
  printf("real NVRTC, compute_52: %d %s\n", (int)direct, target);

  void* compat = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!compat) {
    fprintf(stderr, "FAIL: cannot load %s: %s\n", argv[1], dlerror());
    return 1;
  }
  target[0] = '\0';
  const nvrtcResult through = compile(compat, target, sizeof target);
  printf("through nvrtc-compat, compute_52: %d %s\n", (int)through, target);
  if (through != NVRTC_SUCCESS || strncmp(target, ".target sm_", 11) != 0) {
    fprintf(stderr, "FAIL: the compat library did not compile the kernel\n");
    return 1;
  }
  if (direct == NVRTC_SUCCESS)
    printf("note: this NVRTC still supports compute_52; the library changed nothing\n");
  else if (strcmp(target, ".target sm_52") == 0) {
    fprintf(stderr, "FAIL: compute_52 was refused but the PTX still targets sm_52\n");
    return 1;
  }
  printf("PASS\n");
  return 0;
}
