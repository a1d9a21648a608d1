#!/usr/bin/env bash
# second device run: the CUDA loader test, then one longer-budget profile (does the plateau's scatter shrink?)
set -o pipefail
export MLFLOW_DISABLE_TELEMETRY=true PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 9
export PYTHONPATH=/tmp/site:$PWD
echo "== pytest ($SECONDS s)"
timeout 90 python3 -m pytest -q -p no:cacheprovider -rs tests/integration/test_loader_cuda.py tests/integration/test_cuda_profile.py 2>&1 | tee $OUT/pytest2.txt | tail -6
echo "== profile ($SECONDS s)"
timeout 100 python3 -m adlrec.cli profile examples/image.py --device cuda --budget 4 --max-workers 8 --no-log --json > $OUT/image-w16-budget4.json 2> $OUT/profile2.err
echo "rc=$? ($SECONDS s)"
python3 -c "
import json; d=json.load(open('$OUT/image-w16-budget4.json'))
print(' '.join(f\"{p['workers']}:{p['throughput']:.0f}±{p['rse']*100:.1f}%\" for p in d['points']))" 2>&1
