"""Line charts as inline SVG, drawn on the server.

Why hand-written SVG: a learning curve is a few polylines; SVG needs no JavaScript, no plotting
library in the page, scales with the layout, and embeds as-is in the self-contained HTML report.
Every piece of text is XML-escaped, since names (reward components) come from model-written code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from html import escape

from markupsafe import Markup

PALETTE = ["#2563eb", "#ea580c", "#16a34a", "#9333ea", "#dc2626", "#0891b2", "#ca8a04", "#db2777", "#4b5563", "#65a30d"]


@dataclass
class Series:
    """One line: (x, y) points, optionally a (low, high) band drawn behind it."""

    label: str
    points: list[tuple[float, float]]
    color: str | None = None
    dashed: bool = False
    band: list[tuple[float, float, float]] = field(default_factory=list)  # (x, low, high)


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high] (1, 2, 5 x 10^k steps)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return [0.0]
    if high <= low:
        return [low]
    raw = (high - low) / max(count, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step - 1e-9) * step
    ticks, value = [], first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


def _fmt(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 10000:
        return f"{value / 1000:.0f}k"
    if abs(value) >= 1000:
        return f"{value / 1000:g}k"
    return f"{value:.3g}"


def line_chart(
    series: list[Series],
    *,
    title: str,
    x_label: str = "env steps",
    y_label: str = "",
    y_range: tuple[float, float] | None = None,
    width: int = 520,
    height: int = 240,
) -> Markup:
    """An SVG chart with axes, ticks, a legend and a tooltip (<title>) on every point."""
    drawn = [s for s in series if s.points]
    left, right, top, bottom = 52, 12, 26, 40
    legend_rows = (len(drawn) + 2) // 3
    height += 16 * legend_rows
    parts = [
        f'<svg class="chart" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg" role="img" '
        f'aria-label="{escape(title)}">',
        f'<text x="{left}" y="16" class="chart-title">{escape(title)}</text>',
    ]
    if not drawn:
        parts.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" class="chart-empty">no data yet</text></svg>')
        return Markup("".join(parts))
    plot = _Plot(left, top, width - left - right, height - top - bottom - 16 * legend_rows, *_ranges(drawn, y_range))
    parts += _axes(plot, x_label, y_label)
    parts += _lines(plot, drawn)
    parts += _legend(plot, drawn)
    parts.append("</svg>")
    return Markup("".join(parts))


@dataclass
class _Plot:
    """The plotting area (in SVG units) and the data ranges it shows."""

    left: float
    top: float
    width: float
    height: float
    x_lo: float
    x_hi: float
    y_lo: float
    y_hi: float

    def sx(self, x: float) -> float:
        return self.left + (x - self.x_lo) / (self.x_hi - self.x_lo) * self.width

    def sy(self, y: float) -> float:
        y = min(max(y, self.y_lo), self.y_hi)
        return self.top + (1 - (y - self.y_lo) / (self.y_hi - self.y_lo)) * self.height


def _ranges(drawn: list[Series], y_range: tuple[float, float] | None) -> tuple[float, float, float, float]:
    """(x_lo, x_hi, y_lo, y_hi): the x axis from 0 (steps) to the last point; y as given, else the data's, padded."""
    xs = [x for s in drawn for x, _ in s.points]
    ys = [y for s in drawn for _, y in s.points if math.isfinite(y)]
    ys += [v for s in drawn for _, lo, hi in s.band for v in (lo, hi) if math.isfinite(v)]
    x_lo, x_hi = min(min(xs), 0.0), max(xs)  # steps: the axis starts at 0
    if x_hi == x_lo:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    if y_range:
        y_lo, y_hi = y_range
    else:
        y_lo, y_hi = (min(ys), max(ys)) if ys else (0.0, 1.0)
        pad = (y_hi - y_lo) * 0.08 or abs(y_hi) * 0.1 or 1.0
        y_lo, y_hi = y_lo - pad, y_hi + pad
    return x_lo, x_hi, y_lo, y_hi


def _axes(plot: _Plot, x_label: str, y_label: str) -> list[str]:
    """Grid lines and ticks, the frame, the axis labels."""
    left, top, plot_w, plot_h, sx, sy = plot.left, plot.top, plot.width, plot.height, plot.sx, plot.sy
    parts = []
    for tick in nice_ticks(plot.y_lo, plot.y_hi, 4):
        if plot.y_lo <= tick <= plot.y_hi:
            parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{sy(tick):.1f}" y2="{sy(tick):.1f}" class="grid"/>')
            parts.append(f'<text x="{left - 6}" y="{sy(tick) + 4:.1f}" text-anchor="end" class="tick">{_fmt(tick)}</text>')
    for tick in nice_ticks(plot.x_lo, plot.x_hi, 5):
        if plot.x_lo <= tick <= plot.x_hi:
            parts.append(f'<text x="{sx(tick):.1f}" y="{top + plot_h + 14}" text-anchor="middle" class="tick">{_fmt(tick)}</text>')
    parts.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" class="frame"/>')
    parts.append(f'<text x="{left + plot_w / 2}" y="{top + plot_h + 30}" text-anchor="middle" class="axis-label">{escape(x_label)}</text>')
    if y_label:
        parts.append(f'<text transform="translate(12 {top + plot_h / 2}) rotate(-90)" text-anchor="middle" class="axis-label">{escape(y_label)}</text>')
    return parts


def _lines(plot: _Plot, drawn: list[Series]) -> list[str]:
    """Each series: its band, its line, and a point with a tooltip at every finite value."""
    sx, sy = plot.sx, plot.sy
    parts = []
    for index, s in enumerate(drawn):
        color = s.color or PALETTE[index % len(PALETTE)]
        if len(s.band) > 1:
            upper = " ".join(f"{sx(x):.1f},{sy(hi):.1f}" for x, _, hi in s.band)
            lower = " ".join(f"{sx(x):.1f},{sy(lo):.1f}" for x, lo, _ in reversed(s.band))
            parts.append(f'<polygon points="{upper} {lower}" fill="{color}" opacity="0.12"/>')
        finite = [(x, y) for x, y in s.points if math.isfinite(y)]
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in finite)
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        parts.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
        for x, y in finite:
            parts.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{color}">'
                         f'<title>{escape(s.label)}: {y:.3g} at {x:g} steps</title></circle>')
    return parts


def _legend(plot: _Plot, drawn: list[Series]) -> list[str]:
    """Three entries a row, below the x axis's label."""
    parts = []
    for index, s in enumerate(drawn):
        color = s.color or PALETTE[index % len(PALETTE)]
        row, column = divmod(index, 3)
        lx, ly = plot.left + column * (plot.width / 3), plot.top + plot.height + 46 + row * 16
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        parts.append(f'<line x1="{lx:.1f}" x2="{lx + 18:.1f}" y1="{ly - 4}" y2="{ly - 4}" stroke="{color}" stroke-width="2"{dash}/>')
        parts.append(f'<text x="{lx + 22:.1f}" y="{ly}" class="legend">{escape(s.label[:28])}</text>')
    return parts
