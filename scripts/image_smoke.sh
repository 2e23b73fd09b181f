#!/usr/bin/env bash
# The container image, built and tried without a container daemon or cgroups (`make image-smoke`):
#  1. a Debian bookworm base with Python, made by mmdebstrap (no registry needed; cached);
#  2. the image from Containerfile, built by buildah with chroot isolation (layers cached);
#  3. its entrypoint run in a working container, against this machine's PostgreSQL and Redis
#     (chroot isolation shares the host's network), migrating at start, on the scripted engine;
#  4. /healthz, the image's own HEALTHCHECK command, an API token made inside the container, and a
#     reply streamed through the OpenAI-compatible gateway (scripts/image_smoke_client.py);
#  5. the server stopped and the working container removed, whatever happened.
# Needs root, buildah and mmdebstrap (apt-get install buildah mmdebstrap); installs nothing.
# SMOKE_DATABASE_URL and SMOKE_REDIS_URL say which database and Redis number it may use;
# SMOKE_ENGINE=llamacpp streams from the embedded model instead (a few seconds more).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS

PY=${PY:-.venv/bin/python}
SMOKE_DATABASE_URL=${SMOKE_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/chatsite_image_smoke}
SMOKE_REDIS_URL=${SMOKE_REDIS_URL:-redis://127.0.0.1:6379/13}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
CACHE=.cache/image-smoke
BASE_TAR=$CACHE/base-bookworm.tar
BASE_IMAGE=localhost/chatsite-smoke-base:bookworm
SMOKE_ENGINE=${SMOKE_ENGINE:-scripted}
IMAGE=${IMAGE:-localhost/chatsite:smoke}

say() { echo "image-smoke: $*"; }
fail() {
    echo "image-smoke: FAILED: $*" >&2
    exit 1
}
for tool in buildah mmdebstrap; do
    command -v "$tool" >/dev/null || fail "needs $tool (apt-get install buildah mmdebstrap)"
done
[ "$(id -u)" = 0 ] || fail "needs root (buildah's chroot isolation, mmdebstrap's root mode)"
[ -x "$PY" ] || fail "needs $PY with chatsite's packages (make install)"
mkdir -p "$CACHE"

# Without cgroups the runtime may not set buildah's default ulimits: none are asked for.
export CONTAINERS_CONF=$PWD/$CACHE/containers.conf
printf '[containers]\ndefault_ulimits = []\n' >"$CONTAINERS_CONF"

# 1. The base: what a python:3.11-slim image holds for chatsite, from Debian's packages.
if [ ! -s "$BASE_TAR" ]; then
    say "making the base with mmdebstrap (about half a minute)"
    mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,ca-certificates \
        --format=tar --dpkgopt='path-exclude=/usr/share/man/*' \
        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        bookworm "$BASE_TAR.part" "$DEBIAN_MIRROR" </dev/null || fail "mmdebstrap could not make the base"
    mv "$BASE_TAR.part" "$BASE_TAR"
    buildah rmi "$BASE_IMAGE" >/dev/null 2>&1 || true # made from an older tarball
fi
# buildah has no `import`: a scratch container with the tarball added (unpacked), committed.
if ! buildah inspect --type image "$BASE_IMAGE" >/dev/null 2>&1; then
    say "importing the base into buildah"
    base_ctr=$(buildah from scratch)
    buildah add --quiet "$base_ctr" "$BASE_TAR" / >/dev/null || fail "buildah add of $BASE_TAR"
    buildah config --cmd /bin/sh "$base_ctr"
    buildah commit --quiet --rm "$base_ctr" "$BASE_IMAGE" >/dev/null || fail "buildah commit of the base"
fi

# 2. The image. --format docker: the OCI format has no HEALTHCHECK, which buildah would drop.
# pip in the build trusts what this machine trusts (a proxy that re-signs TLS), in no layer.
build=(--isolation chroot --layers --force-rm --format docker --pull=never)
ca_bundle=${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}
[ -s "$ca_bundle" ] && build+=(--secret "id=pip-cert,src=$ca_bundle")
say "building $IMAGE"
buildah bud --quiet "${build[@]}" --build-arg BASE="$BASE_IMAGE" -f Containerfile -t "$IMAGE" . >/dev/null ||
    fail "buildah bud -f Containerfile failed (its output is above)"
say "built $IMAGE after $((SECONDS - started)) s"

# 3. The server, from the image's own entrypoint, in a process group of its own to stop it by.
"$PY" scripts/image_smoke_client.py ensure-database "$SMOKE_DATABASE_URL" || fail "no database"
port=$("$PY" scripts/image_smoke_client.py free-port)
# manage.py serve refuses a key under 50 characters.
secret_key=$("$PY" -c 'import secrets; print(secrets.token_urlsafe(50))')
origin=http://127.0.0.1:$port
env=(
    --env CHAT_ENGINE="$SMOKE_ENGINE" --env DEBUG=0 --env SECRET_KEY="$secret_key"
    --env ALLOWED_HOSTS=127.0.0.1 --env SECURE_COOKIES=0 --env CHAT_MIGRATE_AT_START=1
    --env HOST=127.0.0.1 --env PORT="$port" --env CACHE_KEY_PREFIX="image-smoke-$$"
    --env DATABASE_URL="$SMOKE_DATABASE_URL" --env REDIS_URL="$SMOKE_REDIS_URL"
)
ctr=$(buildah from --pull=never --name "chatsite-smoke-$$" "$IMAGE")
server_pid=
log=$CACHE/server.log
stopped=
# SIGTERM to uvicorn, as `docker stop` sends it to the entrypoint's process (which uvicorn is, by
# exec). Not to the whole group: buildah's chroot wrapper would kill uvicorn on its own SIGTERM.
# No PID namespace under chroot isolation, so the pid uvicorn logs is this machine's.
stop_server() {
    [ -n "$server_pid" ] && [ -z "$stopped" ] || return 0
    stopped=clean
    local uvicorn
    uvicorn=$(sed -n -e 's/.*Started parent process \[\([0-9]*\)\].*/\1/p' \
        -e 's/.*Started server process \[\([0-9]*\)\].*/\1/p' "$log" | head -n 1)
    if [ -n "$uvicorn" ] && grep -qa uvicorn "/proc/$uvicorn/cmdline" 2>/dev/null; then
        kill -TERM "$uvicorn" 2>/dev/null || true
    fi
    for _ in $(seq 40); do kill -0 -- "-$server_pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 -- "-$server_pid" 2>/dev/null; then
        stopped=killed
        kill -KILL -- "-$server_pid" 2>/dev/null || true
    fi
}
finish() {
    stop_server
    buildah rm "$ctr" >/dev/null 2>&1 || true
}
trap finish EXIT
entrypoint=$(buildah inspect --type container --format '{{range .Docker.Config.Entrypoint}}{{.}} {{end}}' "$ctr")
[ -n "$entrypoint" ] || fail "the image has no entrypoint"
# shellcheck disable=SC2086 # the entrypoint's words, as the image lists them
setsid buildah run --isolation chroot "${env[@]}" "$ctr" -- $entrypoint >"$log" 2>&1 &
server_pid=$!

# 4. Health, the HEALTHCHECK command, a token, a streamed reply.
if ! "$PY" scripts/image_smoke_client.py wait "$origin" 120 "$server_pid"; then
    tail -n 40 "$log" >&2
    fail "the server did not become healthy (its log is above, all of it in $log)"
fi
healthcheck=$(buildah inspect --type container --format '{{range $i, $w := .Docker.Config.Healthcheck.Test}}{{if $i}}{{$w}} {{end}}{{end}}' "$ctr")
[ -n "$healthcheck" ] || fail "the image has no HEALTHCHECK"
# shellcheck disable=SC2086
buildah run --isolation chroot "${env[@]}" "$ctr" -- $healthcheck || fail "HEALTHCHECK ($healthcheck) failed"
say "HEALTHCHECK passed: $healthcheck"
token=$(buildah run --isolation chroot "${env[@]}" --env LOG_LEVEL=WARNING "$ctr" -- python manage.py shell -c "
from django.contrib.auth import get_user_model
from conversations.services.tokens import api_token_create
user = get_user_model().objects.create_user('image-smoke-$$-$RANDOM')
print(api_token_create(user=user, name='image smoke')[1])
" | tail -n 1) || fail "could not make an API token inside the container"
[[ $token == cs_* ]] || fail "manage.py shell printed no token: $token"
if ! "$PY" scripts/image_smoke_client.py stream "$origin" "$token"; then
    tail -n 40 "$log" >&2
    fail "no streamed reply through the gateway"
fi

# 5. Stopped by SIGTERM as an orchestrator would, then removed (finish, on exit).
stop_server
[ "$stopped" = clean ] || fail "the server was still running 20 s after SIGTERM: killed ($log)"
grep -q "Finished server process" "$log" || fail "uvicorn did not report a clean shutdown ($log)"
finish
trap - EXIT
say "passed in $((SECONDS - started)) s"
