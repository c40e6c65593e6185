#!/bin/sh
# nginx under valgrind memcheck, for TEST_NGINX_BINARY: each nginx process
# writes its report to $VALGRIND_LOG_DIR/vg.<pid>.log (empty when clean).
exec valgrind -q --error-limit=no --leak-check=no --num-callers=40 \
    --log-file="${VALGRIND_LOG_DIR:-/tmp}/vg.%p.log" "${NGINX_BIN:-/usr/sbin/nginx}" "$@"
