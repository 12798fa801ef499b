#!/usr/bin/env bash
# Builds kvgate's container image with podman and smoke-tests it, on a
# machine without registry access:
#   1. installs podman, runc and mmdebstrap from Debian if missing, and
#      configures podman to use runc with ulimits within the host's (a
#      drop-in, /etc/containers/containers.conf.d/kvgate.conf);
#   2. builds a Debian 12 base image from Debian packages (mmdebstrap with
#      the host's apt sources, then `podman import` as debian:12-slim), unless
#      one exists;
#   3. builds docker/Dockerfile on it (kvgate:VERSION);
#   4. smoke test: two kvgate-sim replicas on the host, the image run with a
#      mounted config, /readyz answers 200, a streamed completion arrives
#      whole, and SIGTERM drains a stream in flight before the container
#      exits 0.
# Every change to the machine is printed. Idempotent; run as root.
#   scripts/container.sh [--rebuild-base] [--no-smoke]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
rebuild_base=0
smoke=1
for arg in "$@"; do
  case "$arg" in
    --rebuild-base) rebuild_base=1 ;;
    --no-smoke) smoke=0 ;;
    *) echo "usage: $0 [--rebuild-base] [--no-smoke]" >&2; exit 64 ;;
  esac
done
version=$(sed -n 's/^project(kvgate VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
image="kvgate:$version"
say() { echo "container: $*"; }

# 1. Tools and podman's configuration.
missing=()
for package in podman runc mmdebstrap; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  say "installing ${missing[*]} (apt-get)"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# crun (podman's default) rejects this kind of VM's hybrid cgroup layout;
# the default ulimits must not exceed the host's or every `podman run` fails.
nofile=$(ulimit -Hn)
nproc=$(ulimit -Hu)
[[ "$nofile" == unlimited || "$nofile" -gt 20000 ]] && nofile=20000
[[ "$nproc" == unlimited || "$nproc" -gt 4096 ]] && nproc=4096
dropin=/etc/containers/containers.conf.d/kvgate.conf
wanted=$(printf '%s\n' "# Written by kvgate's scripts/container.sh." \
  "[containers]" "default_ulimits = [\"nofile=$nofile:$nofile\", \"nproc=$nproc:$nproc\"]" \
  "[engine]" "runtime = \"runc\"")
if [[ ! -f "$dropin" ]] || [[ "$(cat "$dropin")" != "$wanted" ]]; then
  mkdir -p "$(dirname "$dropin")"
  printf '%s\n' "$wanted" >"$dropin"
  say "wrote $dropin: runtime runc, default_ulimits nofile=$nofile nproc=$nproc"
fi

# 2. The base image, from Debian packages.
if ((rebuild_base)) || ! podman image exists debian:12-slim; then
  sources=/etc/apt/sources.list.d/debian.sources
  [[ -f "$sources" ]] || sources=/etc/apt/sources.list
  tarball=$(mktemp /tmp/kvgate-debian12-XXXXXX.tar)
  say "building the debian:12-slim base with mmdebstrap (apt sources: $sources)"
  # minbase + merged /usr like Debian's own images; no docs, man pages or
  # locales (~74 MiB).
  mmdebstrap --quiet --variant=minbase --format=tar \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
    bookworm "$tarball" "$sources"
  podman import --quiet --change 'CMD ["/bin/bash"]' "$tarball" debian:12-slim >/dev/null
  say "imported debian:12-slim ($(du -m "$tarball" | cut -f1) MiB tar)"
  rm -f "$tarball"
fi

# 3. The image.
say "building $image from docker/Dockerfile"
podman build --quiet --format docker --build-arg JOBS="${KVGATE_JOBS:-2}" -f docker/Dockerfile -t "$image" . >/dev/null
podman image prune -f >/dev/null  # the build stages left untagged
say "built $image ($(podman image inspect "$image" --format '{{.Size}}' | awk '{printf "%.0f MiB", $1/1048576}'))"
((smoke)) || exit 0

# 4. Smoke test, against two simulated replicas on the host's loopback.
say "smoke test"
sim=$top/build/bench/sim/kvgate-sim
if [[ ! -x "$sim" ]]; then
  cmake -S . -B build -G Ninja >/dev/null
  cmake --build build --target kvgate-sim -j"${KVGATE_JOBS:-2}" >/dev/null
fi
scratch=$(mktemp -d /tmp/kvgate-container-XXXXXX)
chmod 755 "$scratch"
pids=()
container=""
cleanup() {
  [[ -n "$container" ]] && podman rm -f "$container" >/dev/null 2>&1 || true
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$scratch"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
workers=""
for id in sim-a sim-b; do
  port=$(free_port)
  # time scale 1: a 300-token answer takes seconds, long enough to be in flight at SIGTERM.
  "$sim" --model smoke-model --id "$id" --port "$port" --time-scale 1 >"$scratch/$id.log" 2>&1 &
  pids+=($!)
  workers+="      - {id: $id, url: \"http://127.0.0.1:$port\"}"$'\n'
done
api=$(free_port)
admin=$(free_port)
# The container shares the host's network: the sims bind loopback only, and
# so does the gateway's test config (nothing here listens beyond 127.0.0.1).
cat >"$scratch/kvgate.yaml" <<YAML
listen: "127.0.0.1:$api"
admin_listen: "127.0.0.1:$admin"
threads: 2
timeouts: {shutdown_grace: 20s}
health_check: {interval: 500ms}
models:
  - name: smoke-model
    workers:
$workers
YAML
chmod 644 "$scratch/kvgate.yaml"
container=$(podman run -d --network host -v "$scratch/kvgate.yaml:/etc/kvgate/kvgate.yaml:ro" "$image")
ready=""
for _ in $(seq 1 100); do
  if curl -fsS "http://127.0.0.1:$admin/readyz" >/dev/null 2>&1; then ready=1; break; fi
  sleep 0.2
done
if [[ -z "$ready" ]]; then
  podman logs "$container" >&2 || true
  echo "container: FAILED: /readyz never answered 200" >&2
  exit 1
fi
say "/readyz 200 with both workers healthy"
body='{"model":"smoke-model","messages":[{"role":"user","content":"hello from the container"}],"max_tokens":8,"stream":true}'
curl -fsS -N "http://127.0.0.1:$api/v1/chat/completions" -H 'content-type: application/json' -d "$body" >"$scratch/stream.txt"
grep -q '^data: \[DONE\]' "$scratch/stream.txt" || { echo "container: FAILED: the stream did not end with [DONE]" >&2; cat "$scratch/stream.txt" >&2; exit 1; }
say "a streamed completion arrived whole ($(grep -c '^data: ' "$scratch/stream.txt") events)"
# A long stream in flight, then SIGTERM: it must still finish, and the
# container exit 0 once drained.
long='{"model":"smoke-model","messages":[{"role":"user","content":"a long answer please"}],"max_tokens":300,"stream":true}'
curl -fsS -N "http://127.0.0.1:$api/v1/chat/completions" -H 'content-type: application/json' -d "$long" >"$scratch/long.txt" &
client=$!
sleep 1
kill -0 "$client" 2>/dev/null || { echo "container: FAILED: the long stream ended before SIGTERM; nothing was drained" >&2; exit 1; }
podman kill --signal TERM "$container" >/dev/null
wait "$client" || { echo "container: FAILED: the in-flight stream broke at SIGTERM" >&2; exit 1; }
grep -q '^data: \[DONE\]' "$scratch/long.txt" || { echo "container: FAILED: the in-flight stream did not finish" >&2; exit 1; }
status=$(podman wait "$container")
[[ "$status" == 0 ]] || { podman logs "$container" >&2; echo "container: FAILED: exit status $status after SIGTERM" >&2; exit 1; }
say "SIGTERM drained the in-flight stream ($(grep -c '^data: ' "$scratch/long.txt") events) and kvgate exited 0"
say "smoke test passed: $image"
