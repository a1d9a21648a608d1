#!/usr/bin/env bash
# one device run: CUDA tests, GPU profiles of the examples, resize bench on 16 cores
set -o pipefail
export MLFLOW_DISABLE_TELEMETRY=true PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 9
export PYTHONPATH=/tmp/site:$PWD
{ date -u; nvidia-smi -L; nproc; free -g | head -2; python3 -c "import torch,sys;print(sys.version.split()[0], torch.__version__, torch.cuda.get_device_name())"; grep -m1 'model name' /proc/cpuinfo; } 2>&1 | tee $OUT/machine.txt
echo "== pytest ($SECONDS s)"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/integration/test_cuda_profile.py tests/unit/test_device.py 2>&1 | tee $OUT/pytest.txt | tail -8
echo "== profiles ($SECONDS s)"
ADLREC="python3 -m adlrec.cli" PER_PROFILE_S=${PER:-100} bench/device_profiles.sh /tmp/prof cuda ${BUDGET:-1.5} 2>&1 | tee $OUT/profiles.txt
tar czf $OUT/profiles.tgz -C /tmp prof
left=$(( ${DEADLINE:-470} - SECONDS ))
echo "== resize bench ($SECONDS s, $left s left)"
if [ "$left" -gt 60 ]; then
  timeout $left python3 bench/resize.py --repeats 1 2>&1 | tee $OUT/resize.txt
fi
echo "== done ($SECONDS s)"
