#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Summarise a test run from GoogleTest result files and meson's testlog.json.

Usage: test-summary.py GTEST_RESULTS_DIR MESON_TESTLOG_JSON [--run LABEL DIR TESTLOG]...

GoogleTest results are read from GTEST_RESULTS_DIR: <binary>.json files (GTEST_OUTPUT=json:DIR/)
and <meson test name>.xml files, which meson itself asks gtest for (--gtest_output=xml:NAME.xml
in the build directory) when a test uses protocol 'gtest'.

Every GoogleTest case counts as one test (passed, failed or skipped; a
disabled case counts as skipped). A meson test whose binary left no GoogleTest
JSON (a crash before exit, a script test) counts as one test from its meson
result. A meson test that failed always counts at least one failure, even if its
JSON says every case passed.

Each failed test is listed with the first lines of its failure message (a meson test
without GoogleTest cases: the last lines it printed), so the end of a CI log says why.

Each --run adds another run's results (the project built against another GStreamer,
scripts/run-gst-versions): its tests count in the summary like the first run's, their names
prefixed with "[LABEL]" so a failure says which run it was, and a line per run gives its counts.

The last line printed is "Summary: N passed, N failed, N skipped". Exits 1 if
anything failed or nothing ran, else 0.
"""

import json
import os
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict

MESON_PASS = {"OK", "EXPECTEDFAIL"}  # meson itself treats both as success
MESON_SKIP = {"SKIP"}


class Case:
    def __init__(self, name, outcome, reason=""):
        self.name = name
        self.outcome = outcome  # "passed" | "failed" | "skipped"
        self.reason = reason


def json_key(filename):
    """gtest names its file <binary>.json, or <binary>_N.json if that exists."""
    stem = filename[: -len(".json")]
    m = re.fullmatch(r"(.+)_\d+", stem)
    return stem, (m.group(1) if m else None)


def with_outside_failures(cases, failures, errors, path):
    """A run that died in a global SetUp/TearDown has failures at the top level without any
    failing case: each one counts."""
    top_failures = int(failures or 0) + int(errors or 0)
    case_failures = sum(c.outcome == "failed" for c in cases)
    for _ in range(max(0, top_failures - case_failures)):
        cases.append(Case(f"{os.path.basename(path)} (failure outside any test case)", "failed"))
    return cases


def short_reason(text, lines=8, width=240):
    """The first lines of a failure's message, so CI's tail says why without the whole log."""
    kept = [line[:width] for line in str(text or "").strip().splitlines() if line.strip()][:lines]
    return "\n".join(kept)


def read_gtest_file(path, problems):
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        problems.append(f"{path}: unreadable GoogleTest JSON ({e})")
        return None
    if not isinstance(data, dict) or "testsuites" not in data:
        return None  # some other JSON file (e.g. compile_commands.json in a build directory)
    cases = []
    for suite in data.get("testsuites", []):
        suite_name = suite.get("name", "?")
        for tc in suite.get("testsuite", []):
            name = f"{suite_name}.{tc.get('name', '?')}"
            result = str(tc.get("result", "")).upper()
            status = str(tc.get("status", "")).upper()
            if tc.get("failures"):
                message = "\n".join(str(f.get("failure", "")) for f in tc["failures"]
                                    if isinstance(f, dict))
                cases.append(Case(name, "failed", short_reason(message)))
            elif result == "SKIPPED" or status == "SKIPPED":
                cases.append(Case(name, "skipped"))
            elif result == "SUPPRESSED" or status == "NOTRUN":
                cases.append(Case(name, "skipped", "disabled"))
            else:
                cases.append(Case(name, "passed"))
    return with_outside_failures(cases, data.get("failures"), data.get("errors"), path)


def read_gtest_xml(path, problems):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        problems.append(f"{path}: unreadable GoogleTest XML ({e})")
        return None
    cases = []
    for tc in root.iter("testcase"):
        name = f"{tc.get('classname', '?')}.{tc.get('name', '?')}"
        skipped = tc.find("skipped")
        failure = tc.find("failure")
        if failure is None:
            failure = tc.find("error")
        if failure is not None:
            message = failure.get("message") or failure.text or ""
            cases.append(Case(name, "failed", short_reason(message)))
        elif skipped is not None or tc.get("result") == "skipped":
            reason = (skipped.get("message", "") if skipped is not None else "").split("\n")[-1]
            cases.append(Case(name, "skipped", reason))
        elif tc.get("status") == "notrun" or tc.get("result") == "suppressed":
            cases.append(Case(name, "skipped", "disabled"))
        else:
            cases.append(Case(name, "passed"))
    return with_outside_failures(cases, root.get("failures"), root.get("errors"), path)


def read_meson_log(path, problems):
    tests = []
    try:
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    tests.append(json.loads(line))
                except ValueError as e:
                    problems.append(f"{path}:{lineno}: bad line ({e})")
    except OSError as e:
        problems.append(f"{path}: cannot read ({e})")
    return tests


SKIP_START = re.compile(r"^\[ RUN      \] (\S+)")
SKIP_END = re.compile(r"^\[  SKIPPED \] (\S+)")
SKIP_MARK = re.compile(r": Skipped$")


def skip_reasons(stdout):
    """Skip messages from GoogleTest's console output, keyed by Suite.Name.

    The 1.12 JSON format does not carry the GTEST_SKIP() message; meson keeps
    the console output in testlog.json.
    """
    reasons = {}
    current, lines, in_skip = None, [], False
    for line in (stdout or "").splitlines():
        m = SKIP_START.match(line)
        if m:
            current, lines, in_skip = m.group(1), [], False
            continue
        m = SKIP_END.match(line)
        if m:
            if current == m.group(1):
                text = " ".join(s.strip() for s in lines if s.strip())
                if text:
                    reasons[current] = text
            current, lines, in_skip = None, [], False
            continue
        if current is None:
            continue
        if SKIP_MARK.search(line):
            in_skip = True
            lines = []
        elif in_skip:
            lines.append(line)
    return reasons


def meson_tail(test):
    """The last lines a failed meson test printed (its own words on why it failed)."""
    text = "\n".join(str(test.get(k) or "") for k in ("stdout", "stderr"))
    kept = [line for line in text.splitlines() if line.strip()][-8:]
    return short_reason("\n".join(kept))


def collect(results_dir, testlog, problems):
    """Every counted test of one run, and the skip reasons its console output gave."""
    # GoogleTest files, grouped by binary basename.
    gtest = {}  # file stem -> list of Case
    if os.path.isdir(results_dir):
        for fn in sorted(os.listdir(results_dir)):
            if fn.endswith(".json"):
                cases = read_gtest_file(os.path.join(results_dir, fn), problems)
                if cases is not None:
                    gtest[fn[: -len(".json")]] = cases
    else:
        problems.append(f"{results_dir}: no GoogleTest results folder")
    groups = defaultdict(list)  # binary basename -> file stems
    for fn in gtest:
        stem, base = json_key(fn + ".json")
        key = base if base is not None and base in gtest else stem
        groups[key].append(stem)

    meson_tests = read_meson_log(testlog, problems)

    cases = []  # every counted test
    reasons = {}
    group_meson = defaultdict(list)  # binary basename -> meson tests using it
    for t in meson_tests:
        name = str(t.get("name", "?"))
        result = str(t.get("result", "ERROR")).upper()
        reasons.update(skip_reasons(t.get("stdout")))
        # testlog names read "project:suite / name"; meson's XML file is "<name>.xml".
        xml_path = os.path.join(results_dir, name.split(" / ")[-1] + ".xml")
        if os.path.isfile(xml_path):
            xml_cases = read_gtest_xml(xml_path, problems) or []
            cases.extend(xml_cases)
            # A failed meson test accounts for at least one failure (a crash after the XML).
            if result not in MESON_PASS | MESON_SKIP and not any(c.outcome == "failed" for c in xml_cases):
                cases.append(Case(f"[meson] {name} ({result})", "failed", meson_tail(t)))
            continue
        key = None
        for arg in t.get("command") or []:
            base = os.path.basename(str(arg))
            if base in groups:
                key = base
                break
        if key is not None:
            group_meson[key].append((name, result, t))
        elif result in MESON_PASS:
            cases.append(Case(f"[meson] {name}", "passed"))
        elif result in MESON_SKIP:
            cases.append(Case(f"[meson] {name}", "skipped"))
        else:
            cases.append(Case(f"[meson] {name} ({result})", "failed", meson_tail(t)))

    for key in sorted(groups):
        group_cases = [c for stem in sorted(groups[key]) for c in gtest[stem]]
        cases.extend(group_cases)
        failed_here = sum(c.outcome == "failed" for c in group_cases)
        bad = [(n, r, t) for n, r, t in group_meson.get(key, []) if r not in MESON_PASS | MESON_SKIP]
        # Each failed meson test accounts for at least one failure (it may have
        # crashed after GoogleTest wrote its JSON).
        for name, result, test in bad[failed_here:]:
            cases.append(Case(f"[meson] {name} ({result})", "failed", meson_tail(test)))
    return cases, reasons


def parse_runs(argv):
    """[(label, results_dir, testlog)] from the command line, or None if it is malformed."""
    if len(argv) < 3:
        return None
    runs = [("", argv[1], argv[2])]
    extra = argv[3:]
    while extra:
        if extra[0] != "--run" or len(extra) < 4:
            return None
        runs.append((extra[1], extra[2], extra[3]))
        extra = extra[4:]
    return runs


def main(argv):
    runs = parse_runs(argv)
    if runs is None:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    problems = []
    cases, reasons, per_run = [], {}, []
    for label, results_dir, testlog in runs:
        run_cases, run_reasons = collect(results_dir, testlog, problems)
        if label:
            skipped_file = os.path.join(results_dir, "SKIPPED")
            if not run_cases and os.path.isfile(skipped_file):  # scripts/run-gst-versions
                with open(skipped_file, encoding="utf-8") as f:
                    run_cases = [Case("the whole run", "skipped", f.read().strip())]
            elif not run_cases:  # e.g. the project did not build against that GStreamer
                run_cases = [Case("no test ran (see the log above)", "failed")]
            for c in run_cases:
                c.name = f"[{label}] {c.name}"
            run_reasons = {f"[{label}] {k}": v for k, v in run_reasons.items()}
        per_run.append((label or "first run", run_cases))
        cases.extend(run_cases)
        reasons.update(run_reasons)

    passed = [c for c in cases if c.outcome == "passed"]
    failed = [c for c in cases if c.outcome == "failed"]
    skipped = [c for c in cases if c.outcome == "skipped"]

    for p in problems:
        print(f"warning: {p}")
    if skipped:
        print(f"Skipped tests ({len(skipped)}):")
        for c in skipped:
            reason = c.reason or reasons.get(c.name, "")
            print(f"  {c.name}" + (f": {reason}" if reason else ""))
    if failed:
        print(f"Failed tests ({len(failed)}):")
        for c in failed:
            print(f"  {c.name}")
            for line in c.reason.splitlines():
                print(f"      {line}")
    for label, run_cases in per_run if len(per_run) > 1 else []:
        counts = {o: sum(c.outcome == o for c in run_cases) for o in ("passed", "failed", "skipped")}
        print(f"{label}: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    if not passed and not failed:
        print("No test ran.")
    print(f"Summary: {len(passed)} passed, {len(failed)} failed, {len(skipped)} skipped")
    sys.stdout.flush()
    return 1 if failed or (not passed and not failed) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
