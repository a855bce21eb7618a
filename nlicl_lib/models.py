r"""Linear self-attention, the GLU feed-forward layer, and stacks of GLU-LSA blocks (Definition 2 (def-models)).

Tokens are rows: ``Z`` has shape ``(batch, tokens, D)`` with tokens $= n + 1$ (the query last)
and $D = d + m + 1$ (input, $m$ feature slots, label). In the paper's column form:

- LSA: $\mathrm{LSA}(Z) = Z + \frac1n P Z M Z^\top Q Z$, $M = \mathrm{diag}(I_n, 0)$, so with
  the context statistic $S = \sum_{i \le n} z_i z_i^\top$ ($D \times D$, formed first: a layer
  costs $O(n D^2)$) every token moves by $z_j \mathrel{+}= \frac1n P S Q z_j$.
- GLU: $z \leftarrow z + W_3\big((W_1 z) \odot (W_2 z)\big)$ per token, width $h$; the gated
  variant puts an activation on the first branch.
- Block: $\mathcal B(Z) = \mathrm{LSA}(Z + G(Z))$; the model is $\mathcal B_L \circ \cdots
  \circ \mathcal B_1$ and reads out $\hat y = -[Z_L]_{D,\,n+1}$ (the query's label entry, negated).

Two attention parametrisations: ``"full"`` learns all of $P, Q \in \mathbb R^{D \times D}$;
``"sparse"`` fixes $P = e_D e_D^\top$ (the value is the label) and learns
$Q = -\mathrm{blkdiag}(\Gamma^\top, 0)$ with $\Gamma$ acting on the features $\psi = (x;
\text{slots})$, the form in which the block is exactly one preconditioned GD step:
$\hat y = \psi_{n+1}^\top \Gamma \frac1n \sum_i y_i \psi_i$.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .errors import check_choice, check_int

ATTENTION_KINDS = ("full", "sparse")
GLU_READS = ("x", "x+slots", "all")
GLU_WRITES = ("slots", "all")
ACTIVATIONS = ("none", "silu", "gelu")
GLU_INITS = ("normal", "small", "large")


class LSA(nn.Module):
    r"""One linear self-attention layer, $Z + \frac1n P Z M Z^\top Q Z$, query masked out.

    ``dim`` is $D$. ``attention="full"`` learns $P, Q$ ($D \times D$ each); ``"sparse"`` learns
    only $\Gamma$ ($(D-1) \times (D-1)$), with $P = e_D e_D^\top$ and
    $Q = -\mathrm{blkdiag}(\Gamma^\top, 0)$.
    """

    def __init__(self, dim: int, attention: str = "full", init_std: float = 0.02):
        super().__init__()
        self.dim = check_int("dim", dim, minimum=2)
        self.attention = check_choice("attention", attention, ATTENTION_KINDS)
        if attention == "full":
            self.p = nn.Parameter(init_std * torch.randn(dim, dim))
            self.q = nn.Parameter(init_std * torch.randn(dim, dim))
        else:
            self.gamma = nn.Parameter(init_std * torch.randn(dim - 1, dim - 1))

    @property
    def P(self) -> torch.Tensor:  # noqa: N802 (the paper's symbol)
        """The value-output matrix $P$ (built from $\\Gamma$ in the sparse form)."""
        if self.attention == "full":
            return self.p
        out = torch.zeros(self.dim, self.dim, dtype=self.gamma.dtype, device=self.gamma.device)
        out[-1, -1] = 1.0
        return out

    @property
    def Q(self) -> torch.Tensor:  # noqa: N802
        """The key-query matrix $Q$ (built from $\\Gamma$ in the sparse form)."""
        if self.attention == "full":
            return self.q
        out = torch.zeros(self.dim, self.dim, dtype=self.gamma.dtype, device=self.gamma.device)
        out[:-1, :-1] = -self.gamma.T
        return out

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """All tokens after the layer: ``(batch, n + 1, D)`` in and out."""
        n = z.shape[1] - 1
        context = z[:, :n, :]
        if self.attention == "sparse":
            psi, labels = z[..., :-1], z[..., -1]
            # g = (1/n) sum_i y_i psi_i; every token's label moves by -psi_j^T Gamma g
            g = torch.einsum("bi,bif->bf", labels[:, :n], psi[:, :n]) / n
            step = torch.einsum("btf,fg,bg->bt", psi, self.gamma, g)
            return torch.cat([psi, (labels - step).unsqueeze(-1)], dim=-1)
        stat = context.transpose(1, 2) @ context  # S = sum_i z_i z_i^T, (batch, D, D)
        update = self.p @ stat @ self.q  # P S Q
        return z + (z @ update.transpose(1, 2)) / n

    def query_label(self, z: torch.Tensor) -> torch.Tensor:
        r"""Only the query's label entry after the layer, $[Z]_{D,n+1} + \frac1n e_D^\top P S Q
        z_{n+1}$, in $O(n D)$ per prompt: the fast path for the last layer. Shape ``(batch,)``."""
        n = z.shape[1] - 1
        query = z[:, n, :]
        if self.attention == "sparse":
            psi, labels = z[:, :n, :-1], z[:, :n, -1]
            g = torch.einsum("bi,bif->bf", labels, psi) / n
            return query[:, -1] - torch.einsum("bf,fg,bg->b", query[:, :-1], self.gamma, g)
        context = z[:, :n, :]
        # e_D^T P S = sum_i (p^T z_i) z_i^T with p the last row of P
        weights = context @ self.p[-1]  # (batch, n)
        row = torch.einsum("bi,bid->bd", weights, context)  # (batch, D)
        return query[:, -1] + torch.einsum("bd,de,be->b", row, self.q, query) / n


class GLU(nn.Module):
    r"""Bilinear GLU feed-forward, per token: $z \leftarrow z + W_3\big((W_1 z) \odot (W_2 z)\big)$.

    ``input_dim`` $d$, ``feature_slots`` $m$, ``width`` $h$. ``reads`` picks which rows of the
    token the branches $W_1, W_2$ see (``"x"``: the input only; ``"x+slots"``; ``"all"``,
    label included); ``writes`` picks where $W_3$ adds (``"slots"`` or ``"all"`` rows).
    ``activation`` other than ``"none"`` makes the gated variant $\mathrm{act}(W_1 z) \odot W_2 z$.
    Each hidden unit of the bilinear form writes one quadratic form of the token.
    """

    def __init__(
        self,
        input_dim: int,
        feature_slots: int,
        width: int,
        reads: str = "x",
        writes: str = "slots",
        activation: str = "none",
        init: str = "normal",
    ):
        super().__init__()
        self.input_dim = check_int("d", input_dim, minimum=1)
        self.feature_slots = check_int("slots", feature_slots, minimum=0)
        self.width = check_int("width", width, minimum=1)
        self.reads = check_choice("glu_reads", reads, GLU_READS)
        self.writes = check_choice("glu_writes", writes, GLU_WRITES)
        self.activation = check_choice("activation", activation, ACTIVATIONS)
        if writes == "slots" and feature_slots < 1:
            check_int("slots", feature_slots, minimum=1)
        dim = input_dim + feature_slots + 1
        n_read = {"x": input_dim, "x+slots": input_dim + feature_slots, "all": dim}[reads]
        n_write = feature_slots if writes == "slots" else dim
        self.w1 = nn.Parameter(torch.empty(width, n_read))
        self.w2 = nn.Parameter(torch.empty(width, n_read))
        self.w3 = nn.Parameter(torch.empty(n_write, width))
        self.reset_parameters(init)

    def reset_parameters(self, init: str = "normal") -> None:
        """``"normal"``: $W_1, W_2 \\sim \\mathcal N(0, 1)$ entries on the input columns and zero
        on the columns that read the slots (so that a stack's slots stay O(1) at any depth
        instead of squaring at each block), and an orthogonal $W_3$ scaled by
        $1/\\sqrt{\\text{inputs read}}$; ``"small"``: all entries $\\mathcal N(0, 0.02^2)$
        (shows the dead-feature failure: one feature direction never grows); ``"large"``:
        $W_1, W_2 \\sim \\mathcal N(0, 2^2)$ and $\\sqrt h$ times an orthogonal $W_3$. How often
        each initialisation loses a feature direction over seeds is measured in chapter 3, not
        assumed here."""
        check_choice("glu_init", init, GLU_INITS)
        with torch.no_grad():
            if init == "large":
                self.w1.normal_(0.0, 2.0)
                self.w2.normal_(0.0, 2.0)
                nn.init.orthogonal_(self.w3)
                self.w3.mul_(math.sqrt(self.w3.shape[1]))
            elif init == "normal":
                self.w1.normal_(0.0, 1.0)
                self.w2.normal_(0.0, 1.0)
                nn.init.orthogonal_(self.w3)
                # keep the written features O(1) whatever the width and input size
                self.w3.mul_(1.0 / math.sqrt(self.w1.shape[1]))
                # The columns that read the slots start at zero (drawn first, so every other
                # weight is what it was): each block starts by writing quadratic forms of x,
                # and the slots stay O(1) at any depth. With N(0, 1) there, each block would
                # square the slots' size and degree (degree 2^L; float32 overflows by L = 5).
                slot_columns = slice(self.input_dim, self.input_dim + self.feature_slots)
                self.w1[:, slot_columns] = 0.0
                self.w2[:, slot_columns] = 0.0
            else:
                for w in (self.w1, self.w2, self.w3):
                    w.normal_(0.0, 0.02)

    def hidden(self, z: torch.Tensor) -> torch.Tensor:
        """The $h$ hidden units $(W_1 z) \\odot (W_2 z)$, shape ``(..., h)``."""
        read = z[..., : self.w1.shape[1]]
        first = read @ self.w1.T
        if self.activation == "silu":
            first = nn.functional.silu(first)
        elif self.activation == "gelu":
            first = nn.functional.gelu(first)
        return first * (read @ self.w2.T)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        out = self.hidden(z) @ self.w3.T
        if self.writes == "all":
            return z + out
        d, m = self.input_dim, self.feature_slots
        return torch.cat([z[..., :d], z[..., d : d + m] + out, z[..., d + m :]], dim=-1)


class Block(nn.Module):
    r"""$\mathcal B(Z) = \mathrm{LSA}(Z + G(Z))$; ``glu=None`` gives a plain LSA layer."""

    def __init__(self, lsa: LSA, glu: GLU | None = None):
        super().__init__()
        self.glu = glu
        self.lsa = lsa

    def features(self, z: torch.Tensor) -> torch.Tensor:
        return z if self.glu is None else self.glu(z)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.lsa(self.features(z))


class InContextRegressor(nn.Module):
    r"""A stack of blocks reading out $\hat y = -[Z_L]_{D,\,n+1}$.

    ``forward(z)`` returns ``(batch,)`` predictions, computing only the query's label entry in
    the last attention layer. ``forward(z, return_stream=True)`` also returns the residual
    stream: a dict ``{"embed": Z_0, "block1.glu": ..., "block1": Z_1, ...}`` of full tensors.
    """

    def __init__(self, blocks: list[Block], input_dim: int, feature_slots: int):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.input_dim = input_dim
        self.feature_slots = feature_slots

    @property
    def depth(self) -> int:
        return len(self.blocks)

    def forward(self, z: torch.Tensor, return_stream: bool = False):
        stream: dict[str, torch.Tensor] = {"embed": z}
        for index, block in enumerate(self.blocks, start=1):
            if block.glu is not None:
                z = block.glu(z)
                if return_stream:
                    stream[f"block{index}.glu"] = z
            if index == self.depth and not return_stream:
                return -block.lsa.query_label(z)
            z = block.lsa(z)
            if return_stream:
                stream[f"block{index}"] = z
        prediction = -z[:, -1, -1]
        return (prediction, stream) if return_stream else prediction
