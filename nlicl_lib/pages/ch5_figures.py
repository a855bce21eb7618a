r"""Chapter 5's figure of the residual stream ("Depth distributes the kernel"); the depth-study
figures are :mod:`nlicl_lib.pages.depth_figures`.

- :func:`residual_stream_figure`: for each stack and each block $\ell$ (two sliders), the label
  entry of every context token in the stream after block $\ell$ next to what Theorem 13
  (thm-depth-bcd) says it holds, $r^{(\ell)}_i = y_i - \hat y_\ell(x_i)$, the residual of the
  first $\ell$ blocks' prediction, with the labels $y_i$ as a baseline.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from nlicl_lib.pages.plots import COLORS, baseline_trace, new_figure, slider_figure, trained_trace
from nlicl_lib.theory.ch5_analysis import StreamResiduals


def residual_stream_figure(residuals: StreamResiduals) -> go.Figure:
    r"""One panel per stack (slider "depth-3 stack" for three-block stacks) and block
    $\ell = 0, \dots, L$ (slider "after block ℓ"): the labels $y_i$, the stream's label entries
    (filled markers) and $y_i - \hat y_\ell(x_i)$ (open circles) against the context index
    $i = 1, \dots, n$. Every stack needs the same $L$ and $n$."""
    names = list(residuals.labels_seen)
    shapes = {tuple(residuals.labels_seen[name].shape) for name in names}
    if len(shapes) != 1:
        raise ValueError(f"every stack needs the same blocks and context length, got {shapes}")
    blocks, n = shapes.pop()
    index = np.arange(1, n + 1)
    panels = {}
    for name in names:
        seen = residuals.labels_seen[name].numpy()
        requeried = residuals.requeried[name].numpy()
        for ell in range(blocks):
            panels[(name, ell)] = [
                baseline_trace(index, seen[0], "labels y_i (block 0)"),
                trained_trace(index, seen[ell], "label entry of token i after block ℓ",
                              mode="markers", marker={"size": 9}),
                go.Scatter(x=index, y=requeried[ell], mode="markers",
                           name="y_i − prediction of the first ℓ blocks",
                           marker={"size": 15, "symbol": "circle-open",
                                   "color": COLORS["theory"], "line": {"width": 2}}),
            ]
    base = new_figure("Context labels in the residual stream", "context example i",
                      "label entry")
    return slider_figure(base, panels, [f"depth-{blocks - 1} stack", "after block ℓ"],
                         [names, list(range(blocks))])
