"""Fingerprint the machine: CPU, cores, memory, GPUs (through NVML, failing soft), torch."""

from __future__ import annotations

import platform
import socket
from pathlib import Path

import psutil

from adlrec.schemas import GpuInfo, Hardware

__all__ = ["detect_hardware"]


def detect_hardware() -> Hardware:
    import torch

    gpus, note = _nvml_gpus()
    return Hardware(
        cpu_model=_cpu_model(),
        logical_cores=psutil.cpu_count(logical=True) or 1,
        physical_cores=psutil.cpu_count(logical=False),
        memory_gb=round(psutil.virtual_memory().total / 2**30, 1),
        gpus=gpus,
        torch_version=torch.__version__,
        platform=f"{platform.system()} {platform.release()} {platform.machine()}",
        hostname=socket.gethostname(),
        gpu_note=note,
    )


def _cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def _nvml_gpus() -> tuple[tuple[GpuInfo, ...], str]:
    """GPUs seen by NVML, or none with the reason (no library, no driver, no device)."""
    try:
        import pynvml
    except ImportError:
        return (), "nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return (), f"NVML unavailable: {exc}"
    try:
        found = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(handle)
            if isinstance(name, bytes):
                name = name.decode()
            mem = pynvml.nvmlDeviceGetMemoryInfo(handle).total
            found.append(GpuInfo(name=name, memory_gb=round(mem / 2**30, 1)))
        return tuple(found), "" if found else "NVML found no GPU"
    except pynvml.NVMLError as exc:
        return (), f"NVML query failed: {exc}"
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass
