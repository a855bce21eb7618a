"""One error type for bad input, raised before any work starts.

Every message names the parameter, the value it got and what is allowed, so a reader of a
notebook or a user of the command line sees the problem at once instead of a traceback from
deep inside torch.
"""

from __future__ import annotations

from typing import Any


class ConfigError(ValueError):
    """A parameter has a value that is not allowed. ``param`` names it."""

    def __init__(self, param: str, value: Any, allowed: str):
        self.param = param
        self.value = value
        self.allowed = allowed
        super().__init__(f"{param}={value!r} is not allowed: {allowed}")


class TrainingDivergedError(RuntimeError):
    """The training loss became NaN or infinite."""

    def __init__(self, step: int, loss: float, learning_rate: float):
        self.step = step
        self.loss = loss
        self.learning_rate = learning_rate
        super().__init__(
            f"the training loss became {loss} at step {step} (learning rate {learning_rate:g}); "
            f"try a smaller learning rate, e.g. lr={learning_rate / 4:g}, or gradient clipping"
        )


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


def _range_text(kind: str, minimum: int, maximum: int | None) -> str:
    if maximum is None:
        return f"{kind} >= {minimum}"
    return f"{kind} between {minimum} and {maximum}"
