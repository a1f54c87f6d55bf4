"""overlay: carry a small, attributed patch series on pinned upstream commits."""

__version__ = "0.1.0"
DISTRIBUTION = "overlay-series"  # the distribution's name (not published on a package index); the command is `overlay`
# How a user of a checkout adds an extra (what the hints say; `make` does it for its targets).
EXTRA_HINT = "pip install -e '.[{extra}]' in the overlay checkout"
