"""Training Memory, Explained: a static site generator whose every number comes from one memory model."""

__version__ = "0.1.0"
