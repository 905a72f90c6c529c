// SPDX-License-Identifier: LGPL-2.1-or-later
// Tests run the GStreamer the build was configured with (tests/meson.build's test setup): the
// libgstreamer this process and the loaded plugin use is the configured one, and so is the
// gst-launch-1.0 / gst-inspect-1.0 a test starts from PATH, which loads the plugin without an
// unresolved symbol. A build against a private prefix (1.20, 1.28) that silently ran the
// system's 1.22 tools would fail here rather than somewhere obscure.
#include <gst/gst.h>
#include <gtest/gtest.h>
#include <link.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#ifndef CIPC_GST_VERSION
#error "CIPC_GST_VERSION (the configured GStreamer's version) is set by tests/gst/meson.build"
#endif

namespace {

std::string real_path(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) ? std::string(resolved) : path;
}

std::string directory_of(const std::string& path) {
  const std::string real = real_path(path);
  return real.substr(0, real.rfind('/'));
}

// Directories of the GStreamer libraries (libgst*-1.0.so*) loaded into this process.
std::vector<std::pair<std::string, std::string>> loaded_gst_libraries() {
  std::vector<std::pair<std::string, std::string>> found;
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* data) {
        const std::string name = info->dlpi_name ? info->dlpi_name : "";
        const std::string base = name.substr(name.rfind('/') + 1);
        if (base.rfind("libgst", 0) == 0 && base.find("-1.0.so") != std::string::npos) {
          static_cast<std::vector<std::pair<std::string, std::string>>*>(data)->emplace_back(
              base, directory_of(name));
        }
        return 0;
      },
      &found);
  return found;
}

// Runs a shell command, returns its exit status and standard output + error.
int run(const std::string& command, std::string* output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char chunk[4096];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, pipe)) > 0) output->append(chunk, n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(ConfiguredGStreamer, ThisProcessRunsTheConfiguredVersion) {
  guint major, minor, micro, nano;
  gst_version(&major, &minor, &micro, &nano);
  EXPECT_EQ(std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(micro),
            CIPC_GST_VERSION);
}

TEST(ConfiguredGStreamer, ThePluginLinksTheConfiguredLibraries) {
  ASSERT_NE(gst_plugin_load_by_name("cudaipc"), nullptr) << "the cudaipc plugin did not load";
  const std::string libdir = real_path(CIPC_GST_LIBDIR);
  const auto libraries = loaded_gst_libraries();
  bool core = false;
  for (const auto& [name, dir] : libraries) {
    core = core || name.rfind("libgstreamer-1.0.so", 0) == 0;
    EXPECT_EQ(dir, libdir) << name << " was loaded from " << dir << ", not the configured "
                           << libdir;
  }
  EXPECT_TRUE(core) << "no libgstreamer-1.0 among the loaded libraries";
  EXPECT_GE(libraries.size(), 3u) << "the plugin links gstreamer, gstbase and gstvideo at least";
}

TEST(ConfiguredGStreamer, ToolsInPathAreTheConfiguredOnesAndLoadThePlugin) {
  std::string version;
  ASSERT_EQ(run("gst-launch-1.0 --version", &version), 0) << version;
  EXPECT_NE(version.find(std::string("GStreamer ") + CIPC_GST_VERSION + "\n"), std::string::npos)
      << "gst-launch-1.0 in PATH is not GStreamer " << CIPC_GST_VERSION << ": " << version;

  // A plugin built against a newer libgstbase than the tool's libgstreamer fails to load with
  // an undefined symbol, and gst-inspect-1.0 then finds no element.
  std::string inspect;
  EXPECT_EQ(run("gst-inspect-1.0 cudasink-ipc", &inspect), 0) << inspect;
  EXPECT_NE(inspect.find("cudasink-ipc"), std::string::npos) << inspect;
  EXPECT_EQ(inspect.find("undefined symbol"), std::string::npos) << inspect;
}

}  // namespace

int main(int argc, char** argv) {
  gst_init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
