"""
Training a sequence model with kNN attention
============================================

:class:`~sktransformer.SequenceAttentionClassifier` takes ``attention="knn"``: each query
attends to its ``n_neighbors`` highest-scoring keys only (the exact top-k, found by
blocks of queries), with the exact gradient of that truncated attention or, with
``gradient="sampled"``, random-walk estimates of the gradient of full softmax attention.

Left: test accuracy on the order task (is token 1 before token 2, in sequences of up to
128 tokens?) of each attention, three seeds each, every other setting the default. The
training takes minutes, so this panel reads the result file that the benchmark writes
(``python benchmarks/bench_sequence.py --study knn-order --seeds 10 11 12 --json
benchmarks/results/knn_attention_order.json``) instead of training here. Every
attention learns the task at this length with the defaults; kNN attention with 8 or 32
keys ends a little above softmax attention. Right: the time
of one block's training step (forward and backward) against the sequence length,
measured here. The exact top-k still scores every key, so its time grows as ``L^2`` like
softmax attention's; on a CPU, torch's flash-attention kernel is faster.
"""

# %%
import json
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch

from sktransformer.sequence import KernelAttention

try:
    HERE = Path(__file__).resolve().parent
except NameError:  # sphinx-gallery runs it in its folder, with no __file__
    HERE = Path.cwd()
RESULTS = HERE.parent / "benchmarks" / "results"
with open(RESULTS / "knn_attention_order.json") as f:
    runs = json.load(f)["rows"]
accuracy = {}
for run in runs:
    accuracy.setdefault(run["model"], []).append(run["accuracy"])
for name, values in accuracy.items():
    print(f"{name}: test accuracy {np.mean(values):.3f} (seeds: "
          f"{', '.join(f'{v:.3f}' for v in values)})")

# %%
# One block's training step against the length (d_model 64, 2 heads, batch 1).


def step_seconds(attention, length, repeats=3):
    block = KernelAttention(64, 2, 64, attention=attention, n_neighbors=32,
                            generator=torch.Generator().manual_seed(0))
    x = torch.randn(1, length, 64, generator=torch.Generator().manual_seed(1))
    best = float("inf")
    for _ in range(repeats + 1):  # the first is a warm-up
        start = time.perf_counter()
        block(x.requires_grad_()).square().mean().backward()
        best = min(best, time.perf_counter() - start)
    return best


lengths = [256, 512, 1024, 2048, 4096]
costs = {attention: [step_seconds(attention, n) for n in lengths]
         for attention in ("softmax", "knn", "kernel")}
for attention, seconds in costs.items():
    print(attention, ", ".join(f"L={n}: {1000 * s:.1f} ms" for n, s in zip(lengths, seconds)))

fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
names = list(accuracy)
left.barh(range(len(names)), [np.mean(accuracy[n]) for n in names],
          xerr=[np.std(accuracy[n]) for n in names], color="tab:blue")
left.axvline(0.5, color="gray", linestyle="--", label="chance")
left.set_yticks(range(len(names)), names)
left.set_xlabel("test accuracy, length 128 (3 seeds)")
left.set_xlim(0.4, 1.0)
left.legend()
labels = {"softmax": "softmax (SDPA)", "knn": "kNN, k = 32 (exact top-k)",
          "kernel": "kernel (linear)"}
for attention, seconds in costs.items():
    right.plot(lengths, seconds, "o-", label=labels[attention])
right.set_xscale("log", base=2)
right.set_yscale("log")
right.set_xlabel("sequence length")
right.set_ylabel("seconds per training step (one block)")
right.legend()
fig.tight_layout()
plt.show()
