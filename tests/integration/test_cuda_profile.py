"""The CUDA path of the harness, run for real where a GPU is at hand (skipped elsewhere)."""

from __future__ import annotations

import json

import pytest
import torch

from adlrec.cli import main
from adlrec.profile.hardware import detect_hardware

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")


@needs_cuda
def test_profile_on_cuda_trains_on_the_gpu_with_pinned_memory(tiny_job_path, tmp_path, capsys):
    args = [
        "profile",
        str(tiny_job_path),
        "--device",
        "cuda",
        "--budget",
        "0.5",
        "--max-workers",
        "2",
        "--json",
        "--no-log",
        "--data-dir",
        str(tmp_path),
    ]
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["device"] == {"kind": "cuda", "step_ms": None, "label": "cuda", "emulated": False}
    assert data["hardware"]["gpus"], "NVML should see the GPU torch uses"
    assert all(p["throughput"] > 0 for p in data["points"])


@needs_cuda
def test_hardware_fingerprint_lists_the_gpus_nvml_sees():
    hw = detect_hardware()
    assert len(hw.gpus) == torch.cuda.device_count()
    assert hw.gpus[0].memory_gb > 0 and hw.gpu_note == ""


def test_without_a_gpu_the_fingerprint_says_why():
    hw = detect_hardware()
    if hw.gpus:
        pytest.skip("this machine has a GPU")
    assert hw.gpu_note  # e.g. "NVML unavailable: NVML Shared Library Not Found"
