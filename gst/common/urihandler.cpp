// SPDX-License-Identifier: LGPL-2.1-or-later
#include "common/urihandler.h"

#include <cstring>
#include <memory>

namespace cipc_gst {

namespace {

struct GFreeDeleter {
  void operator()(void* p) const { g_free(p); }
};
using GCharPtr = std::unique_ptr<gchar, GFreeDeleter>;

struct GValueHolder {
  GValue value = G_VALUE_INIT;
  GValueHolder() = default;
  GValueHolder(const GValueHolder&) = delete;
  GValueHolder& operator=(const GValueHolder&) = delete;
  ~GValueHolder() {
    if (G_IS_VALUE(&value)) g_value_unset(&value);
  }
};

// Properties a URI never sets: the path is the socket path, and an object's name and parent
// are the pipeline's business.
bool reserved(const std::string& name) {
  return name == "socket-path" || name == "name" || name == "parent";
}

bool writable(const GParamSpec* pspec) {
  return (pspec->flags & G_PARAM_WRITABLE) != 0 && (pspec->flags & G_PARAM_CONSTRUCT_ONLY) == 0;
}

// "cudasrc-ipc" for our elements, the GType name for any other object.
std::string object_label(GObject* object) {
  if (GST_IS_ELEMENT(object)) {
    GstElementFactory* factory = gst_element_get_factory(GST_ELEMENT(object));
    if (factory) return GST_OBJECT_NAME(factory);
  }
  return G_OBJECT_TYPE_NAME(object);
}

// The parameters a URI may give `object`, for the error about an unknown one.
std::string parameter_names(GObject* object) {
  guint count = 0;
  GParamSpec** specs = g_object_class_list_properties(G_OBJECT_GET_CLASS(object), &count);
  std::string names;
  for (guint i = 0; i < count; i++) {
    if (!writable(specs[i]) || reserved(specs[i]->name)) continue;
    if (!names.empty()) names += ", ";
    names += specs[i]->name;
  }
  g_free(specs);
  return names;
}

bool bad_uri(GError** error, const char* uri, const std::string& problem) {
  g_set_error(error, GST_URI_ERROR, GST_URI_ERROR_BAD_URI, "Bad cudaipc URI '%s': %s", uri,
              problem.c_str());
  return false;
}

// `text` percent-decoded, or nothing when an escape is malformed or decodes to NUL (or to '/'
// where `slash_allowed` is false: a path's separators are written as themselves).
bool unescape(const std::string& text, bool slash_allowed, std::string* out) {
  GCharPtr decoded(g_uri_unescape_string(text.c_str(), slash_allowed ? nullptr : "/"));
  if (!decoded) return false;
  *out = decoded.get();
  return true;
}

// The string `text` as a value of the property `pspec`, converted as gst-launch-1.0 converts
// property values, and in the property's range.
bool convert_value(GParamSpec* pspec, const std::string& text, GValue* value, std::string* why) {
  g_value_init(value, G_PARAM_SPEC_VALUE_TYPE(pspec));
  if (G_VALUE_HOLDS_STRING(value)) {
    g_value_set_string(value, text.c_str());  // as written: no quoting rules for strings
  } else if (!gst_value_deserialize(value, text.c_str())) {
    *why = "'" + text + "' is not a value of " + g_type_name(G_PARAM_SPEC_VALUE_TYPE(pspec));
    if (G_IS_PARAM_SPEC_ENUM(pspec)) {
      GEnumClass* enums = G_PARAM_SPEC_ENUM(pspec)->enum_class;
      *why += " (one of";
      for (guint i = 0; i < enums->n_values; i++)
        *why += std::string(i ? ", " : " ") + enums->values[i].value_nick;
      *why += ")";
    }
    return false;
  }
  if (g_param_value_validate(pspec, value)) {  // true: it had to be changed to fit
    *why = "'" + text + "' is out of range";
    return false;
  }
  return true;
}

}  // namespace

bool parse_uri(const char* uri, ParsedUri* out, GError** error) {
  if (uri == nullptr || *uri == '\0') {
    g_set_error(error, GST_URI_ERROR, GST_URI_ERROR_BAD_URI, "No URI given");
    return false;
  }
  if (!gst_uri_has_protocol(uri, kUriProtocol)) {
    g_set_error(error, GST_URI_ERROR, GST_URI_ERROR_UNSUPPORTED_PROTOCOL,
                "'%s' is not a cudaipc:// URI", uri);
    return false;
  }
  const std::string text(uri + std::strlen(kUriProtocol) + 1);  // after "cudaipc:"
  if (text.compare(0, 2, "//") != 0)
    return bad_uri(error, uri, "it needs the form cudaipc:///path/to/socket");
  const size_t path_start = text.find_first_of("/?#", 2);
  const std::string host =
      text.substr(2, path_start == std::string::npos ? std::string::npos : path_start - 2);
  if (!host.empty())
    return bad_uri(error, uri,
                   "it has a host part ('" + host +
                       "'); the socket path follows three slashes, as in cudaipc:///" + host +
                       (path_start == std::string::npos ? "" : text.substr(path_start)));
  if (text.find('#') != std::string::npos)
    return bad_uri(error, uri, "a fragment ('#...') means nothing here");
  const size_t query_start = text.find('?', 2);
  const std::string raw_path =
      text.substr(2, query_start == std::string::npos ? std::string::npos : query_start - 2);
  if (raw_path.empty() || raw_path == "/")
    return bad_uri(error, uri, "it has no socket path (cudaipc:///path/to/socket)");

  ParsedUri parsed;
  if (!unescape(raw_path, false, &parsed.socket_path))
    return bad_uri(error, uri,
                   "the path has a malformed percent-escape, or one that decodes to '/' or NUL");

  if (query_start != std::string::npos) {
    const std::string query = text.substr(query_start + 1);
    size_t start = 0;
    while (start <= query.size()) {
      size_t end = query.find('&', start);
      if (end == std::string::npos) end = query.size();
      const std::string item = query.substr(start, end - start);
      start = end + 1;
      if (item.empty()) continue;  // "?a=1&&b=2", a trailing '&'
      const size_t equals = item.find('=');
      if (equals == std::string::npos || equals == 0)
        return bad_uri(error, uri, "the parameter '" + item + "' is not of the form name=value");
      UriParameter parameter;
      if (!unescape(item.substr(0, equals), true, &parameter.name) ||
          !unescape(item.substr(equals + 1), true, &parameter.value))
        return bad_uri(error, uri,
                       "the parameter '" + item + "' has a malformed percent-escape, or %00");
      parsed.parameters.push_back(std::move(parameter));
    }
  }
  *out = std::move(parsed);
  return true;
}

bool apply_uri(GObject* object, const ParsedUri& uri, GError** error) {
  GObjectClass* klass = G_OBJECT_GET_CLASS(object);
  const std::string label = object_label(object);
  auto refuse = [&](const std::string& problem) {
    g_set_error(error, GST_URI_ERROR, GST_URI_ERROR_BAD_URI, "%s: %s", label.c_str(),
                problem.c_str());
    return false;
  };
  GParamSpec* path_spec = g_object_class_find_property(klass, "socket-path");
  if (path_spec == nullptr || !writable(path_spec))
    return refuse("it has no writable socket-path property");

  // Everything is converted and checked first, so that a bad URI changes nothing.
  std::vector<std::unique_ptr<GValueHolder>> values;
  std::vector<GParamSpec*> specs;
  for (const UriParameter& parameter : uri.parameters) {
    const std::string& name = parameter.name;
    if (name == "socket-path")
      return refuse("socket-path is the URI's path (cudaipc:///path/to/socket), not a parameter");
    if (reserved(name)) return refuse("the parameter '" + name + "' cannot be set from a URI");
    GParamSpec* pspec = g_object_class_find_property(klass, name.c_str());
    if (pspec == nullptr)
      return refuse("unknown parameter '" + name + "'; the parameters are " +
                    parameter_names(object));
    if (!writable(pspec)) return refuse("the parameter '" + name + "' is read-only");
    for (GParamSpec* seen : specs)
      if (seen == pspec) return refuse("the parameter '" + name + "' is given twice");
    auto holder = std::make_unique<GValueHolder>();
    std::string why;
    if (!convert_value(pspec, parameter.value, &holder->value, &why))
      return refuse("the parameter " + name + ": " + why);
    specs.push_back(pspec);
    values.push_back(std::move(holder));
  }

  g_object_freeze_notify(object);
  g_object_set(object, "socket-path", uri.socket_path.c_str(), nullptr);
  for (size_t i = 0; i < specs.size(); i++)
    g_object_set_property(object, specs[i]->name, &values[i]->value);
  g_object_thaw_notify(object);
  return true;
}

bool set_element_uri(GstElement* element, const char* uri, GError** error) {
  GST_OBJECT_LOCK(element);
  const GstState state = GST_STATE(element);
  GST_OBJECT_UNLOCK(element);
  if (state != GST_STATE_NULL && state != GST_STATE_READY) {
    g_set_error(error, GST_URI_ERROR, GST_URI_ERROR_BAD_STATE,
                "%s: the URI can only be changed in the NULL and READY states",
                object_label(G_OBJECT(element)).c_str());
    return false;
  }
  ParsedUri parsed;
  return parse_uri(uri, &parsed, error) && apply_uri(G_OBJECT(element), parsed, error);
}

std::string uri_for_socket_path(const std::string& socket_path) {
  // A relative socket-path is opened relative to the working directory: so is its URI.
  std::string absolute = socket_path;
  if (!g_path_is_absolute(socket_path.c_str())) {
    GCharPtr cwd(g_get_current_dir());
    absolute = std::string(cwd.get()) + G_DIR_SEPARATOR_S + socket_path;
  }
  GCharPtr escaped(g_uri_escape_string(absolute.c_str(), "/", FALSE));
  return std::string(kUriProtocol) + "://" + escaped.get();
}

namespace {

const gchar* const* uri_protocols(GType) {
  static const gchar* const protocols[] = {kUriProtocol, nullptr};
  return protocols;
}

gchar* element_uri(GstURIHandler* handler) {
  gchar* path = nullptr;
  g_object_get(handler, "socket-path", &path, nullptr);
  GCharPtr owned(path);
  return owned ? g_strdup(uri_for_socket_path(owned.get()).c_str()) : nullptr;
}

gboolean set_handler_uri(GstURIHandler* handler, const gchar* uri, GError** error) {
  return set_element_uri(GST_ELEMENT(handler), uri, error);
}

void init_uri_handler(gpointer g_iface, GstURIType (*uri_type)(GType)) {
  auto* iface = static_cast<GstURIHandlerInterface*>(g_iface);
  iface->get_type = uri_type;
  iface->get_protocols = uri_protocols;
  iface->get_uri = element_uri;
  iface->set_uri = set_handler_uri;
}

}  // namespace

void init_src_uri_handler(gpointer iface, gpointer) {
  init_uri_handler(iface, [](GType) { return GST_URI_SRC; });
}

void init_sink_uri_handler(gpointer iface, gpointer) {
  init_uri_handler(iface, [](GType) { return GST_URI_SINK; });
}

}  // namespace cipc_gst
