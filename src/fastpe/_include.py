"""Where the C header lives, for extensions that use fastpe's C API."""

from __future__ import annotations

import os


def get_include() -> str:
    """Return the directory that contains ``fastpe.h``.

    Extensions that call fastpe from C (through ``import_fastpe()``, see
    ``docs/c_api.md``) compile against this directory; they need no link-time
    dependency on fastpe.  Cython extensions need no include path: ``from
    fastpe.kernel cimport fill_f32`` finds the installed ``.pxd`` files.

    Notes
    -----
    With setuptools, as with ``numpy.get_include()``::

        import fastpe
        from setuptools import Extension

        ext = Extension("mymod", ["mymod.c"], include_dirs=[fastpe.get_include()])

    With a plain compiler::

        cc -shared -fPIC $(python3-config --includes) \\
           -I"$(python -c 'import fastpe; print(fastpe.get_include())')" mymod.c -o mymod.so

    Returns
    -------
    str
        Absolute path of the ``include`` directory of the installed package.
    """
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")
