#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""What tests/gpu/run-on-gpu's `writer` step concludes from its files.

  writer_report.py same FRAMES WRITER_RECORD CONSUMER_RECORD...
      every record has FRAMES frames ("offset checksum" lines), each consumer's checksums equal
      the writer's, and the frames differ from each other (the writer's pattern repeats every
      256 frames: at least 98% of min(FRAMES, 256) distinct checksums);
      prints one line, exits 1 on any difference
  writer_report.py latency NAME STAMPS ARRIVALS [SKIP]
      send-to-arrival latency per frame (arrival - stamp, matched by offset, the first SKIP
      frames (30) left out): prints `LATENCY name=NAME p50_us=... p99_us=... max_us=... frames=N`
"""
import sys


def load(path):
    out = {}
    with open(path) as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 2:
                out[int(fields[0])] = int(fields[1])
    return out


def same(frames, writer_path, consumer_paths):
    writer = load(writer_path)
    ok = len(writer) == frames and len(set(writer.values())) >= min(frames, 256) * 0.98
    parts = [f"writer {len(writer)} frames, {len(set(writer.values()))} distinct"]
    for path in consumer_paths:
        got = load(path)
        bad = [k for k in got if writer.get(k) != got[k]]
        ok = ok and len(got) == frames and not bad
        parts.append(f"{path.rsplit('/', 1)[-1]}: {len(got)} frames, {len(bad)} differ")
    print("; ".join(parts) + (": PASS" if ok else ": FAIL"))
    return 0 if ok else 1


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def latency(name, stamps_path, arrivals_path, skip=30):
    stamps, arrivals = load(stamps_path), load(arrivals_path)
    lat = [(arrivals[k] - stamps[k]) / 1000 for k in sorted(stamps) if k in arrivals and k >= skip]
    if not lat:
        print(f"LATENCY name={name} frames=0")
        return 1
    print(f"LATENCY name={name} p50_us={percentile(lat, 50):.1f} p99_us={percentile(lat, 99):.1f} "
          f"max_us={max(lat):.1f} frames={len(lat)}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 5 and sys.argv[1] == "same":
        sys.exit(same(int(sys.argv[2]), sys.argv[3], sys.argv[4:]))
    if len(sys.argv) >= 5 and sys.argv[1] == "latency":
        sys.exit(latency(sys.argv[2], sys.argv[3], sys.argv[4],
                         int(sys.argv[5]) if len(sys.argv) > 5 else 30))
    sys.exit(__doc__)
