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
from dataclasses import dataclass, replace
from typing import NamedTuple

import torch
from torch import nn

from nlicl_lib.core.errors import ConfigError, check_choice, check_float, check_int
from nlicl_lib.core.monomials import (
    evaluate_monomials,
    monomial_count,
    monomial_exponents,
    quadratic_form_matrix,
)
from nlicl_lib.core.seeding import seed_everything
from nlicl_lib.core.tasks import TaskConfig

ATTENTION_KINDS = ("full", "sparse")
GLU_READS = ("x", "x+slots", "all")
GLU_WRITES = ("slots", "all")
ACTIVATIONS = ("none", "silu", "gelu")
GLU_INITS = ("normal", "small", "large")


def orthogonal_(weight: torch.Tensor) -> torch.Tensor:
    """Fill ``weight`` (rows x cols) in place with a Haar-random matrix with orthonormal rows
    or columns (whichever are fewer): ``torch.nn.init.orthogonal_``'s draw (the same normals
    from the same generator, the QR signs fixed by the diagonal of R), its QR taken in float64.
    The float32 QR that ``orthogonal_`` would take depends on the CPU's LAPACK kernels (seen:
    up to 1.3e-7 of the entries between an Intel and an AMD machine); in float64 the matrix
    is the same on every CPU to float64 rounding, so a seed gives the same model."""
    rows, cols = weight.shape
    normal = weight.new_empty(rows, cols).normal_(0.0, 1.0).double()
    q, r = torch.linalg.qr(normal if rows >= cols else normal.T)
    q = q * torch.sign(torch.diagonal(r))
    return weight.copy_(q if rows >= cols else q.T)


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

    def extra_repr(self) -> str:
        return f"dim={self.dim}, attention={self.attention!r}"

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
        r"""All tokens after the layer, $Z + \frac1n P S Q Z$ with $S = \sum_{i \le n} z_i
        z_i^\top$: ``(batch, n + 1, D)`` in and out. Chapter 1 shows this function."""
        n = z.shape[1] - 1
        context = z[:, :n, :]
        if self.attention == "sparse":
            psi, labels = z[..., :-1], z[..., -1]
            # g = (1/n) sum_i y_i psi_i;
            # every token's label moves by -psi_j^T Gamma g
            g = torch.einsum("bi,bif->bf", labels[:, :n], psi[:, :n]) / n
            step = torch.einsum("btf,fg,bg->bt", psi, self.gamma, g)
            return torch.cat([psi, (labels - step).unsqueeze(-1)], dim=-1)
        stat = context.transpose(1, 2) @ context  # S = sum_i z_i z_i^T
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
        self.input_dim = check_int("input_dim", input_dim, minimum=1)
        self.feature_slots = check_int("feature_slots", feature_slots, minimum=0)
        self.width = check_int("width", width, minimum=1)
        self.reads = check_choice("glu_reads", reads, GLU_READS)
        self.writes = check_choice("glu_writes", writes, GLU_WRITES)
        self.activation = check_choice("activation", activation, ACTIVATIONS)
        if writes == "slots" and feature_slots < 1:
            check_int("feature_slots", feature_slots, minimum=1)
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
                orthogonal_(self.w3)
                self.w3.mul_(math.sqrt(self.w3.shape[1]))
            elif init == "normal":
                self.w1.normal_(0.0, 1.0)
                self.w2.normal_(0.0, 1.0)
                orthogonal_(self.w3)
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

    def extra_repr(self) -> str:
        return (f"input_dim={self.input_dim}, feature_slots={self.feature_slots}, "
                f"width={self.width}, reads={self.reads!r}, writes={self.writes!r}, "
                f"activation={self.activation!r}")

    def hidden(self, z: torch.Tensor) -> torch.Tensor:
        """The $h$ hidden units $(W_1 z) \\odot (W_2 z)$, shape ``(..., h)``, the branches
        reading the first rows of ``z`` (as many as ``reads`` says). Chapter 3 shows this
        function."""
        read = z[..., : self.w1.shape[1]]
        first = read @ self.w1.T
        if self.activation == "silu":
            first = nn.functional.silu(first)
        elif self.activation == "gelu":
            first = nn.functional.gelu(first)
        return first * (read @ self.w2.T)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        r"""Every token plus $W_3\big((W_1 z) \odot (W_2 z)\big)$, added to the rows it
        ``writes``: ``(..., D)`` in and out. Chapter 3 shows this function."""
        out = self.hidden(z) @ self.w3.T
        if self.writes == "all":
            return z + out
        d, m = self.input_dim, self.feature_slots
        slots = z[..., d : d + m] + out
        return torch.cat([z[..., :d], slots, z[..., d + m :]], dim=-1)


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


class PromptStatistics(NamedTuple):
    r"""All that a stack in the GD form reads of a batch of prompts
    (:meth:`InContextRegressor.forward_statistics`), in chapter 5's symbols. With the monomial
    basis $b = (x; \phi_2(x))$, the inputs and their degree-2 monomials ($b = x$ for attention
    alone), of size $|b|$:

    - ``mean_feature``: $\bar g = \frac1n \sum_{i \le n} y_i\, b(x_i)$, ``(batch, |b|)``;
    - ``moment``: $\hat S_b = \frac1n \sum_{i \le n} b(x_i) b(x_i)^\top$, ``(batch, |b|, |b|)``
      (empty, ``(batch, 0, 0)``, for one block, which does not read it);
    - ``query``: $b(x_{n+1})$, ``(batch, |b|)``."""

    mean_feature: torch.Tensor
    moment: torch.Tensor
    query: torch.Tensor


def gd_steps(statistics: PromptStatistics,
             preconditioners: torch.Tensor) -> torch.Tensor:
    r"""Chapter 5's recursion from the prompts' statistics: block $\ell$ steps with
    $C_\ell^\top \Gamma_\ell C_\ell$, its preconditioner on the basis $b$ (features
    $\psi_\ell = C_\ell\, b$), and the partial predictor $\hat y_\ell(x) = b(x)^\top
    \omega_\ell$ follows

    $$\omega_0 = 0, \qquad \omega_\ell = \omega_{\ell-1} + C_\ell^\top \Gamma_\ell C_\ell\,
    (\bar g - \hat S_b \omega_{\ell-1}), \qquad \hat y = b(x_{n+1})^\top \omega_L ,$$

    since the context labels after block $\ell - 1$ are the residuals $r^{(\ell-1)}_i = y_i -
    \hat y_{\ell-1}(x_i)$, so that $g_\ell = \frac1n \sum_i r^{(\ell-1)}_i \psi_\ell(x_i) =
    C_\ell (\bar g - \hat S_b \omega_{\ell-1})$. Chapter 5 shows this function.

    ``preconditioners``: the $C_\ell^\top \Gamma_\ell C_\ell$, ``(..., L, |b|, |b|)``; leading
    axes (models) broadcast against the statistics' (``(batch, |b|)``, or ``(..., batch, |b|)``
    per model). A zero one leaves $\omega$ exactly as it was. Returns ``(..., batch)``."""
    mean_feature, moment, query = statistics
    omega = None
    for layer in range(preconditioners.shape[-3]):
        # M-hat omega as a broadcast product, not a tiny matmul per prompt
        residual = mean_feature if omega is None else (
            mean_feature - (moment * omega.unsqueeze(-2)).sum(-1))
        step = residual @ preconditioners[..., layer, :, :].transpose(-1, -2)
        omega = step if omega is None else omega + step
    return (omega * query).sum(-1)


class InContextRegressor(nn.Module):
    r"""A stack of blocks reading out $\hat y = -[Z_L]_{D,\,n+1}$.

    ``forward(z)`` returns ``(batch,)`` predictions, computing only the query's label entry in
    the last attention layer. ``forward(z, return_stream=True)`` also returns the residual
    stream: a dict ``{"embed": Z_0, "block1.glu": ..., "block1": Z_1, ...}`` of full tensors.
    ``forward(statistics)``, with the :class:`PromptStatistics` of the prompts
    (:meth:`prompt_statistics`), is the same function through :meth:`forward_statistics`, for
    stacks in the GD form (:attr:`gd_form`).
    """

    def __init__(self, blocks: list[Block], input_dim: int, feature_slots: int):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.input_dim = input_dim
        self.feature_slots = feature_slots

    @property
    def depth(self) -> int:
        return len(self.blocks)

    def extra_repr(self) -> str:
        return f"input_dim={self.input_dim}, feature_slots={self.feature_slots}"

    @property
    def gd_form(self) -> bool:
        """Every attention layer sparse (the value is the label) and every GLU bilinear, reading
        $x$ and writing the slots: the stacks :meth:`forward_statistics` computes."""
        return all(block.lsa.attention == "sparse" and (
            block.glu is None or (block.glu.reads == "x" and block.glu.writes == "slots"
                                  and block.glu.activation == "none"))
            for block in self.blocks)

    def prompt_statistics(self, x: torch.Tensor, y: torch.Tensor, moment: bool | None = None
                          ) -> PromptStatistics:
        r"""$\bar g$, $\hat S_b$ and $b(x_{n+1})$ of the prompts with inputs ``x`` ``(batch, n + 1,
        d)`` and labels ``y`` ``(batch, n + 1)`` (the query's label is not read); $b = (x;
        \phi_2(x))$ when the stack has GLUs, else $x$. They do not depend on the weights.
        ``moment``: whether to compute $\hat S_b$ (default: when the stack has more than one
        block)."""
        if not self.gd_form:
            raise ConfigError("model", self.extra_repr(), "a stack in the GD form (sparse "
                              "attention, bilinear GLUs reading x and writing the slots)")
        n = x.shape[1] - 1
        degrees = [1, 2] if any(block.glu is not None for block in self.blocks) else [1]
        basis = evaluate_monomials(x, monomial_exponents(self.input_dim, degrees))  # b(x_i)
        context = basis[:, :n]
        mean_feature = torch.einsum("bi,bik->bk", y[:, :n], context) / n
        # one block reads no M-hat (omega_1 = C_1^T Gamma_1 C_1 g-bar): an empty one saves
        # O(n |b|^2) per prompt
        if self.depth > 1 if moment is None else moment:
            second = context.transpose(1, 2) @ context / n
        else:
            second = context.new_zeros(x.shape[0], 0, 0)
        return PromptStatistics(mean_feature, second, basis[:, n])

    @property
    def statistics_size(self) -> int:
        r"""$|b|$, the size of the basis $b$: $d + p_2$ for a stack with GLUs, else $d$."""
        glus = any(block.glu is not None for block in self.blocks)
        return self.input_dim + (monomial_count(self.input_dim, 2) if glus else 0)

    def preconditioners(self) -> torch.Tensor:
        r"""Every block's step on the basis $b = (x; \phi_2)$ of a stack in the GD form,
        $C_\ell^\top \Gamma_\ell C_\ell$, ``(L, |b|, |b|)`` (:func:`gd_steps`). Block $\ell$'s GLU
        adds $W_3 U_\ell\, \phi_2(x)$ to the slots (row $u$ of $U_\ell$: the coefficients of
        unit $u$'s $(a_u^\top x)(b_u^\top x)$), so its features are $\psi_\ell = C_\ell\, b$ with
        $C_\ell = \mathrm{blkdiag}(I_d, \sum_{\ell' \le \ell} W_3^{(\ell')} U_{\ell'})$."""
        d, m = self.input_dim, self.feature_slots
        gamma = self.blocks[0].lsa.gamma
        slots = gamma.new_zeros(m, self.statistics_size - d)  # the slots' map so far
        top = torch.cat([torch.eye(d, dtype=gamma.dtype, device=gamma.device),
                         slots.new_zeros(d, slots.shape[1])], dim=1)
        steps = []
        for block in self.blocks:
            if block.glu is not None:
                glu = block.glu
                slots = slots + glu.w3 @ quadratic_form_matrix(glu.w1, glu.w2, d)
            features = torch.cat([top, torch.cat([slots.new_zeros(m, d), slots], dim=1)])  # C_l
            steps.append(features.T @ block.lsa.gamma @ features)
        return torch.stack(steps)

    def forward_statistics(self, statistics: PromptStatistics) -> torch.Tensor:
        r"""The predictions of a stack in the GD form (:attr:`gd_form`) from the prompts'
        statistics alone, in $O(|b|^2)$ per prompt and block whatever $n$: :func:`gd_steps`
        with the stack's :meth:`preconditioners`. The same function as :meth:`forward` on the
        tokens (tested in float64)."""
        return gd_steps(statistics, self.preconditioners())

    def forward(self, z: torch.Tensor | PromptStatistics, return_stream: bool = False
                ) -> torch.Tensor | tuple[torch.Tensor, dict[str, torch.Tensor]]:
        if isinstance(z, PromptStatistics):
            if return_stream:
                raise ConfigError("return_stream", True, "False: statistics carry no tokens")
            return self.forward_statistics(z)
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


MODEL_KINDS = ("lsa", "glu-lsa")


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    r"""Which model: ``kind`` ``"lsa"`` (attention only) or ``"glu-lsa"``; ``depth`` $L$;
    ``feature_slots`` $m$ and ``glu_width`` $h$ (``None``: $p_2$ of the task's $d$, and $h = m$).

    ``glu_init`` (``None``: ``"large"`` for one block reading $x$, else ``"normal"``, whose
    slot-reading weights start at zero; see :meth:`~nlicl_lib.core.models.GLU.reset_parameters`).
    ``attention`` (``"full"`` $P, Q$ or ``"sparse"``: value = label, $\Gamma$ on the features)
    defaults to full for LSA and sparse for GLU-LSA; ``glu_reads`` defaults to ``"x"``, and to
    ``"x+slots"`` for deeper stacks on polynomial tasks of degree 3 or more (so a GLU can
    multiply $x$ by a stored feature; a degree-2 target needs only quadratic forms of $x$, and
    slots read again would only add features of degree up to $2^L$, heavy-tailed in $x$).
    """

    kind: str = "lsa"
    depth: int = 1
    feature_slots: int | None = None
    glu_width: int | None = None
    attention: str | None = None
    glu_reads: str | None = None
    glu_writes: str = "slots"
    activation: str = "none"
    glu_init: str | None = None
    attention_init_std: float = 0.02

    def __post_init__(self) -> None:
        check_choice("model", self.kind, MODEL_KINDS)
        object.__setattr__(self, "depth", check_int("depth", self.depth, minimum=1))
        if self.feature_slots is not None:
            minimum = 1 if self.kind == "glu-lsa" and self.glu_writes == "slots" else 0
            object.__setattr__(self, "feature_slots",
                               check_int("feature_slots", self.feature_slots, minimum=minimum))
        if self.glu_width is not None:
            object.__setattr__(self, "glu_width", check_int("glu_width", self.glu_width, minimum=1))
        if self.attention is not None:
            check_choice("attention", self.attention, ATTENTION_KINDS)
        if self.glu_reads is not None:
            check_choice("glu_reads", self.glu_reads, GLU_READS)
        check_choice("glu_writes", self.glu_writes, GLU_WRITES)
        check_choice("activation", self.activation, ACTIVATIONS)
        if self.glu_init is not None:
            check_choice("glu_init", self.glu_init, GLU_INITS)
        check_float("attention_init_std", self.attention_init_std, minimum=0.0)
        if self.kind == "lsa" and (self.glu_width is not None):
            raise ConfigError("glu_width", self.glu_width, "no GLU width for model 'lsa'")

    def resolved(self, task: TaskConfig) -> ModelConfig:
        """Fill the ``None`` defaults for ``task``."""
        slots = self.feature_slots
        if slots is None:
            slots = 0 if self.kind == "lsa" else monomial_count(task.input_dim, 2)
        width = self.glu_width if self.glu_width is not None else (slots if self.kind != "lsa"
                                                                   else None)
        attention = self.attention or ("full" if self.kind == "lsa" else "sparse")
        needs_products = task.kind == "poly" and task.degree > 2
        reads = self.glu_reads or ("x+slots" if self.depth > 1 and needs_products else "x")
        # One block reading x trains to its optimum from the larger initialisation for nearly
        # every seed (chapter 3's initialisation study); stacks keep the smaller one, whose
        # slot-reading weights start at zero, so the slots stay O(1) at any depth.
        init = self.glu_init or ("large" if self.depth == 1 and reads == "x" else "normal")
        return replace(self, feature_slots=slots, glu_width=width, attention=attention,
                       glu_reads=reads, glu_init=init)


def build_model(config: ModelConfig, task: TaskConfig, device: torch.device | str = "cpu",
                seed: int = 0, dtype: torch.dtype = torch.float32) -> InContextRegressor:
    """A freshly initialised model for ``task``; initialisation is seeded by ``seed``."""
    config = config.resolved(task)
    seed_everything(seed)
    d, m = task.input_dim, config.feature_slots
    dim = d + m + 1
    blocks = []
    for _ in range(config.depth):
        glu = None
        if config.kind == "glu-lsa":
            glu = GLU(d, m, config.glu_width, config.glu_reads, config.glu_writes,
                      config.activation, config.glu_init)
        blocks.append(Block(LSA(dim, config.attention, config.attention_init_std), glu))
    return InContextRegressor(blocks, d, m).to(device=torch.device(device), dtype=dtype)
