#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Whether an X screenshot (xwd -root) shows videotestsrc's SMPTE bars: some run of rows where,
left to right, the seven top bars appear in their order - white, yellow, cyan, green, magenta,
red, blue - each at least --min-bar pixels wide. Pixels are told apart by which of red, green and
blue are high (above half scale), so a picture that went through the camera chain's mosaic and
debayer, with other levels, still counts; a black, garbled or wrongly ordered (RGB/BGR swapped)
picture does not.

    check_smpte_screenshot.py SCREEN.xwd [--min-rows 40] [--min-bar 40]

Prints what it found; exit 0 when the bars are there, 1 when not, 2 when the file is unreadable.
Standard library only (the GPU machine's python has no imaging module).
"""

import argparse
import struct
import sys

BARS = ["W", "Y", "C", "G", "M", "R", "B"]  # the top bars of the SMPTE pattern, in order
CLASS = {(1, 1, 1): "W", (1, 1, 0): "Y", (0, 1, 1): "C", (0, 1, 0): "G", (1, 0, 1): "M",
         (1, 0, 0): "R", (0, 0, 1): "B", (0, 0, 0): "K"}


def read_xwd(path):
    """(width, height, rows): rows[y] is a list of (r, g, b) for a 24/32-bit TrueColor dump."""
    with open(path, "rb") as f:
        data = f.read()
    header = struct.unpack(">25I", data[:100])
    (header_size, _version, _fmt, _depth, width, height, _xoff, byte_order, _unit, _bit_order,
     _pad, bits_per_pixel, bytes_per_line, _visual, red_mask, green_mask, blue_mask, _bits_rgb,
     _cmap_entries, ncolors) = header[:20]
    if bits_per_pixel != 32:
        raise ValueError(f"{bits_per_pixel} bits per pixel; only 32 is read here")
    start = header_size + ncolors * 12
    endian = "<" if byte_order == 0 else ">"

    def shift(mask):
        return (mask & -mask).bit_length() - 1

    shifts = [(red_mask, shift(red_mask)), (green_mask, shift(green_mask)),
              (blue_mask, shift(blue_mask))]
    rows = []
    for y in range(height):
        line = data[start + y * bytes_per_line:start + y * bytes_per_line + width * 4]
        pixels = struct.unpack(f"{endian}{width}I", line)
        rows.append([tuple((p & m) >> s for m, s in shifts) for p in pixels])
    return width, height, rows


def runs(row):
    """The row as (class, length) runs, pixels classed by which channels exceed half scale."""
    out = []
    for r, g, b in row:
        c = CLASS[(int(r > 127), int(g > 127), int(b > 127))]
        if out and out[-1][0] == c:
            out[-1][1] += 1
        else:
            out.append([c, 1])
    return out


def shows_bars(row, min_bar):
    """Whether the seven bars appear in order, each at least min_bar wide; short runs between
    them (edges, the debayer's fringes) are skipped."""
    wide = [c for c, n in runs(row) if n >= min_bar]
    for i in range(len(wide) - len(BARS) + 1):
        if wide[i:i + len(BARS)] == BARS:
            return True
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("screenshot")
    ap.add_argument("--min-rows", type=int, default=40)
    ap.add_argument("--min-bar", type=int, default=40)
    args = ap.parse_args()
    try:
        width, height, rows = read_xwd(args.screenshot)
    except (OSError, ValueError, struct.error) as e:
        print(f"cannot read {args.screenshot}: {e}")
        return 2
    matching = sum(1 for row in rows if shows_bars(row, args.min_bar))
    verdict = "PASS" if matching >= args.min_rows else "FAIL"
    print(f"{verdict}: {matching} of {height} rows of the {width}x{height} screen show the seven "
          f"SMPTE bars in order (need {args.min_rows})")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
