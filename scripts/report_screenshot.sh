#!/usr/bin/env bash
# Renders a kvgate-bench report.html in headless Chromium to a PNG and fails
# when a chart the report promises is missing from the rendered DOM or the
# PNG is blank (scripts/screenshot.py does the work).
#   scripts/report_screenshot.sh REPORT.html OUT.png [WIDTH HEIGHT]
set -euo pipefail
if (($# < 2)); then
  echo "usage: $0 REPORT.html OUT.png [WIDTH HEIGHT]" >&2
  exit 64
fi
exec python3 "$(dirname "$0")/screenshot.py" "$1" "$2" --size "${3:-1100},${4:-2400}" --charts
