"""Facts about the platform the tests run on that the standard library does not say."""

import ctypes
import sys


def _under_wine() -> bool:
    if sys.platform != "win32":
        return False
    try:
        # Wine's ntdll exports its version; Windows' does not
        return hasattr(ctypes.WinDLL("ntdll"), "wine_get_version")
    except (AttributeError, OSError):
        return False


# Windows emulated by Wine on Linux (tools/test_windows_wine.sh).
UNDER_WINE = _under_wine()
