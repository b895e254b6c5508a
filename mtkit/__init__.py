"""mtkit: the Transformer of "Attention Is All You Need" as a command-line MT toolkit.

Only the version lives here so that `mtkit --help` starts without importing torch.
"""

__version__ = "0.1.0"
