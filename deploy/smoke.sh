#!/usr/bin/env bash
# Build omnicall's image and make real calls against it (not part of `make test`: minutes).
#
#   deploy/smoke.sh base      a Debian bookworm base image from debootstrap, for machines that
#                             reach Debian's mirror but no image registry (localhost/bookworm-base)
#   deploy/smoke.sh build     build the image (Containerfile) and print its size and build time
#   deploy/smoke.sh image     start the image (https, a call token, metrics on loopback) and make
#                             a call: a spoken question, an answer in speech
#   deploy/smoke.sh compose   bring up compose.yaml (+ deploy/compose.smoke.yaml: own ports) and
#                             make a call through front-end -> engine server, with Redis
#
# Environment: CONTAINER_ENGINE (podman, else docker), COMPOSE (podman-compose, else
# "docker compose"), OMNICALL_IMAGE (localhost/omnicall:cpu), BASE_IMAGE (localhost/bookworm-base
# when it exists, else docker.io/library/debian:bookworm-slim), TORCH_WHEELS (a folder with the
# torch 2.13.0+cpu wheel to build from; else torch's CPU index), PIP_CERT (a CA bundle for the
# package index, mounted into the build), NO_CACHE (set: build every layer afresh), PYTHON
# (the client's: .venv/bin/python).
# Results: docs/deploy.md.
set -euo pipefail
cd "$(dirname "$0")/.."

ENGINE=${CONTAINER_ENGINE:-$(command -v podman >/dev/null && echo podman || echo docker)}
IMAGE=${OMNICALL_IMAGE:-localhost/omnicall:cpu}
PYTHON=${PYTHON:-.venv/bin/python}
if [ "$ENGINE" = podman ] && [ -z "${CONTAINERS_CONF:-}" ] \
    && [ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ]; then
  export CONTAINERS_CONF="$PWD/deploy/podman-cgroupv1.conf"
fi
if [ -z "${BASE_IMAGE:-}" ]; then
  if $ENGINE image exists localhost/bookworm-base 2>/dev/null \
      || $ENGINE image inspect localhost/bookworm-base >/dev/null 2>&1; then
    BASE_IMAGE=localhost/bookworm-base
  else
    BASE_IMAGE=docker.io/library/debian:bookworm-slim
  fi
fi
export BASE_IMAGE OMNICALL_IMAGE="$IMAGE"
RUN_NET=(--network host)

self_signed() {  # $1: folder for cert.pem / key.pem (readable by the image's uid 10001)
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -keyout "$1/key.pem" -out "$1/cert.pem" 2>/dev/null
  chmod 0755 "$1"
  chmod 0644 "$1/key.pem" "$1/cert.pem"
}

cmd_base() {
  local root
  root=$(mktemp -d)
  debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >/dev/null
  rm -rf "$root"/var/cache/apt/archives/*.deb
  tar -C "$root" -c . | $ENGINE import - localhost/bookworm-base
  rm -rf "$root"
}

cmd_build() {
  local args=(--format docker) start end
  [ "$ENGINE" = docker ] && args=()
  args+=(--network host --build-arg "BASE=$BASE_IMAGE")
  [ -n "${NO_CACHE:-}" ] && args+=(--no-cache)
  local wheels=${TORCH_WHEELS:-/opt/wheels}
  if compgen -G "$wheels/torch-2.13.0+cpu-*.whl" >/dev/null && [ "$ENGINE" = podman ]; then
    args+=(-v "$wheels:/wheels:ro" --build-arg "TORCH_PIP_ARGS=--find-links /wheels")
  fi
  local cert=${PIP_CERT:-$(pip config get global.cert 2>/dev/null || true)}
  if [ -n "$cert" ] && [ -f "$cert" ] && [ "$ENGINE" = podman ]; then
    args+=(-v "$cert:/run/ca.crt:ro" --build-arg PIP_CERT=/run/ca.crt)
  fi
  start=$(date +%s)
  $ENGINE build "${args[@]}" -t "$IMAGE" -f Containerfile .
  end=$(date +%s)
  local size
  size=$($ENGINE image inspect --format '{{.Size}}' "$IMAGE")
  echo "RESULT image=$IMAGE size_mb=$((size / 1000000)) build_s=$((end - start))"
}

cmd_image() {
  local tmp name=omnicall-smoke port=18080 mport=19464 token=smoke-token rc=0
  tmp=$(mktemp -d)
  self_signed "$tmp"
  $ENGINE rm -f "$name" >/dev/null 2>&1 || true
  trap '$ENGINE logs --tail 40 '"$name"' 2>&1 | sed "s/^/  [server] /"; \
        $ENGINE rm -f '"$name"' >/dev/null 2>&1; rm -rf '"$tmp" EXIT
  $ENGINE run -d --name "$name" "${RUN_NET[@]}" -v "$tmp:/certs:ro" \
    -e OMNICALL_PORT=$port -e OMNICALL_TOKEN=$token \
    -e OMNICALL_CERT=/certs/cert.pem -e OMNICALL_KEY=/certs/key.pem \
    -e OMNICALL_METRICS_LISTEN=127.0.0.1:$mport -e OMNICALL_ICE_LOOPBACK=1 "$IMAGE"
  echo "user in the container: $($ENGINE exec "$name" id)"
  echo "compilers in the image: $($ENGINE exec "$name" sh -c \
    'command -v gcc cc c++ cmake make || echo none')"
  "$PYTHON" deploy/smoke_call.py "https://127.0.0.1:$port/" --token $token --insecure \
    --loopback --metrics-url "http://127.0.0.1:$mport/metrics" || rc=$?
  if [ "$ENGINE" = podman ]; then
    echo "health check: $($ENGINE healthcheck run "$name" && echo healthy || echo unhealthy)"
  else
    echo "health check: $($ENGINE inspect --format '{{.State.Health.Status}}' "$name")"
  fi
  return $rc
}

COMPOSE_PROJECT=omnicall-smoke
COMPOSE_FILES=(-p "$COMPOSE_PROJECT" -f compose.yaml -f deploy/compose.smoke.yaml)
compose_down() {
  $COMPOSE_CMD "${COMPOSE_FILES[@]}" logs --tail 30 2>&1 | sed "s/^/  [stack] /" || true
  $COMPOSE_CMD "${COMPOSE_FILES[@]}" down >/dev/null 2>&1 || true
  rm -rf "$SMOKE_TMP"
}

cmd_compose() {
  local rc=0
  if [ -n "${COMPOSE:-}" ]; then COMPOSE_CMD=$COMPOSE
  elif command -v podman-compose >/dev/null; then COMPOSE_CMD=podman-compose
  else COMPOSE_CMD="docker compose"; fi
  SMOKE_TMP=$(mktemp -d)
  self_signed "$SMOKE_TMP"
  export TLS_DIR=$SMOKE_TMP ENGINE_KEY=smoke-engine-key TURN_PASSWORD=smoke-turn \
    CALL_TOKEN=smoke-token REDIS_PORT=16379 REDIS_PASSWORD=smoke-redis-7q ENGINE_PORT=18091 \
    PUBLIC_PORT=18443 METRICS_PORT=19464
  trap compose_down EXIT
  $COMPOSE_CMD "${COMPOSE_FILES[@]}" build redis turn
  $COMPOSE_CMD "${COMPOSE_FILES[@]}" up -d
  $COMPOSE_CMD "${COMPOSE_FILES[@]}" ps
  "$PYTHON" deploy/smoke_call.py "https://127.0.0.1:$PUBLIC_PORT/" --token "$CALL_TOKEN" \
    --insecure --loopback --wait-for "http://127.0.0.1:$ENGINE_PORT/" \
    --metrics-url "http://127.0.0.1:$METRICS_PORT/metrics" \
    --redis-url "redis://:$REDIS_PASSWORD@127.0.0.1:$REDIS_PORT/0" || rc=$?
  # TURN: an allocation with the compose file's credentials, relaying between two clients;
  # the container found by the labels both tools set (podman-compose names it
  # omnicall-smoke_turn_1, docker compose omnicall-smoke-turn-1)
  local turn
  turn=$($ENGINE ps -q --filter "label=com.docker.compose.project=$COMPOSE_PROJECT" \
    --filter label=com.docker.compose.service=turn | head -1 || true)
  echo "TURN: $($ENGINE exec "${turn:-${COMPOSE_PROJECT}_turn_1}" turnutils_uclient \
    -u omnicall -w "$TURN_PASSWORD" -y -n 5 -m 1 -l 170 127.0.0.1 2>&1 \
    | grep -E 'lost packets|ERROR' | head -2 || true)"
  return $rc
}

case "${1:-}" in
  base) cmd_base ;;
  build) cmd_build ;;
  image) cmd_image ;;
  compose) cmd_compose ;;
  *) sed -n '2,20p' "$0"; exit 2 ;;
esac
