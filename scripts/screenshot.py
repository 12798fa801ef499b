#!/usr/bin/env python3
"""Renders a page in headless Chromium (Debian's `chromium`) to a PNG and
fails when it did not render as meant: the DOM Chromium built must hold
what the caller expects, and the PNG must not be blank.

  scripts/screenshot.py URL OUT.png [--size W,H] [--charts] [--table ID:MIN_ROWS ...]

--charts: every <figure data-chart=...> holds an <svg> with lines or bars
(kvgate-bench's report); --table: the table with that id has at least
MIN_ROWS body rows (the admin status page). Exit 69 when there is no
Chromium, 1 when a check fails.
"""
import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib


def chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    sys.stderr.write("screenshot: needs Debian's chromium (scripts/setup.sh test installs it)\n")
    sys.exit(69)


def render(url, out, size):
    browser = chromium()
    with tempfile.TemporaryDirectory(prefix="kvgate-chromium-") as profile:
        # --no-sandbox: Chromium refuses to run as root with its sandbox; the
        # pages are our own (a local file or a gateway on 127.0.0.1).
        flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                 f"--user-data-dir={profile}", "--no-first-run", "--disable-extensions",
                 "--allow-file-access-from-files"]
        dom = subprocess.run(flags + ["--dump-dom", url], capture_output=True, text=True, timeout=120)
        if dom.returncode != 0:
            sys.exit(f"screenshot: chromium --dump-dom failed: {dom.stderr[-500:]}")
        shot = subprocess.run(flags + [f"--window-size={size}", f"--screenshot={os.path.abspath(out)}", url],
                              capture_output=True, text=True, timeout=120)
        if shot.returncode != 0 or not os.path.exists(out):
            sys.exit(f"screenshot: chromium --screenshot failed: {shot.stderr[-500:]}")
        return dom.stdout


def inked_share(path):
    """Share of pixels darker than light grey in an 8-bit RGB(A) PNG."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit("screenshot: not a PNG")
    at, idat, width, height, colour = 8, b"", 0, 0, 0
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        chunk = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            width, height, _depth, colour = struct.unpack(">IIBB", chunk[:10])
        elif kind == b"IDAT":
            idat += chunk
        at += 12 + length
    channels = {2: 3, 6: 4}.get(colour)
    if channels is None:
        sys.exit(f"screenshot: unexpected PNG colour type {colour}")
    raw = zlib.decompress(idat)
    stride = width * channels
    previous = bytearray(stride)
    inked = 0
    for row in range(height):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for index in range(stride):  # undo the PNG row filter
            left = line[index - channels] if index >= channels else 0
            up = previous[index]
            corner = previous[index - channels] if index >= channels else 0
            if kind == 1:
                line[index] = (line[index] + left) & 255
            elif kind == 2:
                line[index] = (line[index] + up) & 255
            elif kind == 3:
                line[index] = (line[index] + (left + up) // 2) & 255
            elif kind == 4:
                guess = left + up - corner
                pick = min((abs(guess - left), 0, left), (abs(guess - up), 1, up),
                           (abs(guess - corner), 2, corner))[2]
                line[index] = (line[index] + pick) & 255
        for pixel in range(0, stride, channels):
            if min(line[pixel:pixel + 3]) < 200:
                inked += 1
        previous = line
    return inked / (width * height)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url")
    parser.add_argument("out")
    parser.add_argument("--size", default="1100,2400")
    parser.add_argument("--charts", action="store_true")
    parser.add_argument("--table", action="append", default=[])
    args = parser.parse_args()
    url = args.url if re.match(r"^[a-z]+://", args.url) else "file://" + os.path.realpath(args.url)
    dom = render(url, args.out, args.size)
    found = []
    if args.charts:
        charts = re.findall(r"<figure data-chart=\"([a-z-]+)\">(.*?)</figure>", dom, re.S)
        if not charts:
            sys.exit("screenshot: the rendered page has no chart")
        for name, body in charts:
            if "<svg" not in body or not re.search(r"<(polyline|rect|circle)", body):
                sys.exit(f"screenshot: chart {name} rendered empty")
        found.append(f"{len(charts)} charts ({', '.join(sorted(set(n for n, _ in charts)))})")
    for spec in args.table:
        table_id, _, minimum = spec.partition(":")
        match = re.search(r"<table[^>]*id=\"" + re.escape(table_id) + r"\"[^>]*>(.*?)</table>", dom, re.S)
        if not match:
            sys.exit(f"screenshot: the rendered page has no table #{table_id}")
        body = re.search(r"<tbody>(.*?)</tbody>", match.group(1), re.S)
        rows = len(re.findall(r"<tr[ >]", body.group(1))) if body else 0
        if rows < int(minimum or 1):
            sys.exit(f"screenshot: table #{table_id} has {rows} rows, expected at least {minimum}")
        found.append(f"table #{table_id} with {rows} rows")
    share = inked_share(args.out)
    if share < 0.002:
        sys.exit(f"screenshot: the PNG is blank ({share:.4%} of pixels inked)")
    print(f"screenshot: {'; '.join(found) or 'page'}, {share:.1%} of pixels inked -> {args.out}")


if __name__ == "__main__":
    main()
