"""One error type for bad input, raised before any work starts.

Every message names the parameter, the value it got and what is allowed, so a reader of a
notebook or a user of the command line sees the problem at once instead of a traceback from
deep inside torch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any


class ConfigError(ValueError):
    """A parameter has a value that is not allowed. ``param`` names it as the library spells
    it (a field name such as ``context_length``, or a short name such as ``d``); an entry point
    with its own spelling (the command line's ``--n``) shows :meth:`spelled`."""

    def __init__(self, param: str, value: Any, allowed: str):
        self.param = param
        self.value = value
        self.allowed = allowed
        super().__init__(f"{param}={value!r} is not allowed: {allowed}")

    def spelled(self, names: Mapping[str, str]) -> str:
        """The message with the parameter named as ``names`` spells it (e.g. ``{"context_length":
        "--n"}``): the parameter itself, also where the explanation mentions it (unless it is a
        one-letter name), and every other field name there (one with an underscore, so that no
        ordinary word is touched)."""
        param = names.get(self.param, self.param)
        fields = sorted((k for k in names if "_" in k or (k == self.param and len(k) > 1)),
                        key=len, reverse=True)
        allowed = self.allowed
        if fields:
            pattern = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, fields)) + r")(?![\w-])")
            allowed = pattern.sub(lambda match: names[match.group(1)], allowed)
        return f"{param}={self.value!r} is not allowed: {allowed}"


class TrainingDivergedError(RuntimeError):
    """The training loss became NaN or infinite after updates from weights whose forward pass
    was finite: a too-large step (see :class:`ForwardOverflowError` for the other cause)."""

    def __init__(self, step: int, loss: float, learning_rate: float):
        self.step = step
        self.loss = loss
        self.learning_rate = learning_rate
        super().__init__(self._message())

    def _message(self) -> str:
        return (f"the training loss became {self.loss} at step {self.step} (learning rate "
                f"{self.learning_rate:g}); try a smaller learning rate, e.g. "
                f"lr={self.learning_rate / 4:g}, or gradient clipping")


class ForwardOverflowError(TrainingDivergedError):
    """The model's forward pass overflows at its initial weights (the residual stream becomes
    infinite, NaN or huge before any update), so no learning rate can help. ``block``: where
    the stream first does so (1-based; ``part`` says whether after the block's GLU or the whole
    block); ``peak``: its largest entry there (``inf``/``nan`` when not finite); ``scale``: the
    largest entry of the embedded prompts, for comparison; ``remedies``: what to change
    (default: fewer blocks or a smaller initialisation); ``before``: the stream's largest entry
    just before ``block`` (``None``: not known)."""

    def __init__(self, step: int, loss: float, learning_rate: float, block: int, peak: float,
                 scale: float, part: str = "block", remedies: str | None = None,
                 before: float | None = None):
        self.block = block
        self.peak = peak
        self.scale = scale
        self.part = part
        self.remedies = remedies or "fewer blocks (depth) or a smaller initialisation"
        self.before = before
        super().__init__(step, loss, learning_rate)

    def _message(self) -> str:
        where = f"block {self.block}" + ("'s GLU" if self.part == "glu" else "")
        previous = (f" (largest entry {self.before:.3g} just before)"
                    if self.before is not None and self.before != self.scale else "")
        reach = (f"reaches {self.peak:.3g} in {where}{previous}, with the prompts' entries at "
                 f"most {self.scale:.3g}")
        head = (f"the training loss became {self.loss} at step {self.step} (learning rate "
                f"{self.learning_rate:g})")
        if self.step == 0:
            cause = ("because the model's forward pass overflows at initialisation, before any "
                     f"update: the residual stream {reach}")
        else:
            cause = ("but the model's forward pass already overflows at initialisation: on that "
                     f"step's prompts the initial weights' residual stream {reach}")
        return (f"{head}, {cause}; a smaller learning rate cannot help (this is not a too-large "
                f"step); use {self.remedies}")


def check_int(param: str, value: Any, minimum: int = 1, maximum: int | None = None) -> int:
    """Return ``value`` as an int, or raise :class:`ConfigError` if it is not an integer in range."""
    if isinstance(value, bool) or not isinstance(value, int):
        # Accept numpy / torch integer scalars and integral floats from sliders, nothing else.
        try:
            as_int = int(value)
        except (TypeError, ValueError):
            as_int = None
        if as_int is None or as_int != value:
            raise ConfigError(param, value, _range_text("an integer", minimum, maximum))
        value = as_int
    if value < minimum or (maximum is not None and value > maximum):
        raise ConfigError(param, value, _range_text("an integer", minimum, maximum))
    return value


def check_float(
    param: str,
    value: Any,
    minimum: float | None = None,
    strict_minimum: bool = False,
    maximum: float | None = None,
) -> float:
    """Return ``value`` as a finite float, or raise :class:`ConfigError` naming ``param``."""
    try:
        as_float = float(value)
    except (TypeError, ValueError):
        raise ConfigError(param, value, "a finite number") from None
    if as_float != as_float or as_float in (float("inf"), float("-inf")):
        raise ConfigError(param, value, "a finite number")
    if minimum is not None:
        if strict_minimum and as_float <= minimum:
            raise ConfigError(param, value, f"a number > {minimum:g}")
        if not strict_minimum and as_float < minimum:
            raise ConfigError(param, value, f"a number >= {minimum:g}")
    if maximum is not None and as_float > maximum:
        raise ConfigError(param, value, f"a number <= {maximum:g}")
    return as_float


def check_choice(param: str, value: Any, choices: tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``choices``, else raise :class:`ConfigError`."""
    if value not in choices:
        raise ConfigError(param, value, "one of " + ", ".join(repr(c) for c in choices))
    return value


def format_bytes(value: float) -> str:
    """A size in a message: ``"768 MiB"``, ``"3.2 GiB"``, ``"1.5 TiB"`` (binary units)."""
    for unit, size in (("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30)):
        if value >= size:
            return f"{value / size:,.1f} {unit}"
    return f"{value / 2**20:,.0f} MiB"


def _range_text(kind: str, minimum: int, maximum: int | None) -> str:
    if maximum is None:
        return f"{kind} >= {minimum}"
    return f"{kind} between {minimum} and {maximum}"
