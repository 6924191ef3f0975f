"""The "GPU architecture" chapter: its figures are in ``diagrams``."""
