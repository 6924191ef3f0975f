"""The "SIMT and warps" chapter: its figures and models are in ``diagrams``."""
