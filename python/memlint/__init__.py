"""memlint: finds GPU memory and autograd hazards in PyTorch training code.

The package ships the ``memlint`` command-line binary; ``python -m memlint``
runs it too. :func:`find_memlint_bin` returns its path.
"""

from ._find import find_memlint_bin

__all__ = ["find_memlint_bin"]
