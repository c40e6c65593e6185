#!/usr/bin/env bash
# model/verify.sh — checks the claim protocol's model (model/claim.pml) with
# SPIN: every property on the protocol as the module runs it (each must
# pass, exhaustively), then every switch that reproduces a known defect
# (each must fail, and its counterexample is replayed into
# build/model/<check>.trail). Prints one line per check: the verdict, the
# states stored, the search's depth and the seconds taken. Exit status 0
# only when every check came out as expected.
#
#   model/verify.sh [check ...]     (default: all; names below)
#   VERIFY_JOBS=N                   checks run N at a time (default: 2)
#   VERIFY_OUT=dir                  where the work goes (default: build/model)
set -uo pipefail
cd "$(dirname "$0")/.."

out=${VERIFY_OUT:-build/model}
jobs=${VERIFY_JOBS:-2}
mkdir -p "$out"

command -v spin >/dev/null || { echo "verify: spin is not installed (Debian package spin; scripts/install-deps.sh installs it)" >&2; exit 2; }
command -v cc >/dev/null || { echo "verify: a C compiler is needed to build SPIN's verifier" >&2; exit 2; }

# name | expect (pass or fail) | model flags | what it checks (the longest first)
checks=(
  "loss-two|pass|-DN=2 -DLOSS -DLOOKS=0|two requests, one failover that loses writes, lost replies: at most one execution more"
  "loss-three|pass|-DN=3 -DFULL=2 -DLOSS -DFAULTS=0 -DRENEWALS=0 -DLOOKS=0 -DDRIFT=0|three requests, one failover that loses writes: at most one execution more"
  "full-loss-two|pass|-DN=2 -DOOM -DLOSS -DFAULTS=0 -DLOOKS=0|two requests, Redis filled and freed again, one failover that loses writes: at most one execution more"
  "two-requests|pass|-DN=2|two requests, lost replies and dropped commands, renewals, a look, Redis's clock ahead: every property"
  "three-requests|pass|-DN=3 -DFULL=2 -DRENEWALS=0 -DLOOKS=0|three requests (the third a retry that claims and executes), no faults: every property"
  "full-two|pass|-DN=2 -DOOM|two requests, Redis filled and freed again, lost replies, renewals, a look: every property; a store refused for memory kept until it lands"
  "full-three|pass|-DN=3 -DFULL=2 -DOOM -DFAULTS=0 -DRENEWALS=0 -DLOOKS=0|three requests (the third a retry), Redis filled and freed again: every property"
  "loss-two-same|pass|-DN=2 -DLOSS -DSAME_FP -DFAULTS=0|two requests of one fingerprint, one failover that loses writes: at most one execution more"
  "mixed-two|pass|-DN=2 -DIFEQ -DMIXED -DLOOKS=0|each command today's way or the conditional write, two requests, lost replies, renewals, Redis's clock ahead: every property"
  "mixed-loss-two|pass|-DN=2 -DIFEQ -DMIXED -DLOSS -DRENEWALS=0 -DLOOKS=0 -DDRIFT=0|each command today's way or the conditional write, two requests, one failover that loses writes, lost replies: at most one execution more"
  "ifeq-three|pass|-DN=3 -DFULL=2 -DIFEQ -DNO_MARGIN -DRENEWALS=0 -DLOOKS=0 -DDRIFT=0|the conditional write, three requests (the third a retry), no margin: every property"
  "ifeq-full-two|pass|-DN=2 -DIFEQ -DOOM -DNO_MARGIN -DFREE_CLOCKS -DFAULTS=0 -DLOOKS=0|the conditional write, two requests, Redis filled and freed again, renewals, no margin, Redis's clock free: every property; a renewal refused for memory sent again as the script"
  "mixed-full-two|pass|-DN=2 -DIFEQ -DMIXED -DOOM -DFAULTS=0 -DLOOKS=0 -DDRIFT=0|each command today's way or the conditional write, two requests, Redis filled and freed again: every property"
  "ifeq-full-loss-two|pass|-DN=2 -DIFEQ -DOOM -DLOSS -DNO_MARGIN -DFAULTS=0 -DLOOKS=0 -DDRIFT=0|the conditional write, two requests, Redis filled and freed again, one failover that loses writes, no margin: at most one execution more, no key claimed for ever"
  "ifeq-loss-two|pass|-DN=2 -DIFEQ -DNO_MARGIN -DFREE_CLOCKS -DLOSS -DLOOKS=0|the conditional write, two requests, one failover that loses writes, lost replies, no margin, Redis's clock free: at most one execution more, no record overwritten"
  "ifeq-loss-three|pass|-DN=3 -DFULL=2 -DIFEQ -DNO_MARGIN -DLOSS -DFAULTS=0 -DRENEWALS=0 -DLOOKS=0 -DDRIFT=0|the conditional write, three requests, one failover that loses writes, no margin: at most one execution more, no record overwritten"
  "ifeq-two|pass|-DN=2 -DIFEQ -DNO_MARGIN -DFREE_CLOCKS|the conditional write, two requests, lost replies, renewals, a look, no margin, Redis's clock ahead without bound: every property"
  "oom-gives-up|fail|-DN=2 -DOOM -DOOM_GIVES_UP -DFAULTS=0 -DRENEWALS=0 -DLOOKS=0|a store refused for memory given up: its claim stays for idempotency_ttl"
  "exception|fail|-DN=2 -DLOSS -DCLAIM_ONCE -DFAULTS=0 -DRENEWALS=0 -DLOOKS=0|a failover that misses the claim: two executions"
  "putback-lock-ttl|fail|-DN=3 -DFULL=2 -DLOSS -DFAULTS=0 -DRENEWALS=0 -DLOOKS=0 -DDRIFT=0 -DPUTBACK_LOCK_TTL|the put-back with PX lock_ttl: a third execution"
  "putback-claim|fail|-DN=3 -DFULL=2 -DLOSS -DFAULTS=0 -DRENEWALS=0 -DLOOKS=0 -DDRIFT=0 -DPUTBACK_CLAIM|another request's claim put back: a third execution"
  "no-fence|fail|-DN=2 -DNO_FENCE|a store without the fence overwrites a stored response"
  "release-executed|fail|-DN=2 -DRELEASE_EXECUTED|a release after the upstream may have received the request: two executions"
  "no-margin|fail|-DN=2 -DNO_MARGIN|a lease without the margin: a store within it finds another's claim"
  "unconditional|fail|-DN=2 -DIFEQ -DUNCONDITIONAL|the conditional write made a plain SET: a late store overwrites a stored response"
  "renew-no-fallback|fail|-DN=2 -DIFEQ -DOOM -DRENEW_NO_FALLBACK -DFAULTS=0 -DLOOKS=0|a conditional renewal refused for memory not sent again as the script: the claim lapses while Redis is full"
  "keep-ifeq-loss|fail|-DN=2 -DIFEQ -DOOM -DLOSS -DKEEP_IFEQ -DFAULTS=0 -DLOOKS=0 -DRENEWALS=0 -DDRIFT=0|the keep of a claim kept for memory as the conditional SET, refused, sent again behind its store: a failover leaves the claim for idempotency_ttl"
  "mixed-free-clocks|fail|-DN=2 -DIFEQ -DMIXED -DFREE_CLOCKS|today's way still taken, Redis's clock free: a store within the lease finds its claim expired"
)

wanted=("$@")
selected() {
    [ ${#wanted[@]} -eq 0 ] && return 0
    local w
    for w in "${wanted[@]}"; do [ "$w" = "$1" ] && return 0; done
    return 1
}

# run_check NAME EXPECT FLAGS: builds and runs the verifier; writes
# $out/NAME.result (one line) and, on an assertion, $out/NAME.trail.
run_check() {
    local name=$1 expect=$2 flags=$3 dir="$out/$1"
    rm -rf "$dir" && mkdir -p "$dir" && cp model/claim.pml "$dir/"
    local cflags="-O2 -DSAFETY -DCOLLAPSE"
    # a switch stops at its first counterexample: with two requests, breadth
    # first finds the shortest; with three it would take too long
    [ "$expect" = fail ] && [[ "$flags" == *-DN=2* ]] && cflags="$cflags -DBFS"
    local start=$SECONDS
    if ! (cd "$dir" && spin -a $flags claim.pml >spin.log 2>&1 && cc $cflags -o pan pan.c >cc.log 2>&1); then
        echo "$name|error|build failed: $(tail -n 3 "$dir/spin.log" "$dir/cc.log" | tr '\n' ' ')" >"$out/$name.result"
        return
    fi
    (cd "$dir" && ./pan -m100000 >pan.log 2>&1)
    local secs=$((SECONDS - start))
    local states depth errors
    states=$(awk '/states, stored/ { print $1; exit }' "$dir/pan.log")
    depth=$(sed -n 's/.*depth reached \([0-9]*\).*/\1/p' "$dir/pan.log" | head -n 1)
    errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$dir/pan.log" | head -n 1)
    local verdict=error
    if grep -q "Search not completed" "$dir/pan.log" && [ "${errors:-0}" = 0 ]; then
        verdict=incomplete
    elif [ "${errors:-}" = 0 ]; then
        verdict=pass
    elif [ -n "${errors:-}" ]; then
        verdict=fail
        local what
        what=$(grep -m1 -o "assertion violated.*\|invalid end state.*" "$dir/pan.log")
        (cd "$dir" && spin -t $flags claim.pml 2>&1) \
            | grep -v '^\s*$' | sed -n '1,/trail ends/p' | grep -v '^\s*proc \|^#processes' \
            | sed 's/^ *//' >"$out/$name.trail"
        echo "$what" >>"$out/$name.trail"
    fi
    echo "$name|$verdict|${states:-?} states, depth ${depth:-?}, ${secs} s" >"$out/$name.result"
}

started=$SECONDS
running=0
for c in "${checks[@]}"; do
    IFS='|' read -r name expect flags what <<<"$c"
    selected "$name" || continue
    run_check "$name" "$expect" "$flags" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait -n
        running=$((running - 1))
    fi
done
wait

status=0
for c in "${checks[@]}"; do
    IFS='|' read -r name expect flags what <<<"$c"
    selected "$name" || continue
    IFS='|' read -r _ verdict figures <"$out/$name.result"
    if [ "$verdict" = "$expect" ]; then
        mark=ok
    else
        mark=WRONG
        status=1
    fi
    if [ "$expect" = pass ]; then
        printf '%-5s %-17s must hold, %-10s %s — %s\n' "$mark" "$name" "$verdict:" "$figures" "$what"
    else
        printf '%-5s %-17s must fail, %-10s %s — %s; trail: %s\n' "$mark" "$name" "$verdict:" "$figures" "$what" "$out/$name.trail"
    fi
done
echo "verify: $( [ $status = 0 ] && echo 'every check came out as expected' || echo 'SOME CHECKS DID NOT' ) in $((SECONDS - started)) s"
exit $status
