// SPDX-License-Identifier: LGPL-2.1-or-later
// The cudaipc:// URI of cudasrc-ipc and cudasink-ipc (GstURIHandler), without GStreamer's
// element machinery so that tests can drive it on any GObject:
//
//   cudaipc:///run/user/1000/cudaipc.sock?memory=host&connect-timeout=0
//
// The path is the socket path (absolute, percent-decoded); no host part. Each query parameter
// name=value sets the writable property of that name, the value read as gst-launch-1.0 reads it
// (enums by nick or number, booleans, integers in range). socket-path and name cannot be set
// from the query. A URI is applied whole or not at all.
#pragma once

#include <gst/gst.h>

#include <string>
#include <vector>

namespace cipc_gst {

inline constexpr const char* kUriProtocol = "cudaipc";

struct UriParameter {
  std::string name;
  std::string value;
};

struct ParsedUri {
  std::string socket_path;
  std::vector<UriParameter> parameters;  // in the order the URI gives them
};

// Splits a cudaipc:// URI into its socket path and parameters. On a malformed URI returns
// false with a GST_URI_ERROR_BAD_URI (GST_URI_ERROR_UNSUPPORTED_PROTOCOL for another scheme)
// that names the problem.
bool parse_uri(const char* uri, ParsedUri* out, GError** error);

// Sets socket-path and every parameter on `object`, after checking all of them: an unknown,
// read-only or reserved parameter, a value that does not convert or is out of range, or a
// parameter given twice sets nothing and returns false with GST_URI_ERROR_BAD_URI.
bool apply_uri(GObject* object, const ParsedUri& uri, GError** error);

// parse_uri and apply_uri, refused (GST_URI_ERROR_BAD_STATE) above READY: the socket is opened
// when the element starts, and its properties are fixed from then on.
bool set_element_uri(GstElement* element, const char* uri, GError** error);

// cudaipc:// and the socket path, percent-encoded where a URI needs it. Only the path: the
// other properties are not put in the query.
std::string uri_for_socket_path(const std::string& socket_path);

// GInterfaceInitFunc of GstURIHandler for a source (cudasrc-ipc) and a sink (cudasink-ipc) with
// a socket-path property: protocol cudaipc, set_uri = set_element_uri, get_uri =
// uri_for_socket_path of socket-path.
void init_src_uri_handler(gpointer iface, gpointer data);
void init_sink_uri_handler(gpointer iface, gpointer data);

}  // namespace cipc_gst
