"""How far apart two colours look (CIELAB, D65): a legend's colours must be told apart."""

from __future__ import annotations


def _lab(color: str) -> tuple[float, float, float]:
    """CIELAB of an sRGB hex colour (D65)."""
    r, g, b = (int(color[i : i + 2], 16) / 255 for i in (1, 3, 5))
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
    x = (0.4124 * lin[0] + 0.3576 * lin[1] + 0.1805 * lin[2]) / 0.95047
    y = 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]
    z = (0.0193 * lin[0] + 0.1192 * lin[1] + 0.9505 * lin[2]) / 1.08883

    def f(v: float) -> float:
        return v ** (1 / 3) if v > 0.008856 else 7.787 * v + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def distance(one: str, two: str) -> float:
    """The CIE76 distance of two hex colours (about 2.3: just noticeable)."""
    return float(sum((p - q) ** 2 for p, q in zip(_lab(one), _lab(two), strict=True)) ** 0.5)
