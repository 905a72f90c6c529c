#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Checks that every C++/CUDA source of the project is formatted by clang-format with the
repository's .clang-format (Debian 12's clang-format 14). Lists the files that are not, with the
command that fixes them, and exits 1. First it feeds clang-format a badly formatted snippet and
fails unless that is reported, so a broken setup cannot pass silently.

Usage: check_format.py SOURCE_ROOT [--fix]
Exits 77 (a skip for meson) when no clang-format is installed.
"""
import os
import shutil
import subprocess
import sys

FOLDERS = ["ipc", "slots", "cuda", "bayer", "v4l2", "libcudaipc", "gst", "examples", "tests"]
SUFFIXES = (".c", ".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")


def find_clang_format():
    for name in ("clang-format-14", "clang-format"):
        path = shutil.which(name)
        if path:
            return path
    return None


def sources(root):
    for folder in FOLDERS:
        for dirpath, dirnames, names in os.walk(os.path.join(root, folder)):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("build"))
            for name in sorted(names):
                if name.endswith(SUFFIXES):
                    yield os.path.join(dirpath, name)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    root = os.path.abspath(sys.argv[1])
    fix = "--fix" in sys.argv[2:]
    tool = find_clang_format()
    if tool is None:
        print("check_format: SKIP: clang-format is not installed (apt-get install clang-format)")
        return 77
    version = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout.strip()
    style = "--style=file"  # the .clang-format nearest each file (gst/cudaipc/ has its own)
    bad_snippet = "int  main( ){return 0 ;}\n"
    probe = subprocess.run([tool, style, "--dry-run", "--Werror", "--assume-filename=" + os.path.join(root, "probe.cpp")],
                           input=bad_snippet, capture_output=True, text=True)
    if probe.returncode == 0:
        print(f"check_format: {version} does not report a misformatted snippet: check the setup")
        return 1
    files = list(sources(root))
    unformatted = []
    for path in files:
        if fix:
            subprocess.run([tool, style, "-i", path], check=True)
            continue
        r = subprocess.run([tool, style, "--dry-run", "--Werror", path], capture_output=True,
                           text=True)
        if r.returncode != 0:
            lines = r.stderr.count("error:")
            unformatted.append((os.path.relpath(path, root), lines))
    for rel, lines in unformatted:
        print(f"{rel}: {lines} place(s) differ from clang-format")
    if unformatted:
        print(f"check_format: fix with: {sys.argv[0]} {root} --fix  ({version})")
    print(f"check_format: {len(files)} files, {len(unformatted)} not formatted ({version})")
    return 1 if unformatted else 0


if __name__ == "__main__":
    sys.exit(main())
