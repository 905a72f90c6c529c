// SPDX-License-Identifier: LGPL-2.1-or-later
//
// Self-test of the copy-audit injection library (libcudaipc-copy-audit.so).
//
// Run without arguments it is the checker: it needs a CUDA device (else it exits 77, which
// meson reports as SKIP), then starts two copies of itself at once as workers, each with
// CUDA_INJECTION64_PATH=<library>, COPY_AUDIT_OUTPUT=<one temporary file> and
// COPY_AUDIT_FRAMES=2, and checks the lines the library appended to that file against the
// operations the workers made. A worker does exactly:
//   3 x cudaMemcpy host->device, 1 MiB each      -> HtoD=3/3145728
//   2 x cudaMemcpy device->host, 4 KiB each      -> DtoH=2/8192
//   1 x cudaMemcpy device->device, 64 KiB        -> DtoD=1/65536
//   4 x cudaMemsetAsync, 256 bytes each          -> memset=4/1024
//
// The library is found through COPY_AUDIT_LIB (meson's test() sets it), else the first
// argument, else libcudaipc-copy-audit.so next to this executable.

#include <cuda_runtime_api.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace {

constexpr const char* kWorkerEnv = "COPY_AUDIT_SELFTEST_WORKER";
constexpr int kWorkers = 2;
constexpr size_t kHtoDBytes = 1u << 20;
constexpr size_t kDtoHBytes = 4u << 10;
constexpr size_t kDtoDBytes = 64u << 10;
constexpr size_t kMemsetBytes = 256;

constexpr const char* kExpectedCounts =
    "HtoD=3/3145728 DtoH=2/8192 DtoD=1/65536 PtoP=0/0 HtoH=0/0 other=0/0 memset=4/1024";
constexpr const char* kExpectedPerFrame =
    "copy-audit per-frame(2): HtoD=1.50 DtoH=1.00 DtoD=0.50 PtoP=0.00 HtoH=0.00 other=0.00 "
    "memset=2.00";

bool check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return true;
  fprintf(stderr, "copy-audit-selftest worker: %s: %s (%s)\n", what, cudaGetErrorName(err),
          cudaGetErrorString(err));
  return false;
}

// The known set of operations; nothing else that copies or sets memory.
int run_worker() {
  unsigned char* d_src = nullptr;
  unsigned char* d_dst = nullptr;
  std::vector<unsigned char> host(kHtoDBytes, 0x5a);  // pageable, like most application buffers
  bool ok = check(cudaSetDevice(0), "cudaSetDevice") &&
            check(cudaMalloc(reinterpret_cast<void**>(&d_src), kHtoDBytes), "cudaMalloc") &&
            check(cudaMalloc(reinterpret_cast<void**>(&d_dst), kHtoDBytes), "cudaMalloc");
  for (int i = 0; ok && i < 3; ++i)
    ok = check(cudaMemcpy(d_src, host.data(), kHtoDBytes, cudaMemcpyHostToDevice),
               "cudaMemcpy HtoD");
  for (int i = 0; ok && i < 2; ++i)
    ok = check(cudaMemcpy(host.data(), d_src, kDtoHBytes, cudaMemcpyDeviceToHost),
               "cudaMemcpy DtoH");
  if (ok)
    ok = check(cudaMemcpy(d_dst, d_src, kDtoDBytes, cudaMemcpyDeviceToDevice), "cudaMemcpy DtoD");
  for (int i = 0; ok && i < 4; ++i)
    ok = check(cudaMemsetAsync(d_dst + i * kMemsetBytes, i, kMemsetBytes, nullptr),
               "cudaMemsetAsync");
  if (ok) ok = check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  if (d_src != nullptr) cudaFree(d_src);
  if (d_dst != nullptr) cudaFree(d_dst);
  return ok ? 0 : 1;  // returning from main runs the library's atexit summary
}

std::string self_dir() {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return ".";
  path[n] = '\0';
  std::string s(path);
  size_t slash = s.rfind('/');
  return slash == std::string::npos ? "." : s.substr(0, slash);
}

std::string self_exe() {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return "";
  path[n] = '\0';
  return path;
}

std::string read_file(const std::string& path) {
  std::string out;
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  fclose(f);
  return out;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// Checks the two lines worker `pid` appended; prints what is wrong.
bool check_worker_lines(const std::vector<std::string>& lines, pid_t pid) {
  const std::string prefix = "copy-audit pid=" + std::to_string(pid) + " exe=";
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].compare(0, prefix.size(), prefix) != 0) continue;
    bool ok = true;
    size_t counts_at = lines[i].find(" HtoD=");
    std::string counts = counts_at == std::string::npos ? "" : lines[i].substr(counts_at + 1);
    if (counts != kExpectedCounts) {
      printf("FAIL pid %ld: got      %s\n               expected %s\n", static_cast<long>(pid),
             counts.c_str(), kExpectedCounts);
      ok = false;
    }
    if (i + 1 >= lines.size() || lines[i + 1] != kExpectedPerFrame) {
      printf("FAIL pid %ld: per-frame line is '%s', expected '%s'\n", static_cast<long>(pid),
             i + 1 < lines.size() ? lines[i + 1].c_str() : "(none)", kExpectedPerFrame);
      ok = false;
    }
    return ok;
  }
  printf("FAIL pid %ld: no line starting with '%s'\n", static_cast<long>(pid), prefix.c_str());
  return false;
}

int run_checker(int argc, char** argv) {
  // The checker itself is not audited, whatever the caller's environment says.
  unsetenv("CUDA_INJECTION64_PATH");

  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    printf("copy-audit-selftest: SKIP: no CUDA device: %s\n",
           err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount reports 0 devices");
    return 77;
  }

  std::string lib;
  if (const char* env = getenv("COPY_AUDIT_LIB"); env != nullptr && *env != '\0')
    lib = env;
  else if (argc > 1)
    lib = argv[1];
  else
    lib = self_dir() + "/libcudaipc-copy-audit.so";
  if (access(lib.c_str(), R_OK) != 0) {
    printf("FAIL: injection library %s: %s\n", lib.c_str(), strerror(errno));
    return 1;
  }

  const char* tmpdir = getenv("TMPDIR");
  std::string out_path = std::string(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp") +
                         "/copy-audit-selftest.XXXXXX";
  int fd = mkstemp(out_path.data());
  if (fd < 0) {
    printf("FAIL: mkstemp %s: %s\n", out_path.c_str(), strerror(errno));
    return 1;
  }
  close(fd);

  // Worker environment: ours, minus the variables we set.
  std::vector<std::string> env_store;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    std::string key = kv.substr(0, kv.find('='));
    if (key == "CUDA_INJECTION64_PATH" || key == "COPY_AUDIT_OUTPUT" ||
        key == "COPY_AUDIT_FRAMES" || key == kWorkerEnv)
      continue;
    env_store.push_back(kv);
  }
  env_store.push_back("CUDA_INJECTION64_PATH=" + lib);
  env_store.push_back("COPY_AUDIT_OUTPUT=" + out_path);
  env_store.push_back("COPY_AUDIT_FRAMES=2");
  env_store.push_back(std::string(kWorkerEnv) + "=1");
  std::vector<char*> envp;
  for (std::string& kv : env_store) envp.push_back(kv.data());
  envp.push_back(nullptr);

  std::string exe = self_exe();
  char* worker_argv[] = {exe.data(), nullptr};
  printf("copy-audit-selftest: library %s, output %s\n", lib.c_str(), out_path.c_str());
  fflush(stdout);

  pid_t pids[kWorkers] = {};
  bool ok = true;
  for (int i = 0; i < kWorkers; ++i) {
    int rc = posix_spawn(&pids[i], exe.c_str(), nullptr, nullptr, worker_argv, envp.data());
    if (rc != 0) {
      printf("FAIL: posix_spawn %s: %s\n", exe.c_str(), strerror(rc));
      pids[i] = 0;
      ok = false;
    }
  }
  for (int i = 0; i < kWorkers; ++i) {
    if (pids[i] == 0) continue;
    int status = 0;
    while (waitpid(pids[i], &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      printf("FAIL: worker %ld ended with status 0x%x\n", static_cast<long>(pids[i]), status);
      ok = false;
    }
  }

  std::string text = read_file(out_path);
  printf("--- %s ---\n%s--- end ---\n", out_path.c_str(), text.c_str());
  std::vector<std::string> lines = split_lines(text);
  for (int i = 0; i < kWorkers; ++i) {
    if (pids[i] != 0 && !check_worker_lines(lines, pids[i])) ok = false;
  }
  if (ok && lines.size() != 2 * kWorkers) {
    printf("FAIL: expected %d lines (two per worker), got %zu\n", 2 * kWorkers, lines.size());
    ok = false;
  }
  unlink(out_path.c_str());
  printf("copy-audit-selftest: %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* worker = getenv(kWorkerEnv); worker != nullptr && strcmp(worker, "1") == 0)
    return run_worker();
  return run_checker(argc, argv);
}
