#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""`meson install` into a scratch DESTDIR, then checks the layout a user's system would get:
the plugin in the system GStreamer's plugin directory (the pluginsdir of gstreamer-1.0's
pkg-config unless -Dplugins_install_dir says otherwise), the public header, and a pkg-config file
whose --cflags find that header; and that the installed plugin (not the build's) loads in
gst-inspect-1.0 and names its elements.

Usage: check_install.py BUILD_DIR PLUGINS_DIR PREFIX INCLUDEDIR LIBDIR
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile


def fail(message):
    print("check_install: FAIL: " + message)
    return 1


def main():
    if len(sys.argv) != 6:
        print(__doc__)
        return 2
    build, plugins_dir, prefix, includedir, libdir = sys.argv[1:]
    includedir = includedir if os.path.isabs(includedir) else os.path.join(prefix, includedir)
    libdir = libdir if os.path.isabs(libdir) else os.path.join(prefix, libdir)
    meson = shutil.which("meson")
    if meson is None:
        print("check_install: SKIP: meson is not on PATH")
        return 77
    with tempfile.TemporaryDirectory(prefix="cudaipc-destdir-") as dest:
        r = subprocess.run([meson, "install", "-C", build, "--destdir", dest, "--no-rebuild"],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            return fail("meson install failed:\n" + r.stdout + r.stderr)

        def staged(path):
            return os.path.join(dest, path.lstrip("/"))

        plugin = staged(os.path.join(plugins_dir, "libgstcudaipc.so"))
        header = staged(os.path.join(includedir, "gstreamer-1.0/gst/cudaipc/gstcudaipcmemory.h"))
        pc = staged(os.path.join(libdir, "pkgconfig/gstreamer-cudaipc-1.0.pc"))
        for what, path in (("plugin", plugin), ("header", header), ("pkg-config file", pc)):
            if not os.path.isfile(path):
                installed = "\n  ".join(os.path.relpath(os.path.join(d, f), dest)
                                        for d, _, fs in os.walk(dest) for f in fs)
                return fail(f"no {what} at {os.path.relpath(path, dest)}; installed:\n  {installed}")

        readelf = subprocess.run(["readelf", "-d", plugin], capture_output=True, text=True).stdout
        if re.search(r"R(UN)?PATH.*" + re.escape(os.path.abspath(build)), readelf):
            return fail("the installed plugin still has an RPATH into the build directory")

        env = dict(os.environ, PKG_CONFIG_PATH=os.path.dirname(pc),
                   PKG_CONFIG_SYSROOT_DIR=dest)
        cflags = subprocess.run(["pkg-config", "--cflags", "gstreamer-cudaipc-1.0"], env=env,
                                capture_output=True, text=True)
        if cflags.returncode != 0:
            return fail("pkg-config --cflags gstreamer-cudaipc-1.0 failed: " + cflags.stderr)
        dirs = [f[2:] for f in cflags.stdout.split() if f.startswith("-I")]
        if not any(os.path.isfile(os.path.join(d, "gst/cudaipc/gstcudaipcmemory.h")) for d in dirs):
            return fail("pkg-config's -I flags (" + cflags.stdout.strip() + ") do not find the header")

        # libcudaipc: the library (by soname), its header and pkg-config file; a C program
        # compiles and links against the staged copy through pkg-config alone.
        lib_so = staged(os.path.join(libdir, "libcudaipc.so.0"))
        c_header = staged(os.path.join(includedir, "cudaipc/cudaipc.h"))
        c_pc = staged(os.path.join(libdir, "pkgconfig/cudaipc.pc"))
        for what, path in (("libcudaipc.so.0", lib_so), ("cudaipc/cudaipc.h", c_header),
                           ("cudaipc.pc", c_pc)):
            if not os.path.exists(path):
                return fail(f"no {what} at {os.path.relpath(path, dest)}")
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "cudaipc"], env=env,
                               capture_output=True, text=True)
        if flags.returncode != 0:
            return fail("pkg-config --cflags --libs cudaipc failed: " + flags.stderr)
        program = os.path.join(dest, "uses_cudaipc.c")
        with open(program, "w") as f:
            f.write("#include <cudaipc/cudaipc.h>\n#include <stdio.h>\n"
                    "int main(void) { printf(\"%s\\n\", cudaipc_version()); return 0; }\n")
        compiled = subprocess.run(["cc", program, "-o", program + ".bin"] + flags.stdout.split(),
                                  capture_output=True, text=True)
        if compiled.returncode != 0:
            return fail("a C program does not build against the installed libcudaipc:\n" +
                        compiled.stderr)
        ran = subprocess.run([program + ".bin"], capture_output=True, text=True,
                             env=dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(lib_so)))
        if ran.returncode != 0 or not ran.stdout.strip():
            return fail("the program linked against libcudaipc does not run: " + ran.stderr)

        # The installed copy, and only it: no GST_PLUGIN_PATH into the build, a fresh registry.
        env = dict(os.environ, GST_PLUGIN_PATH=os.path.dirname(plugin),
                   GST_REGISTRY=os.path.join(dest, "registry.bin"))
        inspect = subprocess.run(["gst-inspect-1.0", plugin], env=env, capture_output=True,
                                 text=True, timeout=60)
        if inspect.returncode != 0 or "cudasink-ipc" not in inspect.stdout:
            return fail("gst-inspect-1.0 cannot load the installed plugin:\n" + inspect.stderr)
        elements = sorted(set(re.findall(r"^\s+(\S+): ", inspect.stdout, re.M)))
        print(f"check_install: plugin -> {plugins_dir}, header -> {includedir}/gstreamer-1.0, "
              f"pkg-config -> {libdir}/pkgconfig; libcudaipc {ran.stdout.strip()} links; "
              f"installed plugin loads "
              f"({', '.join(e for e in elements if e not in ('Name', 'Description'))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
