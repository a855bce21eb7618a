r"""The straightforward references the benchmarks measure the library against.

- :func:`reference_sample_prompts`: linear-regression prompts drawn as the library first did,
  one generator per ``(seed, step)`` and one thread: $x_i \sim \mathcal N(0, I_d)$,
  $w \sim \mathcal N(0, I_d)$, $y_i = w^\top x_i$.
- :class:`ReferenceLSA`: one LSA layer written the way most research code writes it: form the
  full $(n+1) \times (n+1)$ attention matrix of every prompt with ``einsum`` and apply it to all
  tokens. In rows (``Z``: ``(batch, tokens, D)``), $Z + \frac1n P Z M Z^\top Q Z$ reads
  $Z + \frac1n (Z Q^\top Z^\top) M (Z P^\top)$, $M = \mathrm{diag}(I_n, 0)$; it costs
  $O(n^2 D)$ per prompt where the library's associative order costs $O(n D^2)$.
- :func:`reference_train_step`: sample, embed, forward, normalised loss, Adam with the same
  clipping as :func:`nlicl_lib.training.train.train`.
"""

from __future__ import annotations

import torch
from torch import nn

from nlicl_lib.core.seeding import STREAM_TRAIN, generator


def reference_sample_prompts(input_dim: int, context_length: int, batch_size: int, seed: int,
                             step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x, y)``: ``(batch, n + 1, d)`` and ``(batch, n + 1)``, one generator, one thread."""
    gen = generator(seed, STREAM_TRAIN, step, torch.device("cpu"))
    x = torch.randn(batch_size, context_length + 1, input_dim, generator=gen)
    w = torch.randn(batch_size, input_dim, generator=gen)
    return x, torch.einsum("btd,bd->bt", x, w)


def reference_embed(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """$Z_0 = [x; y]$ per token, the query's label zeroed: ``(batch, n + 1, d + 1)``."""
    labels = y.clone()
    labels[:, -1] = 0.0
    return torch.cat([x, labels.unsqueeze(-1)], dim=-1)


class ReferenceLSA(nn.Module):
    """One full LSA layer through the $(n+1) \\times (n+1)$ attention matrix."""

    def __init__(self, dim: int, init_std: float = 0.02):
        super().__init__()
        self.p = nn.Parameter(init_std * torch.randn(dim, dim))
        self.q = nn.Parameter(init_std * torch.randn(dim, dim))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        n = z.shape[1] - 1
        scores = torch.einsum("bjd,ed,bke->bjk", z, self.q, z)  # z_j^T Q^T z_k, (batch, T, T)
        mask = torch.ones(n + 1, device=z.device, dtype=z.dtype)
        mask[n] = 0.0  # the query is neither key nor value
        values = torch.einsum("bkd,ed->bke", z, self.p)  # P z_k
        return z + torch.einsum("bjk,k,bke->bje", scores, mask, values) / n

    def predict(self, z: torch.Tensor) -> torch.Tensor:
        """$\\hat y = -[Z_1]_{D, n+1}$."""
        return -self.forward(z)[:, -1, -1]


def reference_train_step(model: ReferenceLSA, optimizer: torch.optim.Optimizer, input_dim: int,
                         context_length: int, batch_size: int, seed: int, step: int,
                         null_loss: float, grad_clip: float = 1.0) -> float:
    """One training step of the reference; returns the batch loss."""
    x, y = reference_sample_prompts(input_dim, context_length, batch_size, seed, step)
    prediction = model.predict(reference_embed(x, y))
    loss = torch.mean((prediction - y[:, -1]) ** 2)
    optimizer.zero_grad(set_to_none=True)
    (loss / null_loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return loss.item()
