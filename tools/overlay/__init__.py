"""overlay: carry a small, attributed patch series on pinned upstream commits."""

__version__ = "0.1.0"
DISTRIBUTION = "overlay-series"  # the name on the package index (`overlay` is taken); the command is `overlay`
