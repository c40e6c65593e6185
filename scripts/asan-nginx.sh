#!/bin/sh
# nginx with gcc's AddressSanitizer runtime preloaded, for TEST_NGINX_BINARY
# (scripts/asan-suite.sh). The packaged nginx is not instrumented and the
# module built in build/asan/ is, so libasan must be in the initial library
# list: ASan refuses to start otherwise ("ASan runtime does not come first in
# initial library list"). The UBSan runtime is not preloaded: asan-suite.sh
# links it into the module (-static-libubsan), see there why.
#
# Every nginx process writes to $ASAN_LOG_DIR/asan.<pid> and ubsan.<pid>: the
# runtimes reopen their log under the new pid after a fork, so the daemonized
# copy (daemon on) and any worker have files of their own. atexit=1 makes each
# process that exits normally write ASan's exit statistics there (how the
# suite counts the processes checked); a clean process writes nothing else.
# The leak check runs at exit, after nginx has destroyed its cycle pool; the
# allocation stacks are unwound in full (fast_unwind_on_malloc=0: the packaged
# nginx, hiredis and libcrypto have no frame pointers) so that the suite can
# tell the module's leaks from nginx's own.
#
# ASAN_OPTIONS / UBSAN_OPTIONS already in the environment are appended, so
# they win over these defaults.
dir=${ASAN_LOG_DIR:-/tmp}
asan_rt=${ASAN_RUNTIME:-$(gcc -print-file-name=libasan.so)}

LD_PRELOAD="$asan_rt${LD_PRELOAD:+ $LD_PRELOAD}"
ASAN_OPTIONS="log_path=$dir/asan:atexit=1:halt_on_error=0:detect_leaks=1:fast_unwind_on_malloc=0:malloc_context_size=40${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
UBSAN_OPTIONS="log_path=$dir/ubsan:print_stacktrace=1:halt_on_error=0${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export LD_PRELOAD ASAN_OPTIONS UBSAN_OPTIONS
exec "${NGINX_BIN:-/usr/sbin/nginx}" "$@"
