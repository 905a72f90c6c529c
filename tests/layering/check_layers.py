#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Checks the layering of docs/architecture.md on the product's sources:

- each folder includes headers only of the folders it may depend on (one-way dependencies);
- no file under ipc/, slots/, publish/, cuda/, v4l2/, bayer/ or libcudaipc/ includes a GStreamer
  or GLib header;
- only cuda/ includes CUDA's headers or calls the CUDA runtime or driver API (cudaXxx(, cuXxx();
  examples/ too, as programs that show applications running their own CUDA work on frames;
- only v4l2/ issues V4L2 ioctls (ioctl(, v4l2_ioctl(, VIDIOC_*); a socket ioctl (an ioctl( whose
  line names a SIOC* request, as ipc/ asks how much its peer has not read) is not one;
- gst/'s rooms (docs/architecture.md): no source directly in gst/ but plugin.cpp; a room includes
  only the rooms GST_ROOMS allows it, and names the room in the include ("memory/slotpool.h");
- every source file's name is unique across the product's folders (headers are included by
  name, and a second foo.h would be taken for the first).

Usage: check_layers.py SOURCE_ROOT      checks the tree, lists every violation, exits 1 on any
       check_layers.py --self-test      plants one violation of each kind in a scratch tree and
                                        fails unless each is reported (the check can fail)
"""
import os
import re
import sys
import tempfile

# folder -> the folders whose headers it may include (besides its own)
ALLOWED = {
    "bayer": set(),
    "ipc": set(),
    "cuda": {"bayer"},
    "v4l2": {"bayer"},
    "slots": {"ipc", "cuda"},
    "publish": {"ipc", "slots", "cuda"},
    "gst": {"ipc", "slots", "publish", "cuda", "bayer", "v4l2"},
    "libcudaipc": {"ipc", "slots", "publish", "cuda"},
    "examples": {"gst", "libcudaipc"},
}
# gst/'s rooms -> the rooms whose headers they may include (besides their own and the lower
# layers ALLOWED["gst"] names). plugin.cpp, in gst/ itself, registers the elements of all of them.
GST_ROOMS = {
    "common": set(),
    "memory": {"common"},
    "ipcsink": {"common", "memory"},
    "ipcsrc": {"common", "memory", "ipcsrc/gl"},
    "ipcsrc/gl": {"common", "memory", "ipcsrc"},
    "camera": {"common", "memory"},
}
GST_ROOT_SOURCES = {"plugin.cpp"}
NO_GSTREAMER = {"ipc", "slots", "publish", "cuda", "v4l2", "bayer", "libcudaipc"}
CUDA_API_ONLY_IN = {"cuda"}
# Examples are user-facing code: showing an application's own CUDA kernel read a frame in place is
# their point. They are exempt from the CUDA rule only; includes and ioctls are checked as anywhere.
CUDA_API_EXEMPT = {"examples"}
V4L2_IOCTL_ONLY_IN = {"v4l2"}
SOURCE_SUFFIXES = (".h", ".hpp", ".c", ".cpp", ".cc", ".cu", ".cuh")

GST_INCLUDE = re.compile(r'#\s*include\s*[<"](gst/|glib|gio/|gobject/|glib-object\.h)')
CUDA_INCLUDE = re.compile(r'#\s*include\s*[<"](cuda\.h|cuda_runtime[\w.]*|cudaTypedefs\.h|'
                          r'driver_types\.h|cupti[\w.]*)[>"]')
CUDA_CALL = re.compile(r"\b(cuda[A-Z]\w*|cu[A-Z][A-Za-z]\w*)\s*\(")
V4L2_IOCTL = re.compile(r"\b(ioctl|v4l2_ioctl)\s*\(|\bVIDIOC_\w+")
SOCKET_IOCTL = re.compile(r"\bioctl\s*\(.*\bSIOC[A-Z]+\b")
LOCAL_INCLUDE = re.compile(r'#\s*include\s*"([^"]+)"')


def strip_comments_and_strings(text):
    """Blanks comments and string/char literals, keeping line numbers and #include lines."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            line_start = text.rfind("\n", 0, i) + 1
            if text[line_start:i].lstrip().startswith("#"):  # keep #include "x.h"
                out.append(c)
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def source_files(root):
    for folder in ALLOWED:
        base = os.path.join(root, folder)
        for dirpath, _, names in os.walk(base):
            for name in sorted(names):
                if name.endswith(SOURCE_SUFFIXES):
                    yield folder, os.path.join(dirpath, name)


def gst_room(root, path):
    """The room of a file under gst/ ("ipcsrc/gl"), "" for gst/ itself, None for the installed
    public header (gst/cudaipc/, which belongs to no room)."""
    rel = os.path.relpath(os.path.dirname(path), os.path.join(root, "gst"))
    if rel == ".":
        return ""
    if rel.split(os.sep)[0] == "cudaipc":
        return None
    return rel.replace(os.sep, "/")


def check_gst_rooms(root, path, rel, code, headers, problems):
    room = gst_room(root, path)
    if room == "" and os.path.basename(path) not in GST_ROOT_SOURCES and not path.endswith(".h"):
        problems.append(f"{rel}: gst/ holds only plugin.cpp: move it into the room it belongs to")
    if room is None:
        return
    if room and room not in GST_ROOMS:
        problems.append(f"{rel}: gst/{room}/ is not a room of docs/architecture.md (GST_ROOMS)")
        return
    for lineno, line in enumerate(code.splitlines(), 1):
        m = LOCAL_INCLUDE.search(line)
        if not m:
            continue
        name = m.group(1)
        target = headers.get(name) or headers.get(os.path.basename(name))
        if target != "gst" or name.startswith("cudaipc/"):
            continue
        if "/" not in name:
            problems.append(f"{rel}:{lineno}: include gst/'s headers by room (\"memory/slotpool.h\"): "
                            f"{name}")
            continue
        to = os.path.dirname(name)
        if room and to != room and to not in GST_ROOMS[room]:
            problems.append(f"{rel}:{lineno}: gst/{room}/ may not include gst/{to}/ ({name})")


def check_unique_names(root, problems):
    seen = {}
    for _, path in source_files(root):
        seen.setdefault(os.path.basename(path), []).append(os.path.relpath(path, root))
    for name, paths in sorted(seen.items()):
        if len(paths) > 1:
            problems.append(f"{paths[1]}: {name} is also {paths[0]}: file names are unique across "
                            "the product (headers are included by name)")


def check(root):
    headers = {}  # basename -> folder (our headers are included by basename)
    for folder, path in source_files(root):
        if path.endswith((".h", ".hpp", ".cuh")):
            headers.setdefault(os.path.basename(path), folder)
            rel = os.path.relpath(path, os.path.join(root, folder))
            headers.setdefault(rel, folder)
    problems = []
    check_unique_names(root, problems)
    for folder, path in source_files(root):
        rel = os.path.relpath(path, root)
        with open(path, encoding="utf-8", errors="replace") as f:
            raw = f.read()
        code = strip_comments_and_strings(raw)
        if folder == "gst":
            check_gst_rooms(root, path, rel, code, headers, problems)
        for lineno, line in enumerate(code.splitlines(), 1):
            where = f"{rel}:{lineno}"
            if folder in NO_GSTREAMER and GST_INCLUDE.search(line):
                problems.append(f"{where}: {folder}/ must not include GStreamer or GLib: {line.strip()}")
            if folder not in CUDA_API_ONLY_IN | CUDA_API_EXEMPT:
                if CUDA_INCLUDE.search(line):
                    problems.append(f"{where}: only cuda/ includes CUDA headers: {line.strip()}")
                m = CUDA_CALL.search(line)
                if m and not line.lstrip().startswith("#"):
                    problems.append(f"{where}: only cuda/ calls the CUDA API ({m.group(1)})")
            if folder not in V4L2_IOCTL_ONLY_IN:
                m = V4L2_IOCTL.search(line)
                if m and not (m.group(0).startswith("ioctl") and SOCKET_IOCTL.search(line)):
                    problems.append(f"{where}: only v4l2/ issues V4L2 ioctls ({m.group(0).strip('( ')})")
            m = LOCAL_INCLUDE.search(line)
            if m:
                target = headers.get(m.group(1)) or headers.get(os.path.basename(m.group(1)))
                if target and target != folder and target not in ALLOWED[folder]:
                    problems.append(f"{where}: {folder}/ may not depend on {target}/ "
                                    f"(includes {m.group(1)})")
    return problems


def self_test():
    planted = {
        "bayer/cfa.h": "#pragma once\nenum class Cfa { kRGGB };\n",
        "ipc/a.cpp": '#include <gst/gst.h>\n#include "cfa.h"\n',  # GStreamer; ipc -> bayer
        "slots/b.cpp": "// cudaMalloc( in a comment is fine\nvoid f() { cudaMalloc(0, 0); }\n",
        "gst/camera/c.cpp": '#include <cuda_runtime.h>\nint g(int fd) { return ioctl(fd, 0); }\n',
        "cuda/d.cpp": '#include <cuda.h>\nvoid h() { cuMemCreate(0, 0, 0, 0); const char* s = "ioctl(";\n'
                      "(void)s; }\n",
        "v4l2/e.cpp": "int k(int fd) { return ioctl(fd, VIDIOC_QUERYCAP, 0); }\n",
        # CUDA is fine in examples/; a dependency on bayer/ and an ioctl are not
        "examples/f.cu": '#include <cuda_runtime.h>\n#include "cfa.h"\n'
                         "void f(int fd) { cudaMalloc(0, 0); ioctl(fd, 0); }\n",
        "examples/g.c": '#include "cfa.h"\n',
        # a socket ioctl is not a V4L2 one
        "ipc/h.cpp": "bool q(int fd) { int n = 0; return ioctl(fd, SIOCOUTQ, &n) == 0; }\n",
        # gst/'s rooms: a camera file reaching into the sink's room, a bare include of a room's
        # header, a source left in gst/ itself, a second file of an existing name
        "gst/ipcsink/slotcopy.h": "#pragma once\n",
        "gst/memory/slotpool.h": "#pragma once\n",
        "gst/camera/cam.cpp": '#include "ipcsink/slotcopy.h"\n#include "slotpool.h"\n'
                              '#include "memory/slotpool.h"\n#include "cfa.h"\n',
        "gst/stray.cpp": "\n",
        "gst/plugin.cpp": '#include "ipcsink/slotcopy.h"\n#include "camera/cam.h"\n',
        "slots/slotcopy.h": "#pragma once\n",
    }
    expected = [
        ("ipc/a.cpp:1", "must not include GStreamer"),
        ("ipc/a.cpp:2", "may not depend on bayer/"),
        ("slots/b.cpp:2", "only cuda/ calls the CUDA API (cudaMalloc)"),
        ("gst/camera/c.cpp:1", "only cuda/ includes CUDA headers"),
        ("gst/camera/c.cpp:2", "only v4l2/ issues V4L2 ioctls"),
        ("examples/f.cu:2", "may not depend on bayer/"),
        ("examples/f.cu:3", "only v4l2/ issues V4L2 ioctls"),
        ("examples/g.c:1", "may not depend on bayer/"),
        ("gst/camera/cam.cpp:1", "gst/camera/ may not include gst/ipcsink/"),
        ("gst/camera/cam.cpp:2", "include gst/'s headers by room"),
        ("gst/stray.cpp", "gst/ holds only plugin.cpp"),
        ("", "file names are unique across the product"),
    ]
    with tempfile.TemporaryDirectory() as root:
        for rel, text in planted.items():
            os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        problems = check(root)
    ok = True
    for where, what in expected:
        if not any(p.startswith(where) and what in p for p in problems):
            print(f"self-test: not reported: {where}: {what}")
            ok = False
    for p in problems:
        if p.startswith(("cuda/", "v4l2/", "slots/b.cpp:1", "ipc/h.cpp")) or (
                p.startswith("examples/") and "CUDA" in p):
            print(f"self-test: false alarm: {p}")
            ok = False
    if len(problems) != len(expected):
        print(f"self-test: {len(problems)} problems reported, {len(expected)} planted:")
        for p in problems:
            print("  " + p)
        ok = False
    print("self-test: " + ("every planted violation reported, nothing else" if ok else "FAILED"))
    return 0 if ok else 1


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--self-test":
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    root = sys.argv[1]
    problems = check(root)
    files = sum(1 for _ in source_files(root))
    for p in problems:
        print(p)
    print(f"check_layers: {files} files, {len(problems)} violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
