// SPDX-License-Identifier: LGPL-2.1-or-later
// `GST_DEBUG=cudaipc*:6` shows every element of the plugin: each debug category the plugin
// registers starts with "cudaipc", and a small pipeline around each element, run with that
// threshold, logs at least one line in the element's own category about the element itself
// (an element without a GPU or a camera here still says why it failed). The plugin is loaded
// from the build tree (GST_PLUGIN_PATH).
#include <gst/gst.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

// Every log line in a cudaipc* category: (category, factory of the element it was about).
class LogCapture {
 public:
  LogCapture() {
    gst_debug_set_active(TRUE);
    gst_debug_remove_log_function(gst_debug_log_default);
    gst_debug_add_log_function(&LogCapture::on_log, this, nullptr);
    gst_debug_set_threshold_from_string("cudaipc*:6", TRUE);
  }
  ~LogCapture() {
    gst_debug_remove_log_function(&LogCapture::on_log);
    gst_debug_add_log_function(gst_debug_log_default, nullptr, nullptr);
    gst_debug_set_threshold_from_string("", TRUE);
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  std::set<std::pair<std::string, std::string>> lines() {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_;
  }

 private:
  static void on_log(GstDebugCategory* category, GstDebugLevel, const gchar*, const gchar*, gint,
                     GObject* object, GstDebugMessage*, gpointer self) {
    const std::string name = gst_debug_category_get_name(category);
    if (name.rfind("cudaipc", 0) != 0 || object == nullptr) return;
    GstElement* element = nullptr;
    if (GST_IS_ELEMENT(object)) {
      element = GST_ELEMENT(object);
    } else if (GST_IS_PAD(object)) {
      element = GST_PAD_PARENT(GST_PAD(object));
    }
    GstElementFactory* factory = element ? gst_element_get_factory(element) : nullptr;
    if (factory == nullptr) return;
    auto* capture = static_cast<LogCapture*>(self);
    std::lock_guard<std::mutex> lock(capture->mutex_);
    capture->lines_.emplace(name, GST_OBJECT_NAME(factory));
  }

  std::mutex mutex_;
  std::set<std::pair<std::string, std::string>> lines_;
};

std::set<std::string> category_names() {
  std::set<std::string> names;
  GSList* all = gst_debug_get_all_categories();
  for (GSList* l = all; l != nullptr; l = l->next) {
    names.insert(gst_debug_category_get_name(static_cast<GstDebugCategory*>(l->data)));
  }
  g_slist_free(all);
  return names;
}

// Runs `description` until EOS or an error (both fine here: what counts is what was logged).
void run_pipeline(const std::string& description, std::chrono::seconds limit) {
  GError* error = nullptr;
  GstElement* pipeline = gst_parse_launch(description.c_str(), &error);
  ASSERT_NE(pipeline, nullptr) << description << ": " << (error ? error->message : "?");
  g_clear_error(&error);
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  GstBus* bus = gst_element_get_bus(pipeline);
  GstMessage* msg = gst_bus_timed_pop_filtered(
      bus, std::chrono::duration_cast<std::chrono::nanoseconds>(limit).count(),
      static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
  if (msg != nullptr) gst_message_unref(msg);
  gst_object_unref(bus);
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);
}

bool have_factory(const char* name) {
  GstElementFactory* factory = gst_element_factory_find(name);
  if (factory == nullptr) return false;
  gst_object_unref(factory);
  return true;
}

// Loading the plugin registers every category it logs in, so that --gst-debug-help lists them
// all; four used to appear only once their code first ran (issue 43, item 10). Runs first, in a
// process where nothing of the plugin has run yet.
TEST(DebugCategories, EveryCategoryIsRegisteredWhenThePluginLoads) {
  ASSERT_TRUE(gst_plugin_load_by_name("cudaipc") != nullptr) << "the cudaipc plugin did not load";
  std::vector<std::string> expected = {
      "cudaipc-sink",    "cudaipc-src",   "cudaipc-bgratorg10", "cudaipc-rg10replaysrc",
      "cudaipc-v4l2src", "cudaipc-slots", "cudaipc-slotpool"};
#ifdef CIPC_HAVE_CUDA
  for (const char* name :
       {"cudaipc-frames", "cudaipc-release", "cudaipc-rg10tobgra", "cudaipc-pinned"})
    expected.push_back(name);
#endif
#ifdef CIPC_HAVE_GST_CUDA
  expected.push_back("cudaipc-cuda-interop");
#endif
  const std::set<std::string> names = category_names();
  for (const std::string& name : expected)
    EXPECT_EQ(names.count(name), 1u) << name << " is not registered when the plugin loads";
}

// cudasrc-ipc waiting for a producer that does not come says at INFO what it waits for, once,
// and at DEBUG each attempt (issue 43, item 10: before, nothing at any level).
TEST(DebugCategories, WaitingForAProducerIsLoggedAtInfoAndEachAttemptAtDebug) {
  ASSERT_TRUE(gst_plugin_load_by_name("cudaipc") != nullptr);
  struct Seen {
    std::mutex mutex;
    std::vector<std::pair<GstDebugLevel, std::string>> lines;
  } seen;
  gst_debug_set_active(TRUE);
  gst_debug_remove_log_function(gst_debug_log_default);
  gst_debug_set_threshold_from_string("cudaipc-src:5", TRUE);
  GstLogFunction log = [](GstDebugCategory* category, GstDebugLevel level, const gchar*,
                          const gchar*, gint, GObject*, GstDebugMessage* message, gpointer data) {
    if (std::string(gst_debug_category_get_name(category)) != "cudaipc-src") return;
    auto* s = static_cast<Seen*>(data);
    std::lock_guard<std::mutex> lock(s->mutex);
    s->lines.emplace_back(level, gst_debug_message_get(message));
  };
  gst_debug_add_log_function(log, &seen, nullptr);
  const std::string socket = "/tmp/cudaipc-nobody-" + std::to_string(getpid()) + ".sock";
  GstElement* pipeline = gst_parse_launch(
      ("cudasrc-ipc reconnect=true reconnect-interval=20 socket-path=" + socket + " ! fakesink")
          .c_str(),
      nullptr);
  ASSERT_NE(pipeline, nullptr);
  gst_element_set_state(pipeline, GST_STATE_PLAYING);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  gst_element_set_state(pipeline, GST_STATE_NULL);
  gst_object_unref(pipeline);
  gst_debug_remove_log_function(log);
  gst_debug_add_log_function(gst_debug_log_default, nullptr, nullptr);
  gst_debug_set_threshold_from_string("", TRUE);

  size_t info = 0, attempts = 0;
  for (const auto& line : seen.lines) {
    if (line.first == GST_LEVEL_INFO &&
        line.second.find("waiting for a producer at " + socket) != std::string::npos)
      ++info;
    if (line.first == GST_LEVEL_DEBUG && line.second.find("attempt ") == 0) ++attempts;
  }
  EXPECT_EQ(info, 1u);
  EXPECT_GE(attempts, 3u);
}

TEST(DebugCategories, EveryCategoryStartsWithCudaipcAndEveryElementLogsInItsOwn) {
  const std::set<std::string> before = category_names();
  ASSERT_TRUE(gst_plugin_load_by_name("cudaipc") != nullptr) << "the cudaipc plugin did not load";

  // Element -> its category, and a pipeline that makes the element log (frames, or the error
  // a machine without a GPU or a camera gives).
  const std::string socket = "/tmp/cudaipc-debug-categories-" + std::to_string(getpid()) + ".sock";
  struct Case {
    const char* factory;
    const char* category;
    std::string pipeline;
  };
  const std::vector<Case> cases = {
      {"bgratorg10", "cudaipc-bgratorg10",
       "videotestsrc num-buffers=2 ! video/x-raw,format=BGRA,width=64,height=48 ! bgratorg10 ! "
       "fakesink"},
      {"rg10replaysrc", "cudaipc-rg10replaysrc",
       "rg10replaysrc num-buffers=2 frames=1 ! video/x-bayer,width=64,height=48 ! fakesink"},
      {"rg10tobgra", "cudaipc-rg10tobgra",
       "rg10replaysrc num-buffers=2 frames=1 ! video/x-bayer,width=64,height=48 ! rg10tobgra ! "
       "fakesink"},
      {"cudav4l2src", "cudaipc-v4l2src",
       "cudav4l2src device=/dev/cudaipc-no-such-camera num-buffers=1 ! fakesink"},
  };

  LogCapture capture;
  for (const Case& c : cases) {
    if (!have_factory(c.factory)) continue;  // rg10tobgra is built only with the CUDA toolkit
    run_pipeline(c.pipeline, std::chrono::seconds(20));
  }
  // The sink and the source of one host-memory stream, in two pipelines of this process.
  {
    GstElement* producer = gst_parse_launch(
        ("videotestsrc num-buffers=300 is-live=true ! video/x-raw,format=BGRA,width=64,height=48,"
         "framerate=100/1 ! cudasink-ipc memory=host socket-path=" +
         socket)
            .c_str(),
        nullptr);
    ASSERT_NE(producer, nullptr);
    gst_element_set_state(producer, GST_STATE_PLAYING);
    run_pipeline("cudasrc-ipc memory=host connect-timeout=10000 socket-path=" + socket +
                     " ! fakesink num-buffers=3",
                 std::chrono::seconds(20));
    gst_element_set_state(producer, GST_STATE_NULL);
    gst_object_unref(producer);
  }

  const auto lines = capture.lines();
  std::vector<Case> all = cases;
  all.push_back({"cudasink-ipc", "cudaipc-sink", ""});
  all.push_back({"cudasrc-ipc", "cudaipc-src", ""});
  for (const Case& c : all) {
    if (!have_factory(c.factory)) continue;
    EXPECT_TRUE(lines.count({c.category, c.factory}) == 1)
        << c.factory << " logged nothing about itself in " << c.category << " at cudaipc*:6";
  }

  // No category of the plugin is named after an element (the pipelines above also loaded other
  // plugins, whose categories are theirs to name).
  for (const std::string& name : category_names()) {
    if (before.count(name) != 0 || name.rfind("cudaipc", 0) == 0) continue;
    for (const Case& c : all) {
      EXPECT_NE(name, std::string(c.factory))
          << "a category named after the element, not cudaipc-*";
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  gst_init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
