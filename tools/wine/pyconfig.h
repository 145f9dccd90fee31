/* pyconfig.h for building extensions of the official Windows CPython 3.12 (amd64)
 * with mingw-w64 GCC, used by tools/test_windows_wine.sh.  It replaces the Linux
 * pyconfig.h beside a copy of CPython 3.12's headers; Python.h includes it from
 * its own directory.
 *
 * Only what the public headers read is defined.  The values are those of the
 * python.org build (MSVC, x64): LLP64 (long is 4 bytes), wchar_t of 2 bytes,
 * little-endian IEEE doubles, a shared python312.dll. */
#ifndef Py_CONFIG_H
#define Py_CONFIG_H

#define MS_WIN32
#define MS_WIN64
#define MS_WINDOWS
#define NT_THREADS
#define WITH_THREAD
#define PLATFORM "win32"

/* python312.dll exports the API: PyAPI_FUNC/PyAPI_DATA become dllimport and
 * PyMODINIT_FUNC dllexport (pyport.h and exports.h read these two). */
#define Py_ENABLE_SHARED 1
#define HAVE_DECLSPEC_DLL

/* Py_ssize_t is ssize_t, 64-bit in mingw-w64's <sys/types.h>. */
#define HAVE_SSIZE_T 1

#define SIZEOF_SHORT        2
#define SIZEOF_INT          4
#define SIZEOF_LONG         4
#define SIZEOF_LONG_LONG    8
#define SIZEOF_FLOAT        4
#define SIZEOF_DOUBLE       8
#define SIZEOF_VOID_P       8
#define SIZEOF_SIZE_T       8
#define SIZEOF_TIME_T       8
#define SIZEOF_OFF_T        4
#define SIZEOF_FPOS_T       8
#define SIZEOF_WCHAR_T      2
#define SIZEOF__BOOL        1
#define SIZEOF_PID_T        SIZEOF_INT
#define SIZEOF_HKEY         SIZEOF_VOID_P
#define ALIGNOF_SIZE_T      8
#define ALIGNOF_MAX_ALIGN_T 8

#define DOUBLE_IS_LITTLE_ENDIAN_IEEE754 1
#define HAVE_STDDEF_H                   1
#define HAVE_STDLIB_H                   1
#define HAVE_WCHAR_H                    1
#define HAVE_SYS_STAT_H                 1
#define HAVE_SYS_TYPES_H                1

#endif /* Py_CONFIG_H */
