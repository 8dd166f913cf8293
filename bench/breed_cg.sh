#!/usr/bin/env bash
# Callgrind instructions per decoded candidate of a tune's breeding (issue 20), load-independent.
#
# usage: bench/breed_cg.sh TREE RECORDING [WARM] [ROUNDS] [OUTDIR]
#   RECORDING: made by `bench/breed_rounds.py record` (any tree: the rounds are data).
# Runs `bench/breed_rounds.py replay` of TREE under valgrind twice, with --rounds 0 and with
# --rounds ROUNDS (both after WARM rounds), and prints (Ir(ROUNDS) - Ir(0)) / decoded.
# PYTHONHASHSEED is fixed (0) so both runs hash alike. Each run is ~50x the native time.
# Also printed: the same figure without libcrypto's instructions (the candidate ids' sha256).
# valgrind does not emulate SHA-NI, so under it OpenSSL hashes in software (~27 Ir a byte of
# the ~12 KB identity text, ~8.5 % of a BERT-base candidate's count) while the real CPU (sha_ni)
# hashes ~3x faster (12 KB: 7 us against 23 us with OPENSSL_ia32cap masking SHA): the count
# over-weights the ids (h131).
set -e
TREE=$1; REC=$2; WARM=${3:-5}; ROUNDS=${4:-10}; OUT=${5:-$(mktemp -d)}
PY=${PY:-$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/python}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
ir() {  # ROUNDS -> total Ir of the run
  PYTHONHASHSEED=0 PYTHONPATH=$TREE valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.$1.out" \
    "$PY" "$HERE/breed_rounds.py" replay "$REC" --warm "$WARM" --rounds "$1" > "$OUT/replay.$1.txt" 2>"$OUT/vg.$1.log"
  grep -m1 '^summary:\|^totals:' "$OUT/cg.$1.out" | awk '{print $2}'
}
a=$(ir 0); b=$(ir "$ROUNDS")
dec=$(awk '/^rounds/{print $4}' "$OUT/replay.$ROUNDS.txt")
if [ -z "$dec" ] || [ "$dec" -eq 0 ]; then
  echo "breed_cg.sh: the replay decoded nothing (see $OUT/replay.$ROUNDS.txt, $OUT/vg.$ROUNDS.log)" >&2; exit 1
fi
crypto() {  # ROUNDS -> Ir in libcrypto (every function of the object, self cost)
  callgrind_annotate --threshold=100 "$OUT/cg.$1.out" 2>/dev/null \
    | awk '/libcrypto/ {gsub(",", "", $1); if ($1 ~ /^[0-9]+$/) s += $1} END {print s + 0}'
}
ca=$(crypto 0); cb=$(crypto "$ROUNDS")
echo "tree $TREE rounds $WARM+$ROUNDS decoded $dec Ir $a -> $b per decoded $(( (b - a) / dec ))" \
  "without libcrypto $(( (b - cb - a + ca) / dec ))"
