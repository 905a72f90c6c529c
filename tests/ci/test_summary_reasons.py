#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""scripts/test-summary.py lists each failed test with why it failed.

The CI log shows only its end, so a failure without its message there cannot be diagnosed.
Builds one run's results by hand (a GoogleTest JSON case, a meson XML case, a meson test
without cases) and checks the summary prints each failure's own words under its name, and
still counts and exits as before.
"""

import json
import os
import subprocess
import sys
import tempfile

SUMMARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                       "test-summary.py")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        results = os.path.join(tmp, "results")
        os.makedirs(results)
        with open(os.path.join(results, "package-deb.json"), "w", encoding="utf-8") as f:
            json.dump({"tests": 2, "failures": 1, "testsuites": [{"name": "package", "testsuite": [
                {"name": "Builds", "status": "RUN", "result": "COMPLETED"},
                {"name": "Links", "status": "RUN", "result": "COMPLETED",
                 "failures": [{"failure": "c++ ...:\nundefined reference to `cuInit'\n" +
                               "\n".join(f"line {i}" for i in range(30)), "type": ""}]}]}]}, f)
        with open(os.path.join(results, "unit.xml"), "w", encoding="utf-8") as f:
            f.write('<testsuites><testsuite name="S"><testcase classname="S" name="Bad">'
                    '<failure message="expected 3, got 4"/></testcase></testsuite></testsuites>')
        testlog = os.path.join(tmp, "testlog.json")
        with open(testlog, "w", encoding="utf-8") as f:
            for entry in ({"name": "p:unit / unit", "result": "FAIL", "command": ["unit"]},
                          {"name": "p:e2e / script", "result": "FAIL", "command": ["script"],
                           "stdout": "starting\nconsumer got 29 of 30 frames\n"}):
                f.write(json.dumps(entry) + "\n")
        r = subprocess.run([sys.executable, SUMMARY, results, testlog], capture_output=True,
                           text=True)
    out = r.stdout
    problems = []
    for expected in ("  package.Links\n      c++ ...:\n      undefined reference to `cuInit'",
                     "  S.Bad\n      expected 3, got 4",
                     "  [meson] p:e2e / script (FAIL)\n      starting\n"
                     "      consumer got 29 of 30 frames",
                     "Summary: 1 passed, 3 failed, 0 skipped"):
        if expected not in out:
            problems.append(f"missing from the summary: {expected!r}")
    if "line 20" in out:
        problems.append("a long failure message was printed whole (it should be cut short)")
    if r.returncode != 1:
        problems.append(f"exit status {r.returncode}, expected 1")
    if problems:
        print("\n".join(problems))
        print("--- summary printed:\n" + out + r.stderr)
        return 1
    print("failure reasons are printed under each failed test")
    return 0


if __name__ == "__main__":
    sys.exit(main())
