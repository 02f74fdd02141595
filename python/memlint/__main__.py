"""``python -m memlint``: runs the memlint binary with the same arguments."""

import os
import subprocess
import sys

from ._find import find_memlint_bin


def main() -> None:
    memlint = find_memlint_bin()
    if sys.platform == "win32":
        sys.exit(subprocess.run([memlint, *sys.argv[1:]]).returncode)
    os.execv(memlint, [memlint, *sys.argv[1:]])


if __name__ == "__main__":
    main()
