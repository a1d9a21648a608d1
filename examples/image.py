"""Image classification: PNG files decoded and augmented with Pillow, a small ResNet.

CPU vs accelerator balance: input-heavy.  Each sample is a PNG read from disk, decoded, cropped,
resized, flipped (and for ``aug="heavy"`` blurred and colour-jittered) with Pillow, then
normalised; that is a few hundred microseconds to milliseconds of Python/Pillow work per sample.
The model is a small ResNet on 56x56 inputs, cheap on an accelerator, so with too few DataLoader
workers the accelerator waits on input.

Parameters (PARAMS):
    batch_size  samples per batch (32)
    image_size  side of the generated PNGs in pixels (64)
    crop_size   side of the augmented crop fed to the model (56)
    num_images  number of PNGs generated, 10 classes (512)
    aug         "light" (crop + flip) or "heavy" (also blur and colour jitter)
    width       channels of the first ResNet stage; later stages use 2x and 4x (16)

Data is generated once under ``cfg.data_dir/image-<size>-<n>-seed<seed>/`` and reused.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image, ImageDraw, ImageEnhance, ImageFilter
from torch import nn
from torch.utils.data import Dataset

from adlrec.datasets import materialize

NAME = "image-resnet"
PARAMS = {"batch_size": 32, "image_size": 64, "crop_size": 56, "num_images": 512, "aug": "light", "width": 16}

NUM_CLASSES = 10
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
INDEX = "labels.txt"


def _draw_image(rng: np.random.Generator, label: int, size: int) -> Image.Image:
    """A noisy gradient background with a class-specific shape (label % 5) and hue band (label // 5)."""
    ramp = np.linspace(0.0, 1.0, size, dtype=np.float32)
    c0, c1 = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
    t = ramp[None, :, None] if rng.random() < 0.5 else ramp[:, None, None]
    bg = c0 * (1 - t) + c1 * t + rng.normal(0, 12, (size, size, 3))
    img = Image.fromarray(np.clip(bg, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    warm = (int(rng.uniform(150, 255)), int(rng.uniform(0, 120)), int(rng.uniform(0, 80)))
    fill = warm if label < 5 else warm[::-1]  # warm hues for classes 0-4, cool for 5-9
    cx, cy = rng.uniform(0.3, 0.7, 2) * size
    r = rng.uniform(0.15, 0.3) * size
    box = (cx - r, cy - r, cx + r, cy + r)
    kind = label % 5
    if kind == 0:
        draw.ellipse(box, fill=fill)
    elif kind == 1:
        draw.rectangle(box, fill=fill)
    elif kind == 2:
        draw.polygon([(cx, cy - r), (cx - r, cy + r), (cx + r, cy + r)], fill=fill)
    elif kind == 3:
        w = max(2, int(r / 3))
        draw.line([(cx - r, cy), (cx + r, cy)], fill=fill, width=w)
        draw.line([(cx, cy - r), (cx, cy + r)], fill=fill, width=w)
    else:
        for k in range(-2, 3):
            draw.line([(0, cy + k * r / 2), (size, cy + k * r / 2 + r)], fill=fill, width=max(1, int(r / 5)))
    return img


def _generate(folder: Path, num_images: int, size: int, seed: int) -> None:
    rng = np.random.default_rng([seed, size, num_images])
    lines = []
    for i in range(num_images):
        label = i % NUM_CLASSES
        name = f"{i:06d}.png"
        _draw_image(rng, label, size).save(folder / name, format="PNG")
        lines.append(f"{name} {label}\n")
    (folder / INDEX).write_text("".join(lines), encoding="utf-8")


def ensure_data(cfg) -> Path:
    """The dataset folder, generated on first use (atomically, see adlrec.datasets.materialize)."""
    size, n, seed = int(cfg.image_size), int(cfg.num_images), int(cfg.seed)
    final = Path(cfg.data_dir) / f"image-{size}-{n}-seed{seed}"
    return materialize(final, lambda tmp: _generate(tmp, n, size, seed))


def _uniform(lo: float, hi: float) -> float:
    return lo + (hi - lo) * float(torch.rand(()))


class ImageFiles(Dataset):
    """PNG files listed in the index; augmentation draws from torch's RNG (seeded per worker)."""

    def __init__(self, folder: Path, crop_size: int, aug: str) -> None:
        if aug not in ("light", "heavy"):
            raise ValueError(f"aug must be 'light' or 'heavy', got {aug!r}")
        rows = [line.split() for line in (folder / INDEX).read_text(encoding="utf-8").splitlines()]
        self.files = [folder / name for name, _ in rows]
        self.labels = [int(label) for _, label in rows]
        self.crop_size = crop_size
        self.aug = aug
        self.mean = torch.tensor(MEAN).view(3, 1, 1)
        self.std = torch.tensor(STD).view(3, 1, 1)

    def __len__(self) -> int:
        return len(self.files)

    def _crop_box(self, w: int, h: int) -> tuple[int, int, int, int]:
        """Random-resized-crop box: scale in [0.35, 1], aspect ratio in [3/4, 4/3]."""
        for _ in range(10):
            area = w * h * _uniform(0.35, 1.0)
            ratio = math.exp(_uniform(math.log(3 / 4), math.log(4 / 3)))
            cw, ch = round(math.sqrt(area * ratio)), round(math.sqrt(area / ratio))
            if 0 < cw <= w and 0 < ch <= h:
                x = int(torch.randint(0, w - cw + 1, ()))
                y = int(torch.randint(0, h - ch + 1, ()))
                return x, y, x + cw, y + ch
        s = min(w, h)
        return (w - s) // 2, (h - s) // 2, (w + s) // 2, (h + s) // 2

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        with Image.open(self.files[index]) as raw:
            img = raw.convert("RGB")
        box = self._crop_box(*img.size)
        img = img.resize((self.crop_size, self.crop_size), Image.Resampling.BILINEAR, box=box)
        if float(torch.rand(())) < 0.5:
            img = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        if self.aug == "heavy":
            if float(torch.rand(())) < 0.5:
                img = img.filter(ImageFilter.GaussianBlur(radius=_uniform(0.1, 1.5)))
            for enhance in (ImageEnhance.Brightness, ImageEnhance.Contrast, ImageEnhance.Color):
                img = enhance(img).enhance(_uniform(0.6, 1.4))
        x = torch.from_numpy(np.array(img, dtype=np.uint8)).permute(2, 0, 1).float().div_(255.0)
        return (x - self.mean) / self.std, self.labels[index]


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class SmallResNet(nn.Module):
    """Stem conv, three stages of two BasicBlocks (width w, 2w, 4w), global pool, linear."""

    def __init__(self, width: int, num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        stages: list[nn.Module] = []
        cin = width
        for i, cout in enumerate((width, 2 * width, 4 * width)):
            stages += [BasicBlock(cin, cout, 1 if i == 0 else 2), BasicBlock(cout, cout, 1)]
            cin = cout
        self.stages = nn.Sequential(*stages)
        self.head = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def build_dataset(cfg) -> ImageFiles:
    return ImageFiles(ensure_data(cfg), int(cfg.crop_size), str(cfg.aug))


def build_model(cfg) -> nn.Module:
    return SmallResNet(int(cfg.width))


def build_optimizer(model: nn.Module, cfg) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output, target)


def raw_files(dataset: ImageFiles) -> list[Path]:
    return list(dataset.files)
