"""Audio-like classification: WAV clips read with ``wave``, augmented, turned into spectrograms.

CPU vs accelerator balance: mixed.  Each sample reads a small 16-bit PCM WAV file, applies random
gain, time shift and additive noise and computes a log-magnitude STFT on the CPU (vectorised
torch ops, so a worker spends its time in C, not Python).  The model is a small 2D CNN over the
spectrogram, moderately cheap on an accelerator.

Parameters (PARAMS):
    batch_size    samples per batch (16)
    clip_seconds  length of each generated clip (1.0)
    sample_rate   samples per second of the generated clips (16000)
    n_fft         STFT window; hop is n_fft // 4, Hann window; F = n_fft // 2 + 1 (512)
    num_clips     number of WAV files generated, 8 classes (256)
    width         channels of the first conv block; later blocks use 2x and 4x (16)

Data is generated once under ``cfg.data_dir/audio-<rate>-<seconds>s-<n>-seed<seed>/``.
"""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

from adlrec.datasets import materialize

NAME = "audio-cnn"
PARAMS = {"batch_size": 16, "clip_seconds": 1.0, "sample_rate": 16000, "n_fft": 512, "num_clips": 256, "width": 16}

NUM_CLASSES = 8
INDEX = "labels.txt"


def _synth(rng: np.random.Generator, label: int, n: int, rate: int) -> np.ndarray:
    """One clip in [-1, 1]: a class-specific tone/chirp/noise pattern over background noise."""
    t = np.arange(n) / rate
    dur = n / rate
    f0 = rng.uniform(0.8, 1.25)  # per-clip pitch jitter
    if label == 0:  # low tone with harmonics
        x = sum(np.sin(2 * np.pi * 220 * f0 * k * t) / k for k in (1, 2, 3))
    elif label == 1:  # high pure tone
        x = np.sin(2 * np.pi * 3000 * f0 * t)
    elif label in (2, 3):  # linear chirp up or down
        lo, hi = 300 * f0, 4000 * f0
        a, b = (lo, hi) if label == 2 else (hi, lo)
        x = np.sin(2 * np.pi * (a * t + (b - a) * t**2 / (2 * dur)))
    elif label == 4:  # amplitude-modulated tone
        x = np.sin(2 * np.pi * 1000 * f0 * t) * (0.5 + 0.5 * np.sin(2 * np.pi * rng.uniform(4, 10) * t))
    elif label == 5:  # two-tone chord
        x = np.sin(2 * np.pi * 600 * f0 * t) + np.sin(2 * np.pi * 900 * f0 * t)
    elif label == 6:  # band noise around a carrier
        x = rng.normal(0, 1, n) * np.sin(2 * np.pi * 1500 * f0 * t)
    else:  # click train
        x = np.zeros(n)
        x[:: max(1, int(rate / rng.uniform(5, 20)))] = 1.0
        x = np.convolve(x, np.exp(-np.arange(64) / 8.0), mode="same")
    x = x / (np.abs(x).max() + 1e-9) * rng.uniform(0.3, 0.8)
    return np.clip(x + rng.normal(0, 0.02, n), -1.0, 1.0)


def _generate(folder: Path, num_clips: int, n: int, rate: int, seed: int) -> None:
    rng = np.random.default_rng([seed, rate, n, num_clips])
    lines = []
    for i in range(num_clips):
        label = i % NUM_CLASSES
        name = f"{i:06d}.wav"
        pcm = (_synth(rng, label, n, rate) * 32767).astype("<i2")
        with wave.open(str(folder / name), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(rate)
            w.writeframes(pcm.tobytes())
        lines.append(f"{name} {label}\n")
    (folder / INDEX).write_text("".join(lines), encoding="utf-8")


def ensure_data(cfg) -> Path:
    """The dataset folder, generated on first use (atomically, see adlrec.datasets.materialize)."""
    rate, secs, n_clips, seed = int(cfg.sample_rate), float(cfg.clip_seconds), int(cfg.num_clips), int(cfg.seed)
    final = Path(cfg.data_dir) / f"audio-{rate}-{secs:g}s-{n_clips}-seed{seed}"
    return materialize(final, lambda tmp: _generate(tmp, n_clips, max(1, round(secs * rate)), rate, seed))


class WavClips(Dataset):
    """WAV files listed in the index -> augmented log spectrogram [1, F, T]; torch RNG only."""

    def __init__(self, folder: Path, n_fft: int) -> None:
        rows = [line.split() for line in (folder / INDEX).read_text(encoding="utf-8").splitlines()]
        self.files = [folder / name for name, _ in rows]
        self.labels = [int(label) for _, label in rows]
        self.n_fft = n_fft
        self.window = torch.hann_window(n_fft)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        with wave.open(str(self.files[index]), "rb") as w:
            if w.getsampwidth() != 2 or w.getnchannels() != 1:
                raise ValueError(f"{self.files[index]}: expected mono 16-bit PCM")
            frames = w.readframes(w.getnframes())
        x = torch.from_numpy(np.frombuffer(frames, dtype="<i2").astype(np.float32) / 32768.0)
        x = x * 10 ** ((torch.rand(()) * 12 - 6) / 20)  # gain in [-6, +6] dB
        shift = int(torch.randint(-(x.numel() // 10), x.numel() // 10 + 1, ()))
        x = torch.roll(x, shift)
        x = x + torch.randn_like(x) * torch.rand(()) * 0.02
        spec = torch.stft(x, self.n_fft, self.n_fft // 4, window=self.window, return_complex=True)
        return torch.log(spec.abs() + 1e-6).unsqueeze(0), self.labels[index]


class SmallCNN(nn.Module):
    """Three conv-BN-ReLU-maxpool blocks (width w, 2w, 4w), adaptive average pool, linear."""

    def __init__(self, width: int, num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        cin = 1
        for cout in (width, 2 * width, 4 * width):
            layers += [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(), nn.MaxPool2d(2)]
            cin = cout
        self.features = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def build_dataset(cfg) -> WavClips:
    return WavClips(ensure_data(cfg), int(cfg.n_fft))


def build_model(cfg) -> nn.Module:
    return SmallCNN(int(cfg.width))


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output, target)


def raw_files(dataset: WavClips) -> list[Path]:
    return list(dataset.files)
