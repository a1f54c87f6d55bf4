"""overlay: carry a small, attributed patch series on pinned upstream commits."""

__version__ = "0.1.0"
