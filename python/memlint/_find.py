"""Locating the ``memlint`` binary installed next to this package."""

import os
import shutil
import sys
import sysconfig


def find_memlint_bin() -> str:
    """Return the path of the installed ``memlint`` binary.

    Looks in the scripts directory of the environment this package is
    installed in (including a ``--user`` install), then on ``PATH``.
    """
    exe = "memlint" + (sysconfig.get_config_var("EXE") or "")
    candidates = [sysconfig.get_path("scripts")]
    if sys.version_info >= (3, 10):
        user_scheme = sysconfig.get_preferred_scheme("user")
    elif os.name == "nt":
        user_scheme = "nt_user"
    elif sys.platform == "darwin" and getattr(sys, "_framework", None):
        user_scheme = "osx_framework_user"
    else:
        user_scheme = "posix_user"
    candidates.append(sysconfig.get_path("scripts", scheme=user_scheme))
    for directory in candidates:
        path = os.path.join(directory, exe)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    found = shutil.which(exe)
    if found:
        return found
    raise FileNotFoundError(f"the memlint binary was not found in {candidates} or on PATH")
