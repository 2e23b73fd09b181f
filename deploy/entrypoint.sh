#!/bin/sh
# The image's entrypoint: migrate the database when asked, then `manage.py serve`, the
# production server (uvicorn with WEB_CONCURRENCY workers), which first refuses settings unfit
# for production and says what to change. Arguments run a command instead of the server, after
# the same migration: `... python manage.py createsuperuser`.
#
# Read here, besides chatsite's own settings and serve's HOST, PORT, WEB_CONCURRENCY and
# FORWARDED_ALLOW_IPS (0.0.0.0, 8000, 2 and 127.0.0.1 unless set):
#   CHAT_MIGRATE_AT_START     1: `manage.py migrate` first; one container at a time (compose.yaml
#                             runs a one-shot migrate service before the web replicas instead)
#   PROMETHEUS_MULTIPROC_DIR  unset: an emptied folder in /tmp, where each worker writes its
#                             metrics and /metrics adds them up
set -eu

case "${CHAT_MIGRATE_AT_START:-0}" in
    1 | true | yes | on) python manage.py migrate --noinput ;;
    0 | false | no | off | "") ;;
    *) echo "CHAT_MIGRATE_AT_START must be 1 or 0; got '$CHAT_MIGRATE_AT_START'." >&2; exit 64 ;;
esac

if [ "$#" -gt 0 ]; then
    exec "$@"
fi

# Stale files from an earlier start would be added into /metrics: the folder starts empty.
if [ -z "${PROMETHEUS_MULTIPROC_DIR:-}" ]; then
    PROMETHEUS_MULTIPROC_DIR=/tmp/chatsite-metrics
    rm -rf "$PROMETHEUS_MULTIPROC_DIR"
    mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
    export PROMETHEUS_MULTIPROC_DIR
fi

exec python manage.py serve
