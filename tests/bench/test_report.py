#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Checks tests/bench/report and the published performance page (meson test bench-report).

1. docs/performance.md is exactly what the report makes of docs/bench-results.json: the page was
   regenerated after the last run, and nobody edited a number by hand.
2. The recorded run supports what the page says: the zero-copy transport made no copy in either
   process, the copy baseline made one device-to-device copy per frame in each, the host paths
   one download and one upload; every configuration delivered its frames.
3. The plots are drawn (gnuplot installed) or, without gnuplot, their data and script are left.
4. A partial run (one mode skipped, no chain, no debayer) still gives a page that says so.
5. Camera-chain runs behind the replay camera get their rows and the CPU saving, computed from
   both processes' CPU, in the table and the headline.
6. System calls per frame: run-all's strace parsing and its difference of two run lengths, and
   the report's table of them (or the reason there is none).
7. rg10tobgra's input paths (in place or uploaded, and what input-mode=auto picks): a table and a
   headline where the run measured them, nothing where it did not.
8. A run made in two parts (run-all --merge) keeps each part's measurements and names both.
9. The fan-out table's p99 after the pool's first round is the slowest consumer's, and "-" for
   runs that have none.
10. README.md's performance summary is the report's, and README's other figures are the page's.
11. GStreamer's cudaipc rows beside ours, the wake-ups against the floor, and the pageable upload
    against one copy of the frame (issue 46).
12. The other docs quote no latency or frame rate the page does not hold.
13. The CI machine's host fan-out table against the floor per added receiver.
"""
import copy
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPORT = os.path.join(ROOT, "tests", "bench", "report")
RESULTS = os.path.join(ROOT, "docs", "bench-results.json")
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def per_frame(line, kind):
    m = re.search(r"per-frame\(\d+\):.*?\b" + kind + r"=([0-9.]+)", line)
    return float(m.group(1)) if m else None


def page_of(res, what):
    """The page the report makes of `res` ("" if it fails, which is a failure of its own)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "results.json")
        with open(path, "w") as f:
            json.dump(res, f)
        p = subprocess.run([REPORT, path, "--docs", os.path.join(tmp, "docs")], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        check(p.returncode == 0, f"report runs on {what}: " + p.stdout.strip()[-200:])
        return open(os.path.join(tmp, "docs", "performance.md")).read() if p.returncode == 0 else ""


STRACE_SHORT = """% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 47.73    0.043811       10952         4           ppoll
 11.08    0.010167           6       200           poll
  4.05    0.003720           3       160        10 recvmsg
  3.09    0.002838           4       152         2 sendmsg
  2.04    0.001869          21        86        19 openat
------ ----------- ----------- --------- --------- ----------------
100.00    0.091790          15       602        31 total
"""
STRACE_LONG = STRACE_SHORT.replace("       200           poll", "       650           poll").replace(
    "       160        10 recvmsg", "       610        10 recvmsg").replace(
    "       152         2 sendmsg", "       602         2 sendmsg")


def load_run_all():
    loader = importlib.machinery.SourceFileLoader("run_all", os.path.join(ROOT, "tests", "bench", "run-all"))
    spec = importlib.util.spec_from_loader("run_all", loader)
    run_all = importlib.util.module_from_spec(spec)
    loader.exec_module(run_all)
    return run_all


def check_merge(res):
    """A run in two parts: the second keeps what only the first measured, replaces what it measured
    itself, and the page names both commands."""
    run_all = load_run_all()
    res = {k: v for k, v in res.items() if k != "parts"}  # as a run of one part
    res["machine"] = dict(res["machine"], command="run-all --only transport,scaling --out A", date="2026-12-01")
    second = {"machine": dict(res["machine"], command="run-all --only sync,chain,debayer --merge A/results.json",
                              date="2026-12-02"),
              "quick": False, "transport": [], "sync_modes": [dict(r, part=2) for r in res["sync_modes"]], "chain": {},
              "debayer": []}
    check(run_all.merge_earlier(second, res, "sync,chain,debayer") is None, "parts of one machine merge")
    check(second["transport"] == res["transport"] and second["scaling_pool"] == res["scaling_pool"],
          "the earlier part's transport and scaling are kept")
    check(all(r.get("part") == 2 for r in second["sync_modes"]) and second["chain"] == {} and
          second["debayer"] == [],
          "what the later part measures is its own, not the earlier part's")
    check([p["command"] for p in second["parts"]] ==
          [res["machine"].get("command", "?"), "run-all --only sync,chain,debayer --merge A/results.json"],
          f"both parts are listed: {second['parts']}")
    second["parts"][0]["seconds"], second["parts"][1]["seconds"] = 300, 280
    second["seconds"] = 580
    text = page_of(second, "a run merged from two parts")
    check("The run was made in 2 parts back to back" in text and "`run-all --only sync,chain,debayer --merge "
          "A/results.json` (2026-12-02, 280 s)" in text, "the page names both parts and their times")
    check("transport, scaling: 2026-12-01; sync, chain, debayer: 2026-12-02." in text,
          "the page says which steps each day measured when the parts' days differ")
    plain_first = copy.deepcopy(second)
    plain_first["parts"][0]["command"] = "run-all --out A"  # no --only: run-all's default steps
    check("transport, breakdown, scaling, inputs, fanout: 2026-12-01; sync, chain, debayer: 2026-12-02."
          in page_of(plain_first, "a run whose first part measured the default steps"),
          "a part without --only counts as run-all's default steps")
    other = {"machine": dict(res["machine"], gpu="another GPU"), "quick": False}
    check("another GPU" in (run_all.merge_earlier(other, res, "sync") or ""),
          "parts from two machines are refused")
    quick = {"machine": dict(res["machine"]), "quick": True}
    check("--quick" in (run_all.merge_earlier(quick, res, "sync") or ""), "a --quick part is not merged with a full one")


def check_one_build_and_mps_pairs(res):
    """Parts of one page are one build; the MPS step's rows without MPS are this run's transport
    and sync rows where those steps measured the case."""
    run_all = load_run_all()
    other = {"machine": dict(res["machine"], commit="0000000"), "quick": bool(res.get("quick"))}
    check("another build" in (run_all.merge_earlier(other, copy.deepcopy(res), "mps") or ""),
          "a part of another commit is not merged")
    frames = run_all.frames_for("zero-copy", "1080p", 60, False)
    row = run_all.same_case_measured(res, "zero-copy", "1080p", 60, 1, "gpu-events", frames)
    check(row is not None and row["measured_by"] == "transport" and row["frames"] == frames,
          "the transport step's row is the MPS step's pair without MPS")
    check(run_all.same_case_measured(res, "zero-copy", "1080p", 60, 1, "gpu-events", frames + 1) is None,
          "a row of other frames is not a pair")
    under_mps = copy.deepcopy(res)
    for r in under_mps["transport"] + under_mps["sync_modes"]:
        r["cuda_mps"] = {"producer": True, "consumers": [True]}
    check(run_all.same_case_measured(under_mps, "zero-copy", "1080p", 60, 1, "gpu-events", frames) is None,
          "a row measured under MPS is not the pair without it")
    if res.get("sync_modes"):
        cpu = run_all.same_case_measured(res, "copy", "1080p", 0, 1, "cpu", run_all.frames_for("copy", "1080p", 0, False))
        check(cpu is not None and cpu["measured_by"] == "sync", "a sync-mode cpu case pairs with the sync step's row")


def check_fanout_bounds():
    """The fan-out's bounds: n consumers on fewer CPUs, and a producer whose CPU per added consumer
    is below zero (n consumers cost it less than one: noise, no ratio)."""
    report = load_report()

    def row(n, producer_cpu, consumer_cpu, p50, p99, runq):
        return {"mode": "zero-copy", "consumers": n, "frames": 300, "received": [300] * n,
                "cpu_us_per_frame": {"producer": producer_cpu, "consumer": consumer_cpu},
                "threads": {"consumer": [{"name": "src:src", "cpu_us": 100.0, "wakeups": 1.0, "runq_us": runq}]},
                "per_consumer_latency_us": [{"cpu": {"p50": p50, "p99": p99, "max": p99, "n": 270}}] * n}
    rows = [row(1, 150.0, 200.0, 100.0, 300.0, 0.0), row(4, 140.0, 200.0, 110.0, 320.0, 1.0),
            row(16, 320.0, 200.0, 200.0, 400.0, 10.0), row(64, 800.0, 200.0, 780.0, 1200.0, 120.0)]
    text = " ".join(report.fanout_cpu_bound_lines(rows, 16))
    check("64 consumers and the producer on 16 CPUs need 64 x 200.0 µs of consumer CPU and 800.0 µs of producer "
          "CPU per frame, 850.0 µs per CPU" in text
          and "p50 780.0 µs (0.92x that bound), p99 1,200 µs (1.41x)" in text
          and "waited 120.0 µs per frame for a CPU (`runq_us`; 0.0 µs with one consumer)" in text,
          f"64 consumers on 16 CPUs are set against their CPU bound: {text}")
    check("16 consumers and the producer on 16 CPUs need 16 x 200.0 µs of consumer CPU and 320.0 µs of producer "
          "CPU per frame, 220.0 µs per CPU" in text,
          f"16 consumers and their producer are 17 processes on 16 CPUs: bounded the same way: {text}")
    check(text.count("on 16 CPUs") == 2 and report.fanout_cpu_bound_lines(rows, 128) == [],
          "no CPU bound where the CPUs outnumber the processes")
    floors = [{"receivers": 1, "sender_cpu_us": 40.0}, {"receivers": 4, "sender_cpu_us": 46.0},
              {"receivers": 64, "sender_cpu_us": 250.0}]
    text = " ".join(report.fanout_floor_lines(rows, floors))
    check("4 consumers none measurable against 2.0 µs (-)" in text,
          f"a negative CPU per added consumer is noise, with no ratio: {text}")


def check_floor_stages(res):
    """The paced p50 beyond the floor, split by the stages of the same rows."""
    run = copy.deepcopy(res)
    run["floor"] = dict(run.get("floor") or {}, p50_us=70.0, receiver_cpu_us=30.0, sender_cpu_us=35.0,
                        messages=600)
    for r in run.get("breakdown_unstamped") or []:
        r["stages_us"] = {"to_send": {"p50": 20.0}, "send_to_out": {"p50": 100.0}}
    if not run.get("breakdown_unstamped"):
        return
    text = page_of(run, "the wake-up table with stages")
    check("stamp to send 20.0 µs (the producer, up to its sendmsg), send to out 100.0 µs (the consumer: the "
          "wake-up, whose floor is 70.0 µs, then 30.0 µs until the buffer leaves cudasrc-ipc)" in text,
          "the zero-copy p50 beyond the floor is split into the producer's and the consumer's stage")
    for r in run["breakdown_unstamped"]:
        r["stages_us"]["send_to_out"]["p50"] = 60.0
    text = page_of(run, "the wake-up table with a consumer stage below the floor")
    check("send to out 60.0 µs (the consumer: the wake-up, whose floor is 70.0 µs, the buffer out of cudasrc-ipc "
          "within that floor)" in text and "then -" not in text,
          "a consumer stage within the floor reads as such, not as a negative remainder")


def check_copy_wakeups(res):
    """io-mode=copy's second wake-up per frame is named with its count, and only where it is there."""
    run = copy.deepcopy(res)
    rows = [r for r in run.get("breakdown_unstamped") or [] if r["mode"] == "copy"]
    if not rows:
        return
    def streaming_thread_wakes(n):
        for r in rows:
            next(t for t in r["threads"]["consumer"] if t["name"] == "src:src")["wakeups"] = n

    streaming_thread_wakes(2.0)
    text = page_of(run, "io-mode=copy waking twice per frame")
    check("With `io-mode=copy` the consumer's streaming thread wakes more than once per frame (" in text
          and "2.00" in text.split("With `io-mode=copy`", 1)[-1][:120],
          "the page names io-mode=copy's second wake-up with the measured count")
    streaming_thread_wakes(1.0)
    once = page_of(run, "io-mode=copy waking once")
    check("more than once per frame" not in once
          and "With `io-mode=copy` the consumer's streaming thread wakes once per frame (" in once
          and "1.00" in once.split("With `io-mode=copy`", 1)[-1][:120],
          "where the copy path wakes once per frame the page says so with the count, and no second wake-up")


def check_mps_contrast():
    """An unpaced case that MPS speeds up at least twofold is named, with both rates and where its
    frames waited; a case MPS barely changes is not."""
    report = load_report()

    def row(consumers, mps, fps, p50, gpu_p50):
        return {"size": "4K", "mode": "zero-copy", "sync_mode": "gpu-events", "paced_fps": 0,
                "consumers": consumers, "mps": mps, "fps": fps, "fps_steady": fps, "received": [3000] * consumers,
                "latency_us": {"p50": p50}, "gpu_latency_us": {"p50": gpu_p50}, "gpu": {"gpu_util_mean_pct": 60.0}}
    rows = [row(3, False, 2000.0, 25.0, 3500.0), row(3, True, 48000.0, 30.0, 50.0),
            row(1, False, 60000.0, 80.0, 100.0), row(1, True, 62000.0, 80.0, 100.0)]
    text = " ".join(report.mps_contrast_lines(rows))
    check("4K, 3 consumers, zero-copy (ours), gpu-events: 2,000 frames/s as ordinary processes, 48,000 as MPS "
          "clients (24.0x); without MPS its frames reach the consumers' CPUs at p50 25.0 µs but their GPUs at "
          "3,500 µs, GPU busy 60%" in text and "1 consumer," not in text,
          f"the case MPS multiplies is set out, the one it does not change is left out: {text}")
    check(report.mps_contrast_lines(rows[2:]) == [], "no sentence where MPS changes no rate twofold")


def check_syscalls(res):
    run_all = load_run_all()
    short, long = run_all.strace_calls(STRACE_SHORT), run_all.strace_calls(STRACE_LONG)
    check(short == {"ppoll": 4, "poll": 200, "recvmsg": 160, "sendmsg": 152, "openat": 86},
          f"strace -c summary parsed by name, total line left out: {short}")
    each = run_all.per_frame_calls(short, long, 450)
    check(each == {"total": 3.0, "calls": {"poll": 1.0, "recvmsg": 1.0, "sendmsg": 1.0}},
          f"start-up calls cancel out between the two run lengths: {each}")

    counted = copy.deepcopy(res)
    counted["breakdown_syscalls"] = [
        {"mode": "zero-copy", "size": "1080p", "frames": [150, 600], "received": [150, 600],
         "producer": {"total": 2.2, "calls": {"sendmsg": 1.0, "recvmsg": 1.0, "ioctl": 0.2}},
         "consumer": each},
        {"mode": "copy", "size": "1080p", "frames": [150, 600], "received": [3, 4],
         "error": "frames received [3, 4] of [150, 600]; ERROR no device"}]
    text = page_of(counted, "system calls per frame")
    check("| 1080p | zero-copy (ours) | 2.20 (sendmsg 1.00, recvmsg 1.00, ioctl 0.20) | "
          "3.00 (poll 1.00, recvmsg 1.00, sendmsg 1.00) |" in text, "the syscall table has both processes")
    check("| 1080p | copy per boundary | frames received [3, 4] of [150, 600]; ERROR no device | |" in text,
          "a failed syscall count says why")
    skipped = copy.deepcopy(res)
    skipped["breakdown_syscalls"] = []
    skipped["breakdown_syscalls_skipped"] = "strace was not found (install it, or set STRACE)"
    check("System calls per frame: not counted in this run (strace was not found" in
          page_of(skipped, "a run without strace"), "a run without strace says so")


def check_mps(res):
    """9. The MPS part: each case without and with MPS, paced rows against the floor of the same
    run, what the stats said; and a run whose daemon did not start says so."""
    base = next(r for r in res["transport"] if r["mode"] == "zero-copy" and r["size"] == "1080p"
                and r["paced_fps"] == 60 and r["consumers"] == 1)
    run = copy.deepcopy(res)
    run["floor"] = {"messages": 600, "p50_us": 100.0, "p99_us": 200.0, "max_us": 400.0,
                    "receiver_cpu_us": 50.0, "sender_cpu_us": 20.0}
    rows = []
    for mps, p50, cpu in [(False, 150.0, 200.0), (True, 120.0, 90.0)]:
        r = copy.deepcopy(base)
        r.update({"mps": mps, "sync_mode": "gpu-events", "cuda_mps": {"producer": mps, "consumers": [mps]}})
        r["latency_us"] = dict(r["latency_us"], p50=p50, p99=2 * p50)
        r["cpu_us_per_frame"] = dict(r["cpu_us_per_frame"], consumer=cpu)
        rows.append(r)
    run["mps"] = rows
    text = page_of(run, "an MPS part")
    lines = [l for l in text.splitlines() if l.startswith("| 1080p | 60 fps | 1 | ") and "gpu-events" in l
             and ("| MPS |" in l or "| no |" in l)]
    check(len(lines) == 2 and "| no |" in lines[0] and "| MPS |" in lines[1],
          "the MPS table has the case without, then with MPS")
    check(len(lines) == 2 and "| 1.5x | 1.5x |" in lines[0] and "| 4.0x | no |" in lines[0]
          and "| 1.2x | 1.2x |" in lines[1] and "| 1.8x | yes |" in lines[1],
          "paced rows give latency and consumer CPU against the floor, and what the stats said")
    check("receiver CPU 50.0 µs per message (600 messages)" in text, "the floor is stated")
    fan = copy.deepcopy(run)
    fan["mps_fanout"] = [dict(copy.deepcopy(r), mps=True) for r in res["fanout"][:2]]
    text = page_of(fan, "an MPS part with fan-out")
    mps_part = text.split("## CUDA MPS", 1)[-1].split("\n## ", 1)[0]
    check("40 consumers here, not 64" in mps_part and "| consumers | slots |" in mps_part,
          "the fan-out as MPS clients has its table in the MPS section")
    skipped = copy.deepcopy(run)
    skipped["mps"] = rows[:1]
    skipped["mps_skipped"] = "no MPS daemon: nvidia-cuda-mps-control not found"
    check("With MPS: not measured (no MPS daemon: nvidia-cuda-mps-control not found)" in
          page_of(skipped, "an MPS part without a daemon"), "a run without a daemon says why")
    plain = {k: v for k, v in res.items() if k not in ("mps", "floor", "mps_skipped")}
    check("CUDA MPS, and the floor" not in page_of(plain, "a run without an MPS part"),
          "no MPS section without an MPS part")


def check_fanout_warm(res):
    run = copy.deepcopy(res)
    rows = copy.deepcopy(run["fanout"][:2])
    for k, c in enumerate(rows[1]["per_consumer_latency_us"]):
        c["cpu_pool_warm"] = {"p50": 100.0, "p99": 400.0 + 10 * k, "max": 900.0, "n": 100}
    for c in rows[0]["per_consumer_latency_us"]:
        c.pop("cpu_pool_warm", None)
    run["fanout"] = rows
    text = page_of(run, "fan-out rows with and without the first-round figure")
    fan = text.split("## Fan-out", 1)[-1].split("\n## ", 1)[0]
    lines = [l for l in fan.splitlines() if re.match(r"\| [^|]+ \| \d+ \| \d+ \|", l)]
    # | path | consumers | slots | frames/s | p50 | p99 | p99 after the pool's first round | ...
    warm = [l.split("|")[7].strip() for l in lines]
    slowest = 400.0 + 10 * (len(rows[1]["per_consumer_latency_us"]) - 1)
    check(warm == ["-", f"{slowest:.1f} µs"],
          f"the fan-out table gives the slowest consumer's p99 after the pool's first round: {warm}")


def check_peer_and_floors(res):
    """11. Issue 46's additions: GStreamer's cudaipc rows beside ours (ratios, fan-out per path, the
    headline), the wake-up table against the floor with the harness's share left out, and the
    pageable upload against one copy of the same frame; the plots of fan-out and of p50 per path."""
    run = copy.deepcopy(res)
    run["transport"] = [r for r in run["transport"] if not r["mode"].startswith("gst-cudaipc")]
    peer_rows = []
    for r in run["transport"]:
        if r["mode"] == "zero-copy":
            p = copy.deepcopy(r)
            p["mode"] = "gst-cudaipc"
            p["latency_us"]["p50"] = r["latency_us"]["p50"] * 8
            p["fps"] = r["fps"] / 4 if not r["paced_fps"] else r["fps"]
            peer_rows.append(p)
    run["transport"] += peer_rows
    run["peer_gstreamer"] = "GStreamer 1.28.6"
    fan = [copy.deepcopy(r) for r in run["fanout"]
           if r["consumers"] in (1, 16) and r.get("mode", "zero-copy") == "zero-copy"]
    for r in fan:
        r["mode"] = "zero-copy"
    theirs = copy.deepcopy(fan)
    for r in theirs:
        r["mode"] = "gst-cudaipc"
        r["cpu_us_per_frame"]["producer"] = 200.0 + 100.0 * (r["consumers"] - 1)
        for c in r["per_consumer_latency_us"]:
            c["cpu"]["p99"] *= 10
    run["fanout"] = fan + theirs
    zero = next(r for r in run["transport"] if r["mode"] == "zero-copy" and r["paced_fps"] == 60
                and r["consumers"] == 1 and r["size"] == "1080p")
    unstamped = copy.deepcopy(zero)
    unstamped["latency_us"]["p50"] = 150.0
    unstamped["cpu_us_per_frame"] = {"producer": 200.0, "consumer": 180.0}
    unstamped["handle_cpu_us_per_frame"] = 40.0
    unstamped["push_cpu_us_per_frame"] = 10.0
    unstamped["threads"] = {"producer": [{"name": "cudaipc-cuda-pe", "cpu_us": 170.0, "wakeups": 1.0},
                                         {"name": "cipc-producer", "cpu_us": 30.0, "wakeups": 0.2}],
                            "consumer": [{"name": "src:src", "cpu_us": 175.0, "wakeups": 1.0},
                                         {"name": "cuda-EvtHandlr", "cpu_us": 5.0, "wakeups": 0.17}]}
    run["breakdown_unstamped"] = [unstamped]
    run["breakdown_events"] = [{"operation": op, "threads": [{"name": "bench-events", "cpu_us": cpu, "wakeups": 1.0}]}
                               for op, cpu in [("child wait", 50.0), ("idle bystander, 0 busy process(es)", 30.0),
                                               ("memset + record interprocess", 60.0), ("memset only", 50.0)]]
    run["floor"] = {"messages": 600, "p50_us": 100.0, "p99_us": 300.0, "max_us": 500.0,
                    "receiver_cpu_us": 40.0, "sender_cpu_us": 50.0}
    run["upload_floor"] = [{"size": "1080p", "pageable-1d": {"bytes": 8294400, "p50_us": 700.0, "p99_us": 800.0},
                            "pageable-2d": {"bytes": 8294400, "p50_us": 1400.0, "p99_us": 1500.0},
                            "pinned": {"bytes": 8294400, "p50_us": 400.0, "p99_us": 420.0},
                            "pageable-per-frame": {"bytes": 8294400, "p50_us": 800.0, "p99_us": 900.0}}]
    base = find_row(run["inputs"], "zero-copy", "1080p")
    page = find_row(run["inputs"], "system memory (pageable)", "1080p")
    if base and page:
        page["latency_us"]["p50"] = base["latency_us"]["p50"] + 840.0
        page["pageable_upload_us"] = 780.0
    run["fanout_floor"] = [{"receivers": 1, "sender_cpu_us": 50.0}, {"receivers": 16, "sender_cpu_us": 140.0}]
    ours_one, ours_16 = (next(r for r in fan if r["consumers"] == n) for n in (1, 16))
    ours_added = (ours_16["cpu_us_per_frame"]["producer"] - ours_one["cpu_us_per_frame"]["producer"]) / 15
    text = page_of(run, "a run with the peer's rows, the wake-up runs and the upload floor")
    check(f"16 consumers {ours_added:,.1f} µs against 6.0 µs ({ours_added / 6.0:.2f}x)" in text,
          "the producer's CPU per added consumer is set against the floor's sender CPU per added receiver")
    check("| GStreamer cudaipcsink/src, io-mode=import | 8.0x |" in text,
          "the ratios table sets our zero-copy path against GStreamer's cudaipc, 8x lower latency")
    check("- Against GStreamer cudaipcsink/src, io-mode=import (GStreamer 1.28.6), same harness, same run: "
          "1080p paced p50 8.0x lower" in text, "the headline gives the ratio to the peer")
    check("| GStreamer cudaipcsink/src, io-mode=import | 16 |" in text, "the fan-out table has the peer's rows")
    check(re.search(r"\| GStreamer cudaipcsink/src, io-mode=import \| 16 \|([^|]*\|){7} 100\.0 µs \|", text) is not None,
          "the peer's producer CPU per added consumer is against its own one-consumer run (100 µs)")
    check("| 150.0 µs (1.50x) | 180.0 µs, 140.0 µs (3.50x) | 200.0 µs, 40.0 µs (0.80x) |" in text,
          "the wake-up table: p50, the consumer's own CPU (less HANDLE) and the producer's own CPU (less its "
          "source, plus the push) against the floor")
    check("record the release's interprocess event (10.0 µs: \"memset + record interprocess\" less \"memset "
          "only\"): 70.0 µs, 1.75x the floor's receiver" in text and "1080p 140.0 µs, 2.00x that sum, of which "
          "70.0 µs is cudasrc-ipc's" in text, "the consumer's own CPU is set against the sum of what it cannot avoid: "
          "the floor's wake-up, the stream's wait and the release's record, all from the run")
    check("the upload adds 840.0 µs to the zero-copy path's p50, 1.20x the floor" in text,
          "the pageable row is set against one pageable copy of the same frame")
    check("The same 1D copy from a buffer made that way for each frame takes 800.0 µs p50 (1.14x the floor); "
          "what the upload adds is 1.05x that." in text,
          "the pageable row is also set against a copy from a buffer made for each frame")
    check("the sink's copy call itself takes 780.0 µs per frame on average (`pageable-upload-ns` over "
          "`pageable-uploads` in its stats), 1.11x the floor and 0.97x the per-frame buffer's copy; the rest of "
          "what the upload adds, 60.0 µs, lies outside it." in text,
          "the sink's own time in its pageable copies splits what the upload adds")
    page["pageable_upload_us"] = 900.0
    text = page_of(run, "a run whose sink copy call takes all of what the upload adds")
    check("that mean is all of what the upload adds to the p50 (nothing else in the push shows)." in text
          and "lies outside it" not in text, "no negative remainder where the copy call takes it all")
    if shutil.which("gnuplot"):
        check("images/perf-fanout.png" in text and "images/perf-paths.png" in text,
              "the page shows the fan-out plot and the p50-per-path plot")


def load_report():
    loader = importlib.machinery.SourceFileLoader("report", REPORT)
    spec = importlib.util.spec_from_loader("report", loader)
    report = importlib.util.module_from_spec(spec)
    loader.exec_module(report)
    return report


def check_host_fanout():
    """13. The CI machine's host-memory fan-out: the producer's CPU per added consumer against the
    floor's sender CPU per added receiver, both from run-transport's lines."""
    report = load_report()
    rows = [{"config": "machine", "commit": "abc1234", "date": "2026-12-07", "gstreamer": "1.22.0", "cpus": 2}]
    for n, cpu, p99 in [(1, 100.0, 300.0), (16, 340.0, 2000.0)]:
        rows.append({"config": "host-1080p-60fps" + (f"-fanout-{n}" if n > 1 else ""), "width": 1920,
                     "height": 1080, "paced_fps": 60,
                     "consumers": n, "consumer": {"frames": 600, "latency_us": {"p50": 90.0, "p99": p99}},
                     "producer": f"frames=600 cpu_us_per_frame={cpu} sent={600 * n} dropped=0"})
    for n, cpu in [(1, 60.0), (16, 150.0)]:
        rows.append({"config": f"floor-receivers-{n}", "receivers": n,
                     "floor": f"messages=600 p50_us=50.0 receiver_cpu_us=30.0 sender_cpu_us={cpu} receivers={n}"})
    table = report.host_ci_fanout(rows)
    check("| 16 | 340.0 µs | 16.0 µs | 6.0 µs | 2.67x | 90 µs, 2,000 µs | 0 |" in table,
          "the host fan-out row sets 16 µs per added consumer against the floor's 6 µs")
    one_table = report.host_ci_table(rows)
    check(one_table.count("| 1920x1080 BGRA | 60 fps |") == 1 and "2,000 µs" not in one_table,
          "the one-consumer host table has the paced one-consumer run and leaves the fan-out run out")
    check(report.host_ci_fanout(rows[:2]) == "", "no fan-out table without the floor and a one-consumer run")
    rows[1]["consumer"]["cpu_us_per_frame"] = 75.0
    rows[1]["consumer"]["latency_us"]["p50"] = 100.0
    check("p50 2.00x, consumer CPU per frame 2.50x" in report.host_ci_floor_line(rows),
          "the paced host row is set against the floor's latency and receiver CPU")


def find_row(rows, mode, size):
    return next((r for r in rows if r["mode"] == mode and r["size"] == size), None)


FIGURE = re.compile(r"\d[\d,.]*(?:-\d[\d,.]*)?\s?(?:µs|ms|frames/s)")


PERF_FIGURE = re.compile(r"\d[\d,.]*(?:-\d[\d,.]*)?\s?(?:µs|frames/s)")


def check_docs_figures():
    """12. The other docs quote no latency or frame rate the page does not hold: a figure in µs or
    frames/s outside code blocks (sample output) is on docs/performance.md as written. Earlier runs'
    figures live in docs/bench-h200-runs.md, the log, which the docs may point to."""
    with open(os.path.join(ROOT, "docs", "performance.md")) as f:
        page = f.read()
    docs = os.path.join(ROOT, "docs")
    for name in sorted(os.listdir(docs)):
        if not name.endswith(".md") or name in ("performance.md", "bench-h200-runs.md"):
            continue
        with open(os.path.join(docs, name)) as f:
            text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
        stray = [m.group(0) for m in PERF_FIGURE.finditer(text) if m.group(0) not in page]
        check(not stray, f"docs/{name} quotes only latencies and frame rates the page holds {stray}")


def check_readme(res):
    """10. README's performance summary is what the report writes from the results, and every other
    figure README quotes (a number with µs, ms or frames/s) stands on docs/performance.md as it is
    written: README quotes no number the recorded run does not hold."""
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    with tempfile.TemporaryDirectory() as tmp:
        copy_path = os.path.join(tmp, "README.md")
        with open(copy_path, "w") as f:
            f.write(readme)
        p = subprocess.run([REPORT, RESULTS, "--docs", os.path.join(tmp, "docs"), "--readme", copy_path],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        check(p.returncode == 0, "report writes README's performance summary: " + p.stdout.strip()[-300:])
        with open(copy_path) as f:
            made = f.read()
    check(made == readme, "README.md's performance summary is the report's of docs/bench-results.json "
          "(if not: tests/bench/report docs/bench-results.json)")
    begin = readme.find("<!-- performance summary:")
    end = readme.find("<!-- end of performance summary -->")
    check(0 <= begin < end, "README.md has its performance summary lines")
    summary = readme[begin:end] if 0 <= begin < end else ""
    check(any(FIGURE.search(line) for line in summary.splitlines()[1:]),
          "README's performance summary quotes the run's figures")
    outside = readme[:begin] + readme[end:] if 0 <= begin < end else readme
    with open(os.path.join(ROOT, "docs", "performance.md")) as f:
        page = f.read()
    stray = [m.group(0) for m in FIGURE.finditer(outside) if m.group(0) not in page]
    check(not stray, f"every other figure README quotes stands on docs/performance.md as written {stray}")
    # The summary follows the results: a changed row changes it.
    changed = copy.deepcopy(res)
    row = next(r for r in changed["transport"]
               if r["mode"] == "zero-copy" and r["paced_fps"] == 60 and r["consumers"] == 1)
    row["latency_us"]["p50"] = 12.5
    loader = importlib.machinery.SourceFileLoader("report", REPORT)
    spec = importlib.util.spec_from_loader("report", loader)
    report = importlib.util.module_from_spec(spec)
    loader.exec_module(report)
    check("12.5-" in report.readme_summary(changed) and "12.5-" not in report.readme_summary(res),
          "the summary's latency comes from the transport rows")


def main():
    with open(RESULTS) as f:
        res = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        docs = os.path.join(tmp, "docs")
        p = subprocess.run([REPORT, RESULTS, "--docs", docs], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        check(p.returncode == 0, "report runs on docs/bench-results.json: " + p.stdout.strip())
        with open(os.path.join(docs, "performance.md")) as f:
            made = f.read()
        with open(os.path.join(ROOT, "docs", "performance.md")) as f:
            published = f.read()
        check(made == published, "docs/performance.md is the report of docs/bench-results.json "
              "(if not: tests/bench/report docs/bench-results.json)")
        images = os.path.join(docs, "images")
        if shutil.which("gnuplot"):
            # The scaling plots where the run measured scaling; latency against consumers (fan-out)
            # and p50 per path (transport) always.
            names = ["perf-fanout.png", "perf-paths.png"] + (
                ["perf-resolution.png", "perf-pool.png", "perf-consumers.png"] if res.get("scaling_pool") else [])
            for name in names:
                path = os.path.join(images, name)
                ok = os.path.exists(path) and open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
                check(ok, f"plot {name} drawn")
                check(f"images/{name}" in made, f"page shows {name}")
        else:
            print("note: gnuplot is not installed; checking that the plot data and script are left")
            check(os.path.exists(os.path.join(images, "perf-plots.gp")), "gnuplot script left")
            check("Plots not drawn" in made, "page says the plots are not drawn")

    audits = {r["mode"]: r["audit"] for r in res["transport_audit"]}
    for role in ["producer", "consumer"]:
        zc = audits.get("zero-copy", {}).get(role, "")
        check(all(per_frame(zc, k) == 0.0 for k in ["HtoD", "DtoH", "DtoD", "memset"]),
              f"zero-copy {role}: no copy and no memset per frame ({zc})")
        cp = audits.get("copy", {}).get(role, "")
        check(per_frame(cp, "DtoD") is not None and per_frame(cp, "DtoD") >= 0.99,
              f"copy baseline {role}: one device-to-device copy per frame ({cp})")
    for mode, kind, role in [("host", "DtoH", "producer"), ("host", "HtoD", "consumer"),
                             ("detour", "DtoH", "producer"), ("detour", "HtoD", "consumer")]:
        line = audits.get(mode, {}).get(role, "")
        check(per_frame(line, kind) is not None and per_frame(line, kind) >= 0.99,
              f"{mode} {role}: one {kind} per frame ({line})")
    # Ours: every frame to every consumer, no error. GStreamer's cudaipc skips frames by design (it
    # serves the newest frame on request) and the page shows how many arrived; each of its rows
    # must be there.
    short = [(r["mode"], r["size"], r["paced_fps"], r["consumers"], r["received"]) for r in res["transport"]
             if not r["mode"].startswith("gst-cudaipc") and (min(r["received"]) < r["frames"] or r["errors"])]
    check(not short, f"every transport run of ours delivered all its frames to every consumer, without errors {short}")
    for r in res["transport"]:
        if r["mode"].startswith("gst-cudaipc"):
            row = (f"| {r['size']} | {'unpaced' if not r['paced_fps'] else str(r['paced_fps']) + ' fps'} | "
                   f"{r['consumers']} | GStreamer cudaipcsink/src, io-mode=")
            check(row in published and f"{min(r['received'] or [0])} of {r['frames']} |" in published,
                  f"the page has the peer's row with what it received: {row}")
    chain = res["chain"]
    if chain:  # the camera chain, where this run measured it
        for name in ["zero-copy", "copy"]:
            check(chain.get(name, {}).get("shown", 0) >= 0.9 * chain.get(name, {}).get("frames", 1),
                  f"camera chain ({name}) showed at least 90% of its frames")
        cam = [l for l in chain.get("zero-copy", {}).get("audit", []) if "per-frame" in l]
        check(len(cam) == 2 and all(per_frame(cam[0], k) == 0.0 for k in ["HtoD", "DtoH", "DtoD"]),
              f"zero-copy camera process: no copy per frame ({cam[:1]})")
    else:
        check("Not measured in this run: " in published and "chain" in published.split("Not measured in this run: ")[-1],
              "a run without the camera chain says so")

    # A partial run: the page says what is missing instead of failing.
    partial = copy.deepcopy(res)
    partial["transport"] = [r for r in partial["transport"] if r["mode"] != "detour"]
    partial["skipped_modes"] = {"detour": "shmsink not found"}
    partial["chain"], partial["debayer"], partial["scaling_pool"] = {}, [], []
    partial["chain_skipped"] = "Xvfb or gst-launch-1.0 not on PATH"
    text = page_of(partial, "a partial result")
    check("Not measured in this run: host detour (shm) (shmsink not found)" in text,
          "a skipped baseline is named with its reason")
    check("Xvfb or gst-launch-1.0 not on PATH" in text, "a skipped camera chain is named with its reason")
    check("| 4K | 60 fps | 1 | host detour" not in text, "no row for a skipped baseline")

    # Replay-camera chain runs: rows and the saving (here 20+30 against 50+60 of a core: -54.5%).
    replay = copy.deepcopy(res)
    replay["chain"] = {k: v for k, v in replay["chain"].items() if not k.startswith("replay-")}
    base = replay["chain"].get("zero-copy") or {"frames": 600, "shown": 600}
    for name, camera_pct, display_pct, p50 in [("replay-1080p-zero-copy", 20.0, 30.0, 4000.0),
                                               ("replay-1080p-copy", 50.0, 60.0, 6500.0)]:
        entry = copy.deepcopy(base)
        entry.update({"cpu_pct": {"camera": camera_pct, "display": display_pct},
                      "latency_us": {"p50": p50, "p99": 2 * p50, "max": 3 * p50}, "audit": []})
        replay["chain"][name] = entry
    text = page_of(replay, "replay-camera chain runs")
    check("| 1080p, replay camera, zero-copy | " in text and "| 1080p, replay camera, copy-based | " in text,
          "replay-camera runs have their rows")
    check("1080p60 50% against 110% of a core (**-54.5%**)" in text,
          "the table states the CPU saving of both processes")
    check("Camera chain at 1080p60 with the replay camera" in text and "**-54.5%**" in text
          and "**4.0 ms** zero-copy, 6.5 ms copy-based" in text, "the headline states latency and saving")
    check("4K60 with the replay camera" not in text, "no headline for a size that was not run")

    # A chain that showed nothing (e.g. the producer failed): no latency, no headline, no crash.
    failed = copy.deepcopy(replay)
    for entry in failed["chain"].values():
        entry.update({"shown": 0, "latency_us": {"p50": None, "p99": None, "max": None},
                      "cpu_pct": {"camera": 0.0, "display": 0.0}})
    text = page_of(failed, "camera-chain runs that showed no frame")
    check("Camera chain at" not in text, "no chain headline without a measured latency")

    # rg10tobgra's input paths (bench debayer-input): a table after the kernel's, and a headline.
    inputs = copy.deepcopy(res)
    inputs["debayer"] = [r for r in inputs["debayer"] if r.get("bench") != "debayer-input"] + [
        {"bench": "debayer-input", "size": size, "bytes": 1, "in_place_us": ip, "in_place_gb_s": ipg,
         "uploaded_us": up, "uploaded_gb_s": upg, "upload_only_us": only, "auto_in_place_us": aip,
         "auto_upload_us": aup, "auto_choice": choice}
        for size, ip, ipg, up, upg, only, aip, aup, choice in [
            ("1080p", 174.0, 23.8, 80.5, 51.5, 77.6, 180.2, 95.1, "upload"),
            ("4K", 664.0, 25.0, 305.0, 54.4, 301.8, 671.0, 333.3, "upload")]]
    text = page_of(inputs, "debayer input paths")
    check("| 4K | 664.0 | 25.0 | 305.0 | 54.4 | 301.8 µs | 671.0 µs / 333.3 µs | upload |" in text,
          "the input-path table has a row per size with auto's times and choice")
    check("uploaded by a copy engine while the previous frame is debayered **305.0 µs/frame** (**54.4 GB/s**)"
          in text and "picks upload here" in text, "the headline states the 4K input paths")
    check("two ways to a frame" not in page_of(partial, "a run without the input bench"),
          "no input-path table where the run has none")

    check_mps(res)
    check_readme(res)
    check_fanout_warm(res)
    check_syscalls(res)
    check_merge(res)
    check_peer_and_floors(res)
    check_host_fanout()
    check_fanout_bounds()
    check_mps_contrast()
    check_copy_wakeups(res)
    check_floor_stages(res)
    check_one_build_and_mps_pairs(res)
    check_docs_figures()
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
