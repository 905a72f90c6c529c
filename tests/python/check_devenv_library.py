#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""In `meson devenv -C BUILD`, `import cudaipc` is the source tree's module and it loads the
build's libcudaipc (not a system one): what the devenv (libcudaipc/meson.build) promises.

Usage: meson devenv -C BUILD python3 -B tests/python/check_devenv_library.py BUILD_LIBRARY
"""
import os
import sys


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    want = os.path.realpath(sys.argv[1])
    source_module = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "..",
                                                  "python", "cudaipc", "__init__.py"))
    import cudaipc
    import cudaipc._capi as capi

    capi.lib()
    with open("/proc/self/maps") as maps:
        loaded = {os.path.realpath(line.split()[-1]) for line in maps if "libcudaipc.so" in line}
    problems = []
    if os.path.realpath(cudaipc.__file__) != source_module:
        problems.append(f"cudaipc is {cudaipc.__file__}, not {source_module}")
    if loaded != {want}:
        problems.append(f"loaded {sorted(loaded) or 'no libcudaipc'}, not {want}")
    for p in problems:
        print("check_devenv_library: FAIL: " + p)
    if not problems:
        print(f"check_devenv_library: {cudaipc.__file__} loaded {want}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
