"""A chart PNG read with Pillow: its size, lines on the page (not one colour, and enough of them),
and a target drawn in red — what `local bench`'s tests and the docs' recorded charts check."""

from __future__ import annotations

from pathlib import Path
from typing import IO


def assert_a_chart(path: Path | IO[bytes], size: tuple[int, int]) -> None:
    from PIL import Image

    with Image.open(path) as image:
        assert image.format == "PNG" and image.size == size
        gray = image.convert("L")
        low, high = gray.getextrema()
        assert high - low > 100  # lines on the page, not one colour
        histogram = gray.histogram()
        assert sum(histogram[:200]) > 0.01 * image.size[0] * image.size[1]  # and enough of them
        colours = image.convert("RGB").getcolors(maxcolors=1 << 16) or []
        assert any(r > 200 and g < 80 and b < 80 for _, (r, g, b) in colours)  # the target, in red
