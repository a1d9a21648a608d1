"""The fingerprint of this machine, read the way a user would check it by hand."""

from __future__ import annotations

import platform
import socket
from pathlib import Path

import psutil

from adlrec.profile.hardware import detect_hardware


def test_this_machine_is_described_by_its_cores_memory_cpu_and_torch():
    import torch

    hw = detect_hardware()
    assert hw.logical_cores == psutil.cpu_count(logical=True) >= 1
    assert hw.physical_cores == psutil.cpu_count(logical=False)
    assert hw.memory_gb == round(psutil.virtual_memory().total / 2**30, 1)  # GiB, to 0.1
    assert hw.torch_version == torch.__version__
    assert hw.platform == f"{platform.system()} {platform.release()} {platform.machine()}"
    assert hw.hostname == socket.gethostname()  # kept with every profile, though not in its fingerprint
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():  # Linux: the first "model name" line, without its label
        names = [line for line in cpuinfo.read_text().splitlines() if line.lower().startswith("model name")]
        if names:
            assert hw.cpu_model == names[0].split(":", 1)[1].strip()
    assert hw.cpu_model and not hw.cpu_model.startswith("model name")
    # GPUs found, or the reason there are none: never an empty list with no word why
    assert bool(hw.gpus) != bool(hw.gpu_note)
