#!/bin/sh
# scripts/train-dictionary.sh — makes a dictionary for
# idempotency_compress_dictionary from sample responses of a location:
# zstd's own trainer (`zstd --train`, Debian's zstd package) over the
# samples, then the dictionary's id, which every record compressed with it
# carries (docs/performance.md#dictionaries).
#
# Usage: scripts/train-dictionary.sh [--size BYTES] OUT SAMPLE...
#   SAMPLE   a file holding one response body (or a directory of them);
#            a few hundred to a few thousand, of the location's real
#            responses (a staging capture, an upstream's fixtures)
#   --size   the dictionary's size (default 16384; larger helps little
#            for responses of a few KB)
# Prints: the dictionary's path, size, id and the samples it was made from.
set -eu

size=16384
if [ "${1:-}" = "--size" ]; then
    size=$2
    shift 2
fi
if [ $# -lt 2 ]; then
    echo "usage: $0 [--size BYTES] OUT SAMPLE..." >&2
    exit 2
fi
out=$1
shift
command -v zstd >/dev/null || { echo "$0: zstd not found (apt-get install zstd)" >&2; exit 1; }

count=$(find "$@" -type f | wc -l)
if [ "$count" -lt 20 ]; then
    echo "$0: $count samples: zstd needs at least a few dozen (a few hundred is better)" >&2
    exit 1
fi
zstd -q --train -r "$@" --maxdict="$size" -o "$out"
# A zstd dictionary: the magic EC30A437, then its id (both little-endian).
id=$(od -An -t u4 -j 4 -N 4 "$out" | tr -d ' ')
echo "dictionary $out: $(wc -c < "$out") bytes, id $id, from $count samples"
