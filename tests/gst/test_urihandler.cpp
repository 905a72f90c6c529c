// SPDX-License-Identifier: LGPL-2.1-or-later
// gst/common/urihandler: cudaipc:// URIs parsed into a socket path and parameters, and applied to
// an element's properties, on a small element of the test's own (no plugin, no pipeline). The
// plugin's elements through gst_element_make_from_uri are in test_registration.cpp; playbin,
// gst-play-1.0 and OpenCV in tests/e2e/check_uri_players.py.
#include <gst/gst.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "common/urihandler.h"

namespace {

// A stand-in for cudasrc-ipc: a socket path and properties of the kinds the elements have.
enum TestMode { kModeAny = 0, kModeHost = 1, kModeCuda = 2 };

GType test_mode_get_type() {
  static GType type = 0;
  if (type == 0) {
    static const GEnumValue values[] = {{kModeAny, "Any", "auto"},
                                        {kModeHost, "Host", "host"},
                                        {kModeCuda, "Cuda", "cuda"},
                                        {0, nullptr, nullptr}};
    type = g_enum_register_static("CipcTestUriMode", values);
  }
  return type;
}

struct TestElement {
  GstElement parent;
  gchar* socket_path;
  gint mode;
  guint timeout;
  gboolean reconnect;
  gchar* label;
};
struct TestElementClass {
  GstElementClass parent_class;
};

enum { PROP_0, PROP_SOCKET_PATH, PROP_MODE, PROP_TIMEOUT, PROP_RECONNECT, PROP_LABEL, PROP_COUNT };

GType test_element_get_type();
G_DEFINE_TYPE(TestElement, test_element, GST_TYPE_ELEMENT)

void test_element_set_property(GObject* object, guint id, const GValue* value, GParamSpec*) {
  auto* self = reinterpret_cast<TestElement*>(object);
  switch (id) {
    case PROP_SOCKET_PATH:
      g_free(self->socket_path);
      self->socket_path = g_value_dup_string(value);
      break;
    case PROP_MODE: self->mode = g_value_get_enum(value); break;
    case PROP_TIMEOUT: self->timeout = g_value_get_uint(value); break;
    case PROP_RECONNECT: self->reconnect = g_value_get_boolean(value); break;
    case PROP_LABEL:
      g_free(self->label);
      self->label = g_value_dup_string(value);
      break;
    default: break;
  }
}

void test_element_get_property(GObject* object, guint id, GValue* value, GParamSpec*) {
  auto* self = reinterpret_cast<TestElement*>(object);
  switch (id) {
    case PROP_SOCKET_PATH: g_value_set_string(value, self->socket_path); break;
    case PROP_MODE: g_value_set_enum(value, self->mode); break;
    case PROP_TIMEOUT: g_value_set_uint(value, self->timeout); break;
    case PROP_RECONNECT: g_value_set_boolean(value, self->reconnect); break;
    case PROP_LABEL: g_value_set_string(value, self->label); break;
    case PROP_COUNT: g_value_set_uint(value, 7); break;
    default: break;
  }
}

void test_element_finalize(GObject* object) {
  auto* self = reinterpret_cast<TestElement*>(object);
  g_free(self->socket_path);
  g_free(self->label);
  G_OBJECT_CLASS(test_element_parent_class)->finalize(object);
}

void test_element_class_init(TestElementClass* klass) {
  auto* object_class = G_OBJECT_CLASS(klass);
  object_class->set_property = test_element_set_property;
  object_class->get_property = test_element_get_property;
  object_class->finalize = test_element_finalize;
  const auto rw = static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS);
  g_object_class_install_property(object_class, PROP_SOCKET_PATH,
                                  g_param_spec_string("socket-path", "", "", "/default.sock", rw));
  g_object_class_install_property(
      object_class, PROP_MODE,
      g_param_spec_enum("mode", "", "", test_mode_get_type(), kModeAny, rw));
  g_object_class_install_property(object_class, PROP_TIMEOUT,
                                  g_param_spec_uint("timeout", "", "", 1, 60000, 100, rw));
  g_object_class_install_property(object_class, PROP_RECONNECT,
                                  g_param_spec_boolean("reconnect", "", "", FALSE, rw));
  g_object_class_install_property(object_class, PROP_LABEL,
                                  g_param_spec_string("label", "", "", nullptr, rw));
  g_object_class_install_property(
      object_class, PROP_COUNT,
      g_param_spec_uint("count", "", "", 0, G_MAXUINT, 0,
                        static_cast<GParamFlags>(G_PARAM_READABLE | G_PARAM_STATIC_STRINGS)));
  gst_element_class_set_static_metadata(GST_ELEMENT_CLASS(klass), "test", "Source/Video", "test",
                                        "test");
}

void test_element_init(TestElement* self) {
  self->socket_path = g_strdup("/default.sock");
  self->mode = kModeAny;
  self->timeout = 100;
}

class UriHandler : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { gst_init(nullptr, nullptr); }
  void SetUp() override {
    element_ = GST_ELEMENT(gst_object_ref_sink(g_object_new(test_element_get_type(), nullptr)));
  }
  void TearDown() override {
    gst_element_set_state(element_, GST_STATE_NULL);
    gst_object_unref(element_);
    g_clear_error(&error_);
  }
  TestElement* self() { return reinterpret_cast<TestElement*>(element_); }

  // Parses and applies `uri` on the test element.
  bool set(const char* uri) {
    g_clear_error(&error_);
    return cipc_gst::set_element_uri(element_, uri, &error_);
  }
  std::string message() const { return error_ ? error_->message : ""; }

  GstElement* element_ = nullptr;
  GError* error_ = nullptr;
};

cipc_gst::ParsedUri parse_ok(const char* uri) {
  cipc_gst::ParsedUri parsed;
  GError* error = nullptr;
  EXPECT_TRUE(cipc_gst::parse_uri(uri, &parsed, &error)) << (error ? error->message : "");
  g_clear_error(&error);
  return parsed;
}

// The GError of a URI parse_uri refuses.
GError* parse_error(const char* uri) {
  cipc_gst::ParsedUri parsed;
  parsed.socket_path = "untouched";
  GError* error = nullptr;
  EXPECT_FALSE(cipc_gst::parse_uri(uri, &parsed, &error)) << uri;
  EXPECT_EQ(parsed.socket_path, "untouched");
  EXPECT_NE(error, nullptr) << uri;
  return error;
}

TEST(UriParse, PathIsTheSocketPathPercentDecoded) {
  EXPECT_EQ(parse_ok("cudaipc:///run/user/1000/cudaipc.sock").socket_path,
            "/run/user/1000/cudaipc.sock");
  EXPECT_EQ(parse_ok("cudaipc:///tmp/my%20cam%3F.sock").socket_path, "/tmp/my cam?.sock");
  EXPECT_EQ(parse_ok("CUDAIPC:///tmp/x.sock").socket_path, "/tmp/x.sock");  // schemes: any case
  EXPECT_TRUE(parse_ok("cudaipc:///tmp/x.sock").parameters.empty());
}

TEST(UriParse, QueryGivesParametersInOrderDecoded) {
  const auto parsed =
      parse_ok("cudaipc:///tmp/x.sock?memory=host&&connect-timeout=0&label=a%26b+c&");
  ASSERT_EQ(parsed.parameters.size(), 3u);
  EXPECT_EQ(parsed.parameters[0].name, "memory");
  EXPECT_EQ(parsed.parameters[0].value, "host");
  EXPECT_EQ(parsed.parameters[1].name, "connect-timeout");
  EXPECT_EQ(parsed.parameters[1].value, "0");
  EXPECT_EQ(parsed.parameters[2].name, "label");
  EXPECT_EQ(parsed.parameters[2].value, "a&b+c");  // '+' is not a space outside HTML forms
  EXPECT_EQ(parse_ok("cudaipc:///tmp/x.sock?label=").parameters.at(0).value, "");
}

TEST(UriParse, RefusesMalformedUrisSayingWhy) {
  struct Case {
    const char* uri;
    int code;
    const char* says;
  };
  const Case cases[] = {
      {"file:///tmp/x.sock", GST_URI_ERROR_UNSUPPORTED_PROTOCOL, "not a cudaipc:// URI"},
      {"", GST_URI_ERROR_BAD_URI, "No URI"},
      {"cudaipc:/tmp/x.sock", GST_URI_ERROR_BAD_URI, "cudaipc:///path/to/socket"},
      {"cudaipc:tmp/x.sock", GST_URI_ERROR_BAD_URI, "cudaipc:///path/to/socket"},
      // two slashes: "tmp" would be a host
      {"cudaipc://tmp/x.sock", GST_URI_ERROR_BAD_URI, "host part ('tmp')"},
      {"cudaipc://localhost/tmp/x.sock", GST_URI_ERROR_BAD_URI, "cudaipc:///localhost/tmp/x.sock"},
      {"cudaipc://", GST_URI_ERROR_BAD_URI, "no socket path"},
      {"cudaipc:///", GST_URI_ERROR_BAD_URI, "no socket path"},
      {"cudaipc://?memory=host", GST_URI_ERROR_BAD_URI, "no socket path"},
      {"cudaipc:///tmp/a%2Fb.sock", GST_URI_ERROR_BAD_URI, "percent-escape"},
      {"cudaipc:///tmp/a%00b.sock", GST_URI_ERROR_BAD_URI, "percent-escape"},
      {"cudaipc:///tmp/a%zz.sock", GST_URI_ERROR_BAD_URI, "percent-escape"},
      {"cudaipc:///tmp/x.sock#frag", GST_URI_ERROR_BAD_URI, "fragment"},
      {"cudaipc:///tmp/x.sock?reconnect", GST_URI_ERROR_BAD_URI, "'reconnect' is not of the form"},
      {"cudaipc:///tmp/x.sock?=host", GST_URI_ERROR_BAD_URI, "not of the form name=value"},
      {"cudaipc:///tmp/x.sock?label=%G1", GST_URI_ERROR_BAD_URI, "percent-escape"},
  };
  for (const Case& c : cases) {
    GError* error = parse_error(c.uri);
    if (!error) continue;
    EXPECT_TRUE(g_error_matches(error, GST_URI_ERROR, c.code)) << c.uri << ": " << error->message;
    EXPECT_NE(std::string(error->message).find(c.says), std::string::npos)
        << c.uri << ": " << error->message;
    g_error_free(error);
  }
}

TEST_F(UriHandler, SetsSocketPathAndTypedProperties) {
  ASSERT_TRUE(set("cudaipc:///tmp/cam%201.sock?mode=host&timeout=250&reconnect=true&label=x%20y"))
      << message();
  EXPECT_STREQ(self()->socket_path, "/tmp/cam 1.sock");
  EXPECT_EQ(self()->mode, kModeHost);
  EXPECT_EQ(self()->timeout, 250u);
  EXPECT_TRUE(self()->reconnect);
  EXPECT_STREQ(self()->label, "x y");
  // Enums by nick, GEnum name or number, booleans as gst-launch-1.0 reads them.
  ASSERT_TRUE(set("cudaipc:///tmp/b.sock?mode=2&reconnect=false")) << message();
  EXPECT_EQ(self()->mode, kModeCuda);
  EXPECT_FALSE(self()->reconnect);
  ASSERT_TRUE(set("cudaipc:///tmp/b.sock?mode=Host")) << message();
  EXPECT_EQ(self()->mode, kModeHost);
}

TEST_F(UriHandler, ParametersNotGivenKeepTheirValues) {
  ASSERT_TRUE(set("cudaipc:///tmp/a.sock?timeout=5")) << message();
  ASSERT_TRUE(set("cudaipc:///tmp/b.sock")) << message();
  EXPECT_STREQ(self()->socket_path, "/tmp/b.sock");
  EXPECT_EQ(self()->timeout, 5u);
}

TEST_F(UriHandler, RefusesBadParametersAndChangesNothing) {
  struct Case {
    const char* uri;
    const char* says;
  };
  const Case cases[] = {
      {"cudaipc:///tmp/new.sock?mode=host&bogus=1",
       "unknown parameter 'bogus'; the parameters are mode, timeout, reconnect, label"},
      {"cudaipc:///tmp/new.sock?count=3", "'count' is read-only"},
      {"cudaipc:///tmp/new.sock?timeout=0", "'0' is out of range"},
      {"cudaipc:///tmp/new.sock?timeout=60001", "'60001' is out of range"},
      {"cudaipc:///tmp/new.sock?timeout=soon", "'soon' is not a value of guint"},
      {"cudaipc:///tmp/new.sock?mode=gpu", "(one of auto, host, cuda)"},
      {"cudaipc:///tmp/new.sock?reconnect=perhaps", "not a value of gboolean"},
      {"cudaipc:///tmp/new.sock?timeout=5&timeout=6", "'timeout' is given twice"},
      {"cudaipc:///tmp/new.sock?socket-path=/tmp/other.sock", "socket-path is the URI's path"},
      {"cudaipc:///tmp/new.sock?name=src", "'name' cannot be set from a URI"},
  };
  for (const Case& c : cases) {
    EXPECT_FALSE(set(c.uri)) << c.uri;
    ASSERT_NE(error_, nullptr) << c.uri;
    EXPECT_TRUE(g_error_matches(error_, GST_URI_ERROR, GST_URI_ERROR_BAD_URI)) << message();
    EXPECT_NE(message().find(c.says), std::string::npos) << c.uri << ": " << message();
    EXPECT_STREQ(self()->socket_path, "/default.sock") << c.uri;
    EXPECT_EQ(self()->mode, kModeAny) << c.uri;
    EXPECT_EQ(self()->timeout, 100u) << c.uri;
  }
}

TEST_F(UriHandler, OnlyInNullAndReady) {
  ASSERT_EQ(gst_element_set_state(element_, GST_STATE_READY), GST_STATE_CHANGE_SUCCESS);
  EXPECT_TRUE(set("cudaipc:///tmp/ready.sock")) << message();
  ASSERT_NE(gst_element_set_state(element_, GST_STATE_PAUSED), GST_STATE_CHANGE_FAILURE);
  EXPECT_FALSE(set("cudaipc:///tmp/paused.sock"));
  EXPECT_TRUE(g_error_matches(error_, GST_URI_ERROR, GST_URI_ERROR_BAD_STATE)) << message();
  EXPECT_NE(message().find("NULL and READY"), std::string::npos) << message();
  EXPECT_STREQ(self()->socket_path, "/tmp/ready.sock");
}

TEST(UriForSocketPath, EncodesWhatAUriCannotHoldAndParsesBack) {
  EXPECT_EQ(cipc_gst::uri_for_socket_path("/run/user/1000/cudaipc.sock"),
            "cudaipc:///run/user/1000/cudaipc.sock");
  const std::string odd = "/tmp/my cam?#%.sock";
  const std::string uri = cipc_gst::uri_for_socket_path(odd);
  EXPECT_EQ(uri, "cudaipc:///tmp/my%20cam%3F%23%25.sock");
  EXPECT_EQ(parse_ok(uri.c_str()).socket_path, odd);
}

TEST(UriForSocketPath, RelativePathsBecomeAbsolute) {
  gchar* cwd = g_get_current_dir();
  const std::string expected = std::string("cudaipc://") + cwd + "/rel.sock";
  g_free(cwd);
  EXPECT_EQ(cipc_gst::uri_for_socket_path("rel.sock"), expected);
}

}  // namespace
