# SPDX-License-Identifier: LGPL-2.1-or-later
"""Shared by tests/fuzz/run-fuzzers and scripts/run-sanitizers: command running with a log and
a wall-clock bound, and the GoogleTest-style JSON report that scripts/test-summary.py counts
(one test case per fuzz target or sanitizer run; scripts/run-tests writes them into the folder
test-summary.py reads)."""

import datetime
import json
import os
import subprocess
import sys
import time
import traceback


class Case:
    """One reported result: outcome is "passed", "failed" or "skipped"."""

    def __init__(self, suite, name, outcome, seconds=0.0, message=""):
        self.suite = suite
        self.name = name
        self.outcome = outcome
        self.seconds = seconds
        self.message = message


def run_logged(command, log_path, env=None, timeout_s=None, cwd=None):
    """Runs `command` with stdout and stderr into `log_path`. Returns (exit status, seconds);
    the status is 124 when it ran past `timeout_s` and was killed (its whole process group)."""
    start = time.monotonic()
    with open(log_path, "w", encoding="utf-8", errors="replace") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                start_new_session=True)
        try:
            status = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
            log.write(f"\n[killed after {timeout_s} s]\n")
            status = 124
    return status, time.monotonic() - start


def tail(path, lines=40):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def write_gtest_json(path, cases):
    """Writes `cases` as GoogleTest's JSON output (the 1.12 layout test-summary.py reads)."""
    now = datetime.datetime.now().isoformat(timespec="seconds")
    suites = {}
    for c in cases:
        suites.setdefault(c.suite, []).append(c)
    doc = {
        "tests": len(cases),
        "failures": sum(c.outcome == "failed" for c in cases),
        "disabled": 0,
        "errors": 0,
        "timestamp": now,
        "time": f"{sum(c.seconds for c in cases):.3f}s",
        "name": "AllTests",
        "testsuites": [],
    }
    for suite, members in suites.items():
        entries = []
        for c in members:
            entry = {
                "name": c.name,
                "status": "RUN",
                "result": "SKIPPED" if c.outcome == "skipped" else "COMPLETED",
                "timestamp": now,
                "time": f"{c.seconds:.3f}s",
                "classname": suite,
            }
            if c.outcome == "failed":
                entry["failures"] = [{"failure": c.message or "failed", "type": ""}]
            entries.append(entry)
        doc["testsuites"].append({
            "name": suite,
            "tests": len(members),
            "failures": sum(c.outcome == "failed" for c in members),
            "disabled": 0,
            "errors": 0,
            "timestamp": now,
            "time": f"{sum(c.seconds for c in members):.3f}s",
            "testsuite": entries,
        })
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
    os.replace(tmp, path)


def guarded_main(main, argv, suite):
    """Runs main(argv); if it raises, prints the traceback and, when argv asks for a --report,
    writes one failed case, so that a broken run is counted and not silently missing."""
    try:
        return main(argv)
    except Exception:  # noqa: BLE001 - anything at all must end up in the report
        text = traceback.format_exc()
        print(text, file=sys.stderr)
        if "--report" in argv[1:-1]:
            path = os.path.abspath(argv[argv.index("--report") + 1])
            write_gtest_json(path, [Case(suite, "script", "failed", 0,
                                         f"{os.path.basename(argv[0])} raised:\n{text}")])
        return 1
