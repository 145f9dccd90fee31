"""Every C-API signature agrees wherever it is written.

include/fastpe.h is the one definition (the function-pointer typedefs and the
order of the capsule's table).  The other places must agree with it, and are
read here from the installed package:
  - kernel.pxd, the Cython declarations of the same functions;
  - _capi.pxi, the Cython view of fastpe.h's typedefs and table, and the order
    in which the capsule's table is filled;
  - fastpe.h's own wrappers (fastpe_fill_f32, ...): a macro per slot, calling
    through it (so the slot's typedef checks the caller's arguments).
(The Cython definitions are checked against kernel.pxd by Cython itself.)
"""

import pathlib
import re

import pytest

import fastpe

PKG = pathlib.Path(fastpe.__file__).parent
C_KEYWORDS = {"const", "int", "double", "float", "char", "void", "unsigned", "struct"}


def _strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"(//|#)[^\n]*", " ", text)


def _param_type(decl):
    """'const double *positions' -> 'const double *'; 'PyObject *x' -> 'object'."""
    tokens = re.findall(r"\w+|\*", decl)
    words = [t for t in tokens if t != "*"]
    if (
        tokens
        and tokens[-1] != "*"
        and len(words) > 1
        and words[-1] not in C_KEYWORDS
        and not words[-1].endswith("_t")
        and words[-1] != "object"
    ):
        tokens = tokens[:-1]  # the parameter's name
    text = " ".join(tokens).replace(" *", " *").replace("* ", "*")
    text = re.sub(r"\s*\*", " *", text).strip()
    return {"PyObject *": "object"}.get(text, text)


def _params(text):
    text = " ".join(text.split())
    return [] if text in ("", "void") else [_param_type(p) for p in text.split(",")]


def _ret(text):
    return _param_type(" ".join(text.split()) + " x")  # a return type is a nameless decl


def header():
    """(typedefs {name: (ret, params)}, table members [(type, name)], wrappers)."""
    text = _strip_comments((PKG / "include" / "fastpe.h").read_text())
    typedefs = {
        name: (_ret(ret), _params(params))
        for ret, name, params in re.findall(
            r"typedef\s+([\w\s\*]+?)\(\s*\*\s*(fastpe_\w+_fn)\s*\)\s*\(([^)]*)\)\s*;", text
        )
    }
    body = re.search(r"typedef\s+struct\s+fastpe_api\s*\{(.*?)\}\s*fastpe_api_t\s*;", text, re.S)
    members = re.findall(r"(\w+)\s+(\w+)\s*;", body.group(1))
    raw = re.sub(r"/\*.*?\*/", " ", (PKG / "include" / "fastpe.h").read_text(), flags=re.S)
    wrappers = {
        slot: name
        for name, slot in re.findall(
            r"#define\s+(fastpe_\w+)\(\.\.\.\)\s*(?:\\\s*)?FASTPE_CALL_\w*\((?:\w+,\s*)?(\w+),",
            raw,
        )
    }
    return typedefs, members, wrappers


def pxd_declarations():
    """{name: (ret, params)} of kernel.pxd's cdef functions."""
    text = re.sub(r"#[^\n]*", " ", (PKG / "kernel.pxd").read_text())
    return {
        name: (_ret(ret), _params(params))
        for ret, name, params in re.findall(
            r"^cdef\s+([\w\s\*]+?)\b(\w+)\s*\(([^)]*)\)", text, re.M
        )
        if not ret.strip().startswith(("enum", "extern", "struct"))
    }


def pxi_view():
    """(ctypedefs {name: (ret, params)}, table members [(type, name)], assignment
    order [name]) of _capi.pxi."""
    text = re.sub(r"#[^\n]*", " ", (PKG / "_capi.pxi").read_text())
    block = re.search(r'cdef extern from "include/fastpe.h":\n(.*?)\n\S', text, re.S).group(1)
    ctypedefs = {
        name: (_ret(ret), _params(params))
        for ret, name, params in re.findall(
            r"ctypedef\s+([\w\s\*]+?)\(\s*\*\s*(fastpe_\w+_fn)\s*\)\s*\(([^)]*)\)", block
        )
    }
    struct = re.search(r"ctypedef struct fastpe_api_t:\n((?:\s{8}.*\n)+)", block + "\n")
    members = re.findall(r"^\s+(\w+)\s+(\w+)\s*$", struct.group(1), re.M)
    assigned = re.findall(r"^_c_api_table\.(\w+)\s*=\s*\w+", text, re.M)
    return ctypedefs, members, assigned


TYPEDEFS, MEMBERS, WRAPPERS = header()
FUNCTIONS = [(t, n) for t, n in MEMBERS if t.endswith("_fn")]


def test_the_parsers_find_the_whole_table():
    assert [n for _, n in MEMBERS[:3]] == ["abi_major", "abi_minor", "size"]
    assert len(FUNCTIONS) == len(MEMBERS) - 3 >= 38  # ABI 1.3: 38 functions
    assert set(TYPEDEFS) == {t for t, _ in FUNCTIONS}


@pytest.mark.parametrize("typedef, name", FUNCTIONS)
def test_kernel_pxd_declares_what_fastpe_h_says(typedef, name):
    assert pxd_declarations()[name] == TYPEDEFS[typedef]


@pytest.mark.parametrize("typedef, name", FUNCTIONS)
def test_the_capsule_module_sees_the_typedefs_of_fastpe_h(typedef, name):
    ctypedefs, _, _ = pxi_view()
    assert ctypedefs[typedef] == TYPEDEFS[typedef]


@pytest.mark.parametrize("typedef, name", [f for f in FUNCTIONS if f[1] in WRAPPERS])
def test_fastpe_h_wrappers_have_the_library_name_of_their_slot(typedef, name):
    assert WRAPPERS[name] == "fastpe_" + name
    assert typedef == f"fastpe_{name}_fn"


def test_every_function_of_the_table_has_a_wrapper():
    assert {n for _, n in FUNCTIONS} - set(WRAPPERS) == set()


def test_the_capsule_table_has_fastpe_h_order():
    _, members, assigned = pxi_view()
    assert members == MEMBERS
    assert assigned == [n for _, n in MEMBERS]
