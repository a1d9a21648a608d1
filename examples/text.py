"""Text classification: a pure-Python WordPiece tokenizer feeding a small Transformer encoder.

CPU vs accelerator balance: CPU-bound in the workers.  Each sample seeks to its line in one
UTF-8 corpus file, then normalises, regex-splits and greedy longest-match WordPiece-tokenizes it
in pure Python (hundreds of dict lookups, GIL-bound: only more worker processes help).  The
model (embedding + 2-layer Transformer on 128 tokens) is light for an accelerator.

Parameters (PARAMS):
    batch_size  samples per batch (32)
    seq_len     token ids per sample, truncated or padded with [PAD] (128)
    num_docs    documents generated, 4 classes (2000)
    d_model     Transformer width, a multiple of 4 heads (64)
    layers      Transformer encoder layers (2)

Data (corpus.txt, one ``<label>\\t<text>`` document per line, and vocab.txt, the WordPiece
vocabulary built from it) is generated once under ``cfg.data_dir/text-<n>-seed<seed>/``.
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections import Counter
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

from adlrec.datasets import materialize

NAME = "text-transformer"
PARAMS = {"batch_size": 32, "seq_len": 128, "num_docs": 2000, "d_model": 64, "layers": 2}

NUM_CLASSES = 4
VOCAB_SIZE = 4096
SPECIALS = ("[PAD]", "[UNK]", "[CLS]")  # ids 0, 1, 2
PRE_SPLIT = re.compile(r"[^\W\d_]+|\d+|[^\w\s]")
MAX_WORD = 64


def normalize(text: str) -> str:
    """Lowercase and strip accents (NFD, drop combining marks), as an uncased BERT tokenizer does."""
    return "".join(c for c in unicodedata.normalize("NFD", text.lower()) if unicodedata.category(c) != "Mn")


def _lexicon(rng: random.Random, size: int) -> list[str]:
    onsets = "b c d f g h k l m n p r s t v z br kl st tr sh ch th".split()
    vowels = "a e i o u y ai ou é ö å".split()
    words: dict[str, None] = {}
    while len(words) < size:
        stem = "".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(rng.choice((1, 2, 2, 3, 3, 4))))
        words[stem + rng.choice(("", "", "n", "s", "r"))] = None
    return list(words)


def _document(rng: random.Random, common: list[str], topic: list[str]) -> str:
    sentences = []
    for _ in range(rng.randint(1, 6)):
        words = []
        for last in range(rng.randint(4, 18), 0, -1):
            pool = topic if rng.random() < 0.4 else common
            word = pool[int(len(pool) * rng.random() ** 2)]  # Zipf-like: early words are frequent
            if rng.random() < 0.03:
                word = str(rng.randint(0, 2025))
            words.append(word + ("," if last > 1 and rng.random() < 0.08 else ""))
        sentences.append(" ".join(words).capitalize() + rng.choice(".!?."))
    return " ".join(sentences)


def _build_vocab(word_counts: Counter[str]) -> list[str]:
    """Every character (alone and as ``##c``), then the most frequent word prefixes and ``##`` pieces."""
    chars = sorted({c for w in word_counts for c in w})
    base = list(SPECIALS) + chars + ["##" + c for c in chars]
    pieces: Counter[str] = Counter()
    for word, count in word_counts.items():
        for end in range(2, min(len(word), 10) + 1):
            pieces[word[:end]] += count
        for start in range(1, len(word)):
            for end in range(start + 2, min(len(word), start + 6) + 1):
                pieces["##" + word[start:end]] += count
    ranked = sorted(pieces.items(), key=lambda kv: (-kv[1], kv[0]))
    return base + [p for p, _ in ranked[: VOCAB_SIZE - len(base)]]


def _generate(folder: Path, num_docs: int, seed: int) -> None:
    rng = random.Random(f"text-{num_docs}-{seed}")
    lexicon = _lexicon(rng, 3000)
    common, topics = lexicon[:1000], [lexicon[1000 + 500 * k : 1500 + 500 * k] for k in range(NUM_CLASSES)]
    counts: Counter[str] = Counter()
    with open(folder / "corpus.txt", "w", encoding="utf-8", newline="\n") as f:
        for _ in range(num_docs):
            label = rng.randrange(NUM_CLASSES)
            doc = _document(rng, common, topics[label])
            counts.update(PRE_SPLIT.findall(normalize(doc)))
            f.write(f"{label}\t{doc}\n")
    (folder / "vocab.txt").write_text("\n".join(_build_vocab(counts)) + "\n", encoding="utf-8")


def ensure_data(cfg) -> Path:
    """The dataset folder, generated on first use (atomically, see adlrec.datasets.materialize)."""
    n, seed = int(cfg.num_docs), int(cfg.seed)
    final = Path(cfg.data_dir) / f"text-{n}-seed{seed}"
    return materialize(final, lambda tmp: _generate(tmp, n, seed))


class WordPieceDocs(Dataset):
    """One document per line; only byte offsets are indexed up front, text is read per sample."""

    def __init__(self, folder: Path, seq_len: int) -> None:
        self.path = folder / "corpus.txt"
        tokens = (folder / "vocab.txt").read_text(encoding="utf-8").splitlines()
        if len(tokens) > VOCAB_SIZE:
            raise ValueError(f"{folder}/vocab.txt has {len(tokens)} entries, more than {VOCAB_SIZE}")
        self.vocab = {tok: i for i, tok in enumerate(tokens)}
        self.seq_len = seq_len
        self.offsets: list[int] = []
        with open(self.path, "rb") as f:
            pos = 0
            for line in f:
                self.offsets.append(pos)
                pos += len(line)

    def __len__(self) -> int:
        return len(self.offsets)

    def wordpiece(self, word: str) -> list[int]:
        if len(word) > MAX_WORD:
            return [1]
        ids, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    ids.append(self.vocab[piece])
                    start = end
                    break
            else:
                return [1]  # no piece matches: the whole word is [UNK]
        return ids

    def encode(self, text: str) -> torch.Tensor:
        ids = [2]
        for word in PRE_SPLIT.findall(normalize(text)):
            ids.extend(self.wordpiece(word))
            if len(ids) >= self.seq_len:
                break
        ids = ids[: self.seq_len]
        return torch.tensor(ids + [0] * (self.seq_len - len(ids)), dtype=torch.long)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        with open(self.path, "rb") as f:
            f.seek(self.offsets[index])
            line = f.readline().decode("utf-8")
        label, _, text = line.rstrip("\n").partition("\t")
        return self.encode(text), int(label)


class TextClassifier(nn.Module):
    """Token + position embeddings, Transformer encoder, mean pool over non-pad tokens, linear."""

    def __init__(self, seq_len: int, d_model: int, layers: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB_SIZE, d_model, padding_idx=0)
        self.pos = nn.Embedding(seq_len, d_model)
        layer = nn.TransformerEncoderLayer(d_model, 4, 4 * d_model, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, NUM_CLASSES)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pad = ids == 0
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        x = self.encoder(x, src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).to(x.dtype)
        return self.head((x * keep).sum(1) / keep.sum(1).clamp_min(1.0))


def build_dataset(cfg) -> WordPieceDocs:
    return WordPieceDocs(ensure_data(cfg), int(cfg.seq_len))


def build_model(cfg) -> nn.Module:
    return TextClassifier(int(cfg.seq_len), int(cfg.d_model), int(cfg.layers))


def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(output, target)


def raw_files(dataset: WordPieceDocs) -> list[Path]:
    return [dataset.path]
