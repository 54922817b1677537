#!/usr/bin/env bash
# scripts/bench/replay_1gb.sh BINARY [DIR]: the ~1 GB, 8-rank Kineto replay benchmark.
# Generates the traces into DIR (default /tmp/clustersim-big-kineto) with big_kineto.py when they
# are not there yet (REPEAT=N in the environment passes --repeat N), then runs
#   /usr/bin/time -v BINARY replay DIR/worker0_*.json ... DIR/worker7_*.json -q --json DIR/out.json
# and prints user CPU seconds, elapsed seconds, max RSS and each rank's replayed_s from the JSON.
# Exits non-zero when the replay fails. The target: under 60 s and 4 GiB.
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 BINARY [DIR]" >&2
  exit 2
fi
bin="$1"
dir="${2:-/tmp/clustersim-big-kineto}"
here="$(cd "$(dirname "$0")" && pwd)"
[ -x "$bin" ] || { echo "replay_1gb: $bin is not an executable" >&2; exit 2; }

if [ ! -x /usr/bin/time ]; then
  echo "replay_1gb: /usr/bin/time missing; installing the 'time' package" >&2
  if [ "$(id -u)" = 0 ]; then apt-get install -y -q time >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q time >/dev/null; }
  else sudo apt-get install -y -q time >/dev/null; fi
fi

traces=()
have_all() {
  traces=()
  local r f
  for r in 0 1 2 3 4 5 6 7; do
    f=("$dir"/worker"$r"_*.json)
    [ "${#f[@]}" = 1 ] && [ -f "${f[0]}" ] || return 1
    traces+=("${f[0]}")
  done
}
if ! have_all; then
  python3 "$here/big_kineto.py" --out "$dir" ${REPEAT:+--repeat "$REPEAT"}
  have_all || { echo "replay_1gb: $dir does not hold one worker<r>_*.json per rank 0..7" >&2; exit 1; }
fi
bytes=$(cat "${traces[@]}" | wc -c)
echo "traces: ${#traces[@]} files, $bytes bytes in $dir"

stats="$dir/time.txt"
out="$dir/out.json"
rm -f "$out" "$stats"
rc=0
/usr/bin/time -v -o "$stats" "$bin" replay "${traces[@]}" -q --json "$out" || rc=$?
if [ "$rc" != 0 ]; then
  [ -f "$stats" ] && cat "$stats" >&2
  echo "replay_1gb: the replay failed (exit $rc)" >&2
  exit "$rc"
fi

python3 - "$stats" "$out" <<'EOF'
import json, sys
stats, out = sys.argv[1], sys.argv[2]
v = {}
for line in open(stats):
    k, _, val = line.strip().rpartition(": ")
    v[k] = val
user = float(v["User time (seconds)"])
sys_s = float(v["System time (seconds)"])
el = 0.0
for part in v["Elapsed (wall clock) time (h:mm:ss or m:ss)"].split(":"):
    el = el * 60 + float(part)
rss_kb = int(v["Maximum resident set size (kbytes)"])
print("user CPU s   %.2f" % user)
print("system s     %.2f" % sys_s)
print("elapsed s    %.2f" % el)
print("max RSS MB   %.1f (MiB; %.3f GiB)" % (rss_kb / 1024, rss_kb / 1024**2))
ranks = json.load(open(out))["ranks"]
for r in ranks:
    print("rank %d replayed_s %.6f (measured_s %.6f)" % (r["rank"], r["replayed_s"], r["measured_s"]))
ok = el < 60 and rss_kb < 4 * 1024**2
print("within 60 s and 4 GiB: %s" % ("yes" if ok else "NO"))
EOF
