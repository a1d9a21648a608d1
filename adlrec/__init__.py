"""adlrec: profile DataLoader worker curves, predict them, and allocate workers across jobs."""

__all__ = ["__version__"]

__version__ = "0.1.0"
