#!/usr/bin/env bash
# Renders a kvgate-bench report.html in headless Chromium (Debian's
# `chromium`) to a PNG, and fails when the page did not render as meant:
# the DOM Chromium built must hold every chart the report promises (each
# <figure data-chart=...> with an <svg> of lines or bars), and the PNG must
# not be blank (enough non-white pixels).
#   scripts/report_screenshot.sh REPORT.html OUT.png [WIDTH HEIGHT]
set -euo pipefail
if (($# < 2)); then
  echo "usage: $0 REPORT.html OUT.png [WIDTH HEIGHT]" >&2
  exit 64
fi
report=$(realpath "$1")
out=$2
width=${3:-1100}
height=${4:-2400}
browser=$(command -v chromium || command -v chromium-browser || true)
if [[ -z "$browser" ]]; then
  echo "report_screenshot: needs Debian's chromium (scripts/setup.sh bench installs it)" >&2
  exit 69
fi
profile=$(mktemp -d /tmp/kvgate-chromium-XXXXXX)
trap 'rm -rf "$profile"' EXIT
# --no-sandbox: Chromium refuses to run as root with its sandbox; the page
# is our own file, no network is touched.
flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$profile"
       --no-first-run --disable-extensions --allow-file-access-from-files)
"$browser" "${flags[@]}" --dump-dom "file://$report" >"$profile/dom.html" 2>"$profile/dom.log"
"$browser" "${flags[@]}" --window-size="$width,$height" --screenshot="$(realpath -m "$out")" \
  "file://$report" >/dev/null 2>"$profile/shot.log"
python3 - "$profile/dom.html" "$out" <<'PY'
import re, struct, sys, zlib
dom = open(sys.argv[1], encoding="utf-8").read()
charts = re.findall(r"<figure data-chart=\"([a-z-]+)\">(.*?)</figure>", dom, re.S)
if not charts:
    sys.exit("report_screenshot: the rendered page has no chart")
for name, body in charts:
    if "<svg" not in body or not re.search(r"<(polyline|rect|circle)", body):
        sys.exit(f"report_screenshot: chart {name} rendered empty")
# Count non-white pixels of the PNG (8-bit RGB or RGBA, as Chromium writes).
data = open(sys.argv[2], "rb").read()
if data[:8] != b"\x89PNG\r\n\x1a\n":
    sys.exit("report_screenshot: not a PNG")
at, idat, width, height, colour = 8, b"", 0, 0, 0
while at < len(data):
    length, kind = struct.unpack(">I4s", data[at:at + 8])
    chunk = data[at + 8:at + 8 + length]
    if kind == b"IHDR":
        width, height, depth, colour = struct.unpack(">IIBB", chunk[:10])
    elif kind == b"IDAT":
        idat += chunk
    at += 12 + length
channels = {2: 3, 6: 4}.get(colour)
if channels is None:
    sys.exit(f"report_screenshot: unexpected PNG colour type {colour}")
raw = zlib.decompress(idat)
stride = width * channels
previous = bytearray(stride)
inked = 0
for row in range(height):
    start = row * (stride + 1)
    kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
    for index in range(stride):
        left = line[index - channels] if index >= channels else 0
        up = previous[index]
        corner = previous[index - channels] if index >= channels else 0
        if kind == 1: line[index] = (line[index] + left) & 255
        elif kind == 2: line[index] = (line[index] + up) & 255
        elif kind == 3: line[index] = (line[index] + (left + up) // 2) & 255
        elif kind == 4:
            guess = left + up - corner
            pick = min((abs(guess - left), 0, left), (abs(guess - up), 1, up), (abs(guess - corner), 2, corner))[2]
            line[index] = (line[index] + pick) & 255
    for pixel in range(0, stride, channels):
        if min(line[pixel:pixel + 3]) < 200:
            inked += 1
    previous = line
share = inked / (width * height)
if share < 0.002:
    sys.exit(f"report_screenshot: the PNG is blank ({share:.4%} of pixels inked)")
print(f"report_screenshot: {len(charts)} charts ({', '.join(sorted(set(n for n, _ in charts)))}), "
      f"{share:.1%} of pixels inked -> {sys.argv[2]}")
PY
