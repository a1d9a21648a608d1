#!/usr/bin/env bash
# Profile the bundled examples on this machine's GPU, with real data loading, one JSON per curve.
#
#     bench/device_profiles.sh OUT_DIR [DEVICE] [BUDGET_S]
#
# For a GPU machine that has no MLflow store (or no network to one): each curve is measured by
# `adlrec profile ... --no-log --json` and written to OUT_DIR/<name>.json; back where the store is,
# `adlrec profiles import OUT_DIR/*.json` logs them and `adlrec profiles export` adds them to
# profiles/ (docs/profiling.md). DEVICE defaults to cuda; BUDGET_S (seconds per worker count) to 1.5.
# A curve whose sweep fails or overruns its PER_PROFILE_S (default 150) is reported and skipped; the
# script's exit status is the number of such curves, or 99 if it could not start: no OUT_DIR, or a
# mistake in DEVICE or BUDGET_S, which adlrec refuses for the first curve (exit code 2: one line,
# which the script prints and stops on, as it would refuse every curve so). ADLREC (default: "adlrec")
# is the command run; it runs in the checkout the script belongs to, whatever the current folder.
set -u
if [ $# -lt 1 ] || [ -z "$1" ]; then
  echo "usage: bench/device_profiles.sh OUT_DIR [DEVICE] [BUDGET_S]" >&2
  exit 99
fi
out=$1
device=${2:-cuda}
budget=${3:-1.5}
limit=${PER_PROFILE_S:-150}
read -r -a adlrec <<<"${ADLREC:-adlrec}"
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 99
cd "$(dirname "$0")/.." || exit 99  # the examples' paths are relative to the checkout

# name | model.py | --param overrides: the examples as shipped, and each with a model heavy enough
# for the accelerator's step to matter, so the curves differ in where they flatten.
curves=(
  "image-w16|examples/image.py|"
  "image-w16-heavy|examples/image.py|aug=heavy"
  "image-w128|examples/image.py|width=128"
  "audio-w16|examples/audio.py|"
  "text-d64|examples/text.py|"
  "text-d512-l6|examples/text.py|d_model=512 layers=6"
)

failed=0
for entry in "${curves[@]}"; do
  IFS='|' read -r name model params <<<"$entry"
  args=(profile "$model" --device "$device" --budget "$budget" --no-log --json)
  for p in $params; do args+=(--param "$p"); done
  start=$(date +%s)
  if timeout "$limit" "${adlrec[@]}" "${args[@]}" >"$out/$name.json.part" 2>"$out/$name.err" &&
    python3 - "$out/$name.json.part" "$(($(date +%s) - start))" <<'EOF'; then
import json, sys
d = json.load(open(sys.argv[1]))  # not a profile: a traceback, and the curve counts as failed
curve = " ".join(f"{p['throughput']:.0f}" for p in d["points"])
best = max(d["points"], key=lambda p: p["throughput"])
print(f"{d['workload']} {d['params']}: ceiling {d['baseline']['ceiling']:.0f}/s, best {best['workers']} workers "
      f"{best['throughput']:.0f}/s, by workers: {curve} ({sys.argv[2]} s)")
EOF
    mv "$out/$name.json.part" "$out/$name.json"
  else
    rc=$?
    if [ "$rc" -eq 2 ]; then # a mistake in the arguments: the same for every curve
      echo "device_profiles.sh: $(tail -1 "$out/$name.err")" >&2
      rm -f "$out/$name.json.part"
      exit 99
    fi
    failed=$((failed + 1))
    echo "FAILED $name (exit $rc after $(($(date +%s) - start)) s); last lines of its stderr:"
    tail -5 "$out/$name.err"
  fi
done
exit "$failed"
