"""PNG figures for reports and comparisons: matplotlib loaded on demand, a figure saved to a folder.

matplotlib is the optional ``plots`` extra; without it the command says how to install it. The
Agg backend is used (files only: no display needed over SSH).
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from memprobe_engine.errors import ConfigError

if TYPE_CHECKING:  # the optional plots extra
    from matplotlib.figure import Figure


def pyplot() -> ModuleType:
    try:
        import matplotlib
    except ModuleNotFoundError:
        raise ConfigError("--plots needs matplotlib, the optional 'plots' extra: pip install 'memprobe[plots]' "
                          "(or pip install matplotlib==3.11.2).") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Figure, folder: Path, name: str) -> Path:
    path = folder / name
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    fig.clf()
    return path
