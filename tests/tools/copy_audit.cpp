// SPDX-License-Identifier: LGPL-2.1-or-later
//
// copy audit: a CUDA injection library that counts the memory copies and memsets a process makes.
//
// Loaded into any CUDA process through CUDA_INJECTION64_PATH=/path/libcudaipc-copy-audit.so: the
// CUDA driver dlopens it during cuInit and calls InitializeInjection(), which enables CUPTI
// activity records for memcpy (CUPTI_ACTIVITY_KIND_MEMCPY), peer memcpy (..._MEMCPY2) and
// memset. Completed records are counted per copy kind; at process exit one line goes to stderr
// (and, with COPY_AUDIT_OUTPUT=<file>, is appended to that file):
//
//   copy-audit pid=<pid> exe=<basename> HtoD=<n>/<bytes> DtoH=<n>/<bytes> DtoD=<n>/<bytes>
//              PtoP=<n>/<bytes> HtoH=<n>/<bytes> other=<n>/<bytes> memset=<n>/<bytes>
//
// (one line). COPY_AUDIT_FRAMES=<N> adds a second line of per-frame operation counts (count / N).
// COPY_AUDIT_API=1 also counts CUDA API calls (CUPTI callbacks on the runtime and driver APIs)
// and adds "copy-audit api per-frame(N): runtime=R driver=D top: name=n ..." (the eight most
// frequent functions of both, per frame; a runtime call usually makes driver calls too). A process
// may call copy_audit_mark() (found with dlopen(CUDA_INJECTION64_PATH, RTLD_NOLOAD) + dlsym) once
// its start-up is over: the API counts restart there, and N is then COPY_AUDIT_API_FRAMES, the
// frames after the mark, so that start-up calls are not spread over the frames.
// See README.md beside this file. The library never makes the host process fail: when CUPTI
// refuses, it prints "copy-audit: disabled: <reason>" and stays inert.

#include <cupti.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

namespace {

constexpr size_t kBufferSize = 8u * 1024u * 1024u;  // one CUPTI activity buffer
constexpr size_t kBufferAlign = 8;                  // CUPTI wants 8-byte aligned buffers

enum Slot { kHtoD, kDtoH, kDtoD, kPtoP, kHtoH, kOther, kMemset, kSlots };
constexpr const char* kSlotNames[kSlots] = {"HtoD", "DtoH",  "DtoD",  "PtoP",
                                            "HtoH", "other", "memset"};

// Written by CUPTI's buffer-completion thread(s), read at exit: relaxed atomics are enough, the
// flush at exit orders the last updates before the read. Everything here is trivially
// destructible, so callbacks arriving during static destruction still find valid objects.
struct Counter {
  std::atomic<uint64_t> ops{0};
  std::atomic<uint64_t> bytes{0};
};
Counter g_counters[kSlots];
std::atomic<uint64_t> g_dropped{0};

// COPY_AUDIT_API=1: calls per function, indexed by CUPTI callback id, per API domain.
constexpr int kRuntimeIds = CUPTI_RUNTIME_TRACE_CBID_SIZE;
constexpr int kDriverIds = CUPTI_DRIVER_TRACE_CBID_SIZE;
std::atomic<uint64_t> g_runtime_calls[kRuntimeIds];
std::atomic<uint64_t> g_driver_calls[kDriverIds];
std::atomic<const char*> g_runtime_names[kRuntimeIds];
std::atomic<const char*> g_driver_names[kDriverIds];
std::atomic<bool> g_api_counting{false};
std::atomic<bool> g_api_marked{false};

void CUPTIAPI on_api_call(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                          const void* data) {
  const auto* info = static_cast<const CUpti_CallbackData*>(data);
  if (info->callbackSite != CUPTI_API_ENTER) return;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && id < static_cast<CUpti_CallbackId>(kRuntimeIds)) {
    g_runtime_calls[id].fetch_add(1, std::memory_order_relaxed);
    g_runtime_names[id].store(info->functionName, std::memory_order_relaxed);
  } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API &&
             id < static_cast<CUpti_CallbackId>(kDriverIds)) {
    g_driver_calls[id].fetch_add(1, std::memory_order_relaxed);
    g_driver_names[id].store(info->functionName, std::memory_order_relaxed);
  }
}

std::atomic<bool> g_initialized{false};  // InitializeInjection ran
std::atomic<bool> g_enabled{false};      // CUPTI activity collection is on
std::atomic<bool> g_reported{false};     // the exit line was printed (atexit or destructor)
std::atomic<pid_t> g_pid{0};             // process that enabled CUPTI (not a forked child)

void count(Slot slot, uint64_t ops, uint64_t bytes) {
  g_counters[slot].ops.fetch_add(ops, std::memory_order_relaxed);
  g_counters[slot].bytes.fetch_add(bytes, std::memory_order_relaxed);
}

// Writes all of buf to fd (stderr may be a pipe: retry short writes and EINTR).
void write_all(int fd, const char* buf, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, buf, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    buf += n;
    len -= static_cast<size_t>(n);
  }
}

// One formatted line to stderr with a single write() (no stdio buffering: this also runs from
// the exit path, where stdio may already be flushed and closed by the application).
__attribute__((format(printf, 1, 2))) void say(const char* fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  write_all(STDERR_FILENO, line,
            static_cast<size_t>(n) < sizeof line ? static_cast<size_t>(n) : sizeof line - 1);
}

const char* result_string(CUptiResult result) {
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr)
    return "unknown CUPTI error";
  return text;
}

Slot slot_of_copy_kind(uint8_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return kHtoD;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return kDtoH;
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return kDtoD;
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return kHtoH;
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return kPtoP;
    default:  // HtoA, AtoH, AtoA, AtoD, DtoA, unknown
      return kOther;
  }
}

void count_record(const CUpti_Activity* record) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      // CUDA 13's record for this kind; kind/copyKind/bytes sit at the same offsets in every
      // CUpti_ActivityMemcpyN, copyCount (batched copies: cudaMemcpyBatchAsync) is new in 6.
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
      count(slot_of_copy_kind(m->copyKind), m->copyCount > 0 ? m->copyCount : 1, m->bytes);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {  // peer-to-peer copy between two devices/contexts
      const auto* p = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(record);
      count(kPtoP, 1, p->bytes);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* s = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
      count(kMemset, 1, s->bytes);
      break;
    }
    default: break;  // nothing else is enabled
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  void* p = nullptr;
  if (posix_memalign(&p, kBufferAlign, kBufferSize) != 0)
    p = nullptr;  // CUPTI then drops records (counted as dropped), the process goes on
  *buffer = static_cast<uint8_t*>(p);
  *size = p != nullptr ? kBufferSize : 0;
  *max_records = 0;  // fill the buffer
}

void CUPTIAPI buffer_completed(CUcontext /*context*/, uint32_t stream_id, uint8_t* buffer,
                               size_t /*size*/, size_t valid_size) {
  if (buffer == nullptr) return;
  CUpti_Activity* record = nullptr;
  while (valid_size > 0 &&
         cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    count_record(record);
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(nullptr, stream_id, &dropped) == CUPTI_SUCCESS &&
      dropped > 0)
    g_dropped.fetch_add(dropped, std::memory_order_relaxed);
  free(buffer);
}

// Basename of the running executable (/proc/self/exe; argv[0]'s basename if that fails), with
// blanks replaced so that the line stays splittable on spaces.
void exe_name(char* out, size_t out_size) {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  const char* name = program_invocation_short_name;
  if (n > 0) {
    path[n] = '\0';
    const char* slash = strrchr(path, '/');
    name = slash != nullptr ? slash + 1 : path;
  }
  if (name == nullptr || *name == '\0') name = "?";
  size_t i = 0;
  for (; name[i] != '\0' && i + 1 < out_size; ++i)
    out[i] = (name[i] == ' ' || name[i] == '\t' || name[i] == '\n') ? '_' : name[i];
  out[i] = '\0';  // a longer name is cut (out_size > 0 here)
}

// A few lines built up in a fixed buffer (no allocation on the exit path).
struct Text {
  char buf[2048];
  size_t len = 0;

  __attribute__((format(printf, 2, 3))) void add(const char* fmt, ...) {
    if (len + 1 >= sizeof buf) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + len, sizeof buf - len, fmt, ap);
    va_end(ap);
    if (n > 0)
      len =
          len + static_cast<size_t>(n) < sizeof buf ? len + static_cast<size_t>(n) : sizeof buf - 1;
  }
};

// The API-call line (COPY_AUDIT_API=1), per frame when COPY_AUDIT_FRAMES is set, else totals.
void add_api_lines(Text& text) {
  double frames = 1.0;
  const char* frames_env =
      getenv(g_api_marked.load() ? "COPY_AUDIT_API_FRAMES" : "COPY_AUDIT_FRAMES");
  if (frames_env != nullptr && strtoull(frames_env, nullptr, 10) > 0)
    frames = static_cast<double>(strtoull(frames_env, nullptr, 10));
  uint64_t runtime = 0, driver = 0;
  for (int i = 0; i < kRuntimeIds; ++i) runtime += g_runtime_calls[i].load();
  for (int i = 0; i < kDriverIds; ++i) driver += g_driver_calls[i].load();
  text.add("copy-audit api per-frame(%.0f): runtime=%.2f driver=%.2f top:", frames,
           static_cast<double>(runtime) / frames, static_cast<double>(driver) / frames);
  // The eight largest counts of either domain (a selection sort; no allocation on this path).
  static bool shown[kRuntimeIds + kDriverIds];
  for (int rank = 0; rank < 8; ++rank) {
    uint64_t best = 0;
    int best_index = -1;
    for (int i = 0; i < kRuntimeIds + kDriverIds; ++i) {
      const uint64_t n =
          i < kRuntimeIds ? g_runtime_calls[i].load() : g_driver_calls[i - kRuntimeIds].load();
      if (!shown[i] && n > best) {
        best = n;
        best_index = i;
      }
    }
    if (best_index < 0) break;
    shown[best_index] = true;
    const char* name = best_index < kRuntimeIds ? g_runtime_names[best_index].load()
                                                : g_driver_names[best_index - kRuntimeIds].load();
    text.add(" %s=%.2f", name ? name : "?", static_cast<double>(best) / frames);
  }
  text.add("\n");
}

// Prints the summary once per process. flush: ask CUPTI to deliver every buffered record first.
void report(bool flush) {
  if (!g_enabled.load() || g_pid.load() != getpid())
    return;  // never enabled, or a forked child that inherited our state (it prints nothing)
  if (g_reported.exchange(true)) return;
  if (flush) {
    CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (r != CUPTI_SUCCESS)
      say("copy-audit: warning: cuptiActivityFlushAll: %s (counts may be low)\n", result_string(r));
  }

  uint64_t ops[kSlots], bytes[kSlots];
  for (int i = 0; i < kSlots; ++i) {
    ops[i] = g_counters[i].ops.load(std::memory_order_relaxed);
    bytes[i] = g_counters[i].bytes.load(std::memory_order_relaxed);
  }

  char exe[256];
  exe_name(exe, sizeof exe);
  Text text;
  text.add("copy-audit pid=%ld exe=%s", static_cast<long>(getpid()), exe);
  for (int i = 0; i < kSlots; ++i)
    text.add(" %s=%" PRIu64 "/%" PRIu64, kSlotNames[i], ops[i], bytes[i]);
  text.add("\n");

  const char* frames_env = getenv("COPY_AUDIT_FRAMES");
  if (frames_env != nullptr && *frames_env != '\0') {
    char* end = nullptr;
    unsigned long long frames = strtoull(frames_env, &end, 10);
    if (end != nullptr && *end == '\0' && frames > 0) {
      text.add("copy-audit per-frame(%llu):", frames);
      for (int i = 0; i < kSlots; ++i)
        text.add(" %s=%.2f", kSlotNames[i],
                 static_cast<double>(ops[i]) / static_cast<double>(frames));
      text.add("\n");
    } else {
      say("copy-audit: ignoring COPY_AUDIT_FRAMES=%s (want a positive integer)\n", frames_env);
    }
  }

  if (g_api_counting.load()) add_api_lines(text);

  uint64_t dropped = g_dropped.load(std::memory_order_relaxed);
  if (dropped > 0)
    text.add("copy-audit pid=%ld warning: %" PRIu64 " activity records dropped, counts are low\n",
             static_cast<long>(getpid()), dropped);

  write_all(STDERR_FILENO, text.buf, text.len);

  const char* output = getenv("COPY_AUDIT_OUTPUT");
  if (output != nullptr && *output != '\0') {
    int fd = open(output, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      say("copy-audit: cannot open COPY_AUDIT_OUTPUT=%s: %s\n", output, strerror(errno));
    } else {
      // One write() of all lines: with O_APPEND, records of concurrent processes don't mix.
      ssize_t n;
      do {
        n = write(fd, text.buf, text.len);
      } while (n < 0 && errno == EINTR);
      if (n != static_cast<ssize_t>(text.len)) say("copy-audit: short write to %s\n", output);
      close(fd);
    }
  }
}

void at_exit_handler() {
  report(true);
}

// Normally a no-op: exit() runs the atexit handler first. This covers an unload without exit
// (dlclose of the library when the process goes on).
__attribute__((destructor)) void on_unload() {
  report(true);
}

// Turns collection off again after a partial start; prints the one "disabled" line.
void disable(const char* what, CUptiResult result) {
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY2);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMSET);
  say("copy-audit: disabled: %s (%s)\n", result_string(result), what);
}

}  // namespace

// Start-up is over: API counts restart from zero (see the top of this file).
extern "C" __attribute__((visibility("default"))) void copy_audit_mark(void) {
  for (auto& n : g_runtime_calls) n.store(0, std::memory_order_relaxed);
  for (auto& n : g_driver_calls) n.store(0, std::memory_order_relaxed);
  g_api_marked.store(true);
}

// The CUDA driver's injection entry point: looked up by this exact name in the library named by
// CUDA_INJECTION64_PATH and called once during cuInit, before any context exists. Returns 1
// (success, as in NVIDIA's CUPTI injection samples) in every case, also when CUPTI is
// unavailable: the audit must never stop the application.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  if (g_initialized.exchange(true)) return 1;

  CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) {
    say("copy-audit: disabled: %s (cuptiActivityRegisterCallbacks)\n", result_string(r));
    return 1;
  }
  r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
  if (r != CUPTI_SUCCESS) {
    disable("enabling CUPTI_ACTIVITY_KIND_MEMCPY", r);
    return 1;
  }
  r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET);
  if (r != CUPTI_SUCCESS) {
    disable("enabling CUPTI_ACTIVITY_KIND_MEMSET", r);
    return 1;
  }
  // Peer copies get their own record kind; without it they are missed, the rest still counts.
  r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY2);
  if (r != CUPTI_SUCCESS)
    say("copy-audit: warning: peer copies not counted: %s (enabling CUPTI_ACTIVITY_KIND_MEMCPY2)\n",
        result_string(r));

  const char* api_env = getenv("COPY_AUDIT_API");
  if (api_env != nullptr && strcmp(api_env, "1") == 0) {
    CUpti_SubscriberHandle subscriber;
    r = cuptiSubscribe(&subscriber, reinterpret_cast<CUpti_CallbackFunc>(on_api_call), nullptr);
    if (r == CUPTI_SUCCESS) r = cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
    if (r == CUPTI_SUCCESS) r = cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
    if (r == CUPTI_SUCCESS)
      g_api_counting.store(true);
    else
      say("copy-audit: warning: API calls not counted: %s\n", result_string(r));
  }

  g_pid.store(getpid());
  g_enabled.store(true);
  if (atexit(at_exit_handler) != 0)
    say("copy-audit: warning: atexit failed, the summary depends on library unload\n");
  return 1;
}
