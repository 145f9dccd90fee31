/* bcryptprimitives.dll for Wine 8, which has none: ProcessPrng, the one function
 * Rust's standard library takes from it (mypy's compiled parser, ast_serialize,
 * fails to load without it).  Windows' own DLL fills the buffer from the
 * system's random generator; so does this, through RtlGenRandom.  Built and
 * installed into the WINEPREFIX by tools/test_windows_wine.sh, never shipped. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length); /* RtlGenRandom */

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
    while (length > 0) {
        ULONG n = length > 0x40000000 ? 0x40000000 : (ULONG)length;
        if (!SystemFunction036(data, n))
            return FALSE;
        data += n;
        length -= n;
    }
    return TRUE;
}
