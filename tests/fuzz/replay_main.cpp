// SPDX-License-Identifier: LGPL-2.1-or-later
// A main() for the fuzz targets in ordinary (non-libFuzzer) builds: runs every file named on the
// command line, or found in a folder named there, through LLVMFuzzerTestOneInput once. The
// meson tests in tests/fuzz use it to replay the seed corpus and every crash the fuzzers ever
// found (tests/fuzz/regressions) on each build, with whatever compiler and sanitizer it uses.
#include <stdio.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

bool run_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    fprintf(stderr, "cannot read %s\n", path.c_str());
    return false;
  }
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  // A copy on the heap of exactly the input's size, as libFuzzer passes it, so that ASan sees a
  // read one past the end.
  std::vector<uint8_t> exact(bytes);
  fprintf(stderr, "input %s\n", path.c_str());  // names the culprit if the run dies
  LLVMFuzzerTestOneInput(exact.empty() ? nullptr : exact.data(), exact.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  size_t runs = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    std::error_code ec;
    if (std::filesystem::is_directory(arg, ec)) {
      std::vector<std::filesystem::path> files;
      for (const auto& entry : std::filesystem::directory_iterator(arg))
        if (entry.is_regular_file()) files.push_back(entry.path());
      std::sort(files.begin(), files.end());
      for (const auto& f : files) runs += run_file(f) ? 1 : 0;
    } else if (std::filesystem::exists(arg, ec)) {
      if (!run_file(arg)) return 1;
      ++runs;
    } else {
      fprintf(stderr, "%s does not exist\n", argv[i]);
      return 1;
    }
  }
  printf("replayed %zu input(s) without a failure\n", runs);
  if (runs == 0) {
    fprintf(stderr, "no inputs found\n");
    return 1;
  }
  return 0;
}
