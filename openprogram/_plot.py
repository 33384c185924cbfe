"""Plot a replay: prompt tokens per turn with and without compaction, tiers marked."""

from __future__ import annotations

from pathlib import Path

from openprogram._errors import OpenProgramError

_COLORS = {
    "offload": "tab:purple",
    "microcompact": "tab:orange",
    "snip": "tab:red",
    "emergency": "black",
}


def check_plot_target(out: Path) -> None:
    """Fail before a long replay, not after it: matplotlib must be installed and the
    plot's folder must exist (it is never created behind the user's back)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as error:
        raise OpenProgramError(
            "--plot needs matplotlib: pip install 'openprogram[bench]'"
        ) from error
    folder = out.parent
    if not folder.is_dir():
        raise OpenProgramError(f"--plot {out}: no folder {folder}")


def plot_replay(
    out: Path,
    title: str,
    history: list[int],
    prompt: list[int],
    fired: list[list[str]],
    budget: int,
) -> None:
    """Write a PNG of per-turn tokens; needs the optional ``bench`` extra (matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        raise OpenProgramError(
            "plotting needs matplotlib: pip install 'openprogram[bench]'"
        ) from error
    turns = list(range(1, len(prompt) + 1))
    figure, axes = plt.subplots(figsize=(10, 4.5))
    axes.plot(turns, history, label="no management", color="tab:gray")
    axes.plot(turns, prompt, label="with compaction", color="tab:blue")
    axes.axhline(budget, linestyle="--", color="tab:green", label=f"budget {budget}")
    seen: set[str] = set()
    for turn, tiers in zip(turns, fired, strict=True):
        for tier in dict.fromkeys(tiers):
            label = tier if tier not in seen else None
            seen.add(tier)
            axes.axvline(turn, color=_COLORS.get(tier, "tab:brown"), alpha=0.35, label=label)
    axes.set_xlabel("assistant turn")
    axes.set_ylabel("prompt tokens")
    axes.set_title(title)
    axes.legend(loc="upper left", fontsize="small")
    figure.tight_layout()
    figure.savefig(out, dpi=110)
    plt.close(figure)
