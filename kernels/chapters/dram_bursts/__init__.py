"""The "DRAM bursts" chapter: its figures and helpers are in ``diagrams``."""
