"""Names only Vitis HLS's headers take: the macros of ap_common.h and friends and of the C headers they pull in.

`ming csim` compiles with ming's stand-ins for the Vitis headers, so a process function named `NAN`,
`INLINE` or `FLOAT_MAN` C-simulates; Vitis, whose ap_common.h defines INLINE and FLOAT_MAN and whose
headers include <math.h> and <cfenv>, would not compile it. These names are reserved: they get a suffix.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from ming_py.emit.identifiers import TEMPLATES, Namer, cpp_names, is_reserved
from ming_py.emit.system_names import C_LIBRARY_MACROS, VITIS_MACROS

from test_identifiers import _all_identifiers, _graph, assert_clean

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")

# <math.h>, <cfenv>, <stdio.h>, <stdint.h>, <climits>, <cfloat>, <cerrno>, <csignal>, <cinttypes>, <cstdarg>,
# <csetjmp>; ap_common.h, ap_decl.h; typedefs of <cmath>, <cfenv>, <csignal>
VITIS_ONLY = ["NAN", "INFINITY", "M_PI", "HUGE_VAL", "FP_NAN", "math_errhandling", "FE_ALL_EXCEPT", "FE_TONEAREST",
              "EOF", "INT8_MAX", "INT_MAX", "CHAR_BIT", "DBL_EPSILON", "FLT_MAX", "ERANGE", "SIGINT", "SIG_ATOMIC_MAX",
              "PRId64", "va_arg", "setjmp",
              "INLINE", "FLOAT_MAN", "FLOAT_EXP", "FLOAT_BIAS", "DOUBLE_MAN", "DOUBLE_EXP", "HALF_MAN", "AP_INT_MAX_W",
              "AP_WEAK", "BIT_WIDTH_UPPER_LIMIT", "SC_RND", "SC_WRAP", "HUGE_VALH",
              "float_t", "double_t", "fenv_t", "sig_atomic_t", "jmp_buf"]


@pytest.mark.unit
@pytest.mark.parametrize("name", VITIS_ONLY)
def test_macros_of_the_vitis_headers_and_their_c_headers_get_a_suffix(name):
    assert is_reserved(name)
    assert Namer().claim_all([name], "node") == {name: f"{name}_1"}


@pytest.mark.unit
def test_processes_and_the_model_named_like_vitis_macros_are_renamed():
    processes = [(name, True) for name in ("NAN", "INLINE", "FLOAT_MAN", "M_PI", "FE_ALL_EXCEPT", "EOF", "INT8_MAX")]
    names = cpp_names(_graph("INFINITY", processes))
    assert names.model == "INFINITY_1" and names.top == "INFINITY_1_top"
    assert names.processes == {name: f"{name}_1" for name, _ in processes}
    identifiers = _all_identifiers(names)
    assert len({i.lower() for i in identifiers}) == len(identifiers)
    for identifier in identifiers:
        assert_clean(identifier)


@pytest.mark.unit
def test_ordinary_names_stay():
    for name in ("nan_guard", "inline_conv", "pi", "m_pi_scale", "float_man", "conv1", "relu", "fc", "pool1"):
        assert not is_reserved(name), name
    assert not {"conv", "relu", "pool", "fc", "dense", "add", "concat"} & (C_LIBRARY_MACROS | VITIS_MACROS)


@needs_gxx
def test_reserved_names_cover_the_macros_of_the_c_headers_vitis_includes(tmp_path):
    """Every macro the local compiler's <math.h>, <cfenv>, limits, <cerrno>, <cassert>, <csignal>, ... define
    (no leading underscore) is reserved: the snapshot in system_names.py is not stale."""
    for header in TEMPLATES.glob("*.h"):
        shutil.copy(header, tmp_path / header.name)
    headers = ["math.h", "cmath", "fenv.h", "cfenv", "climits", "cfloat", "cstdint", "cinttypes", "cerrno",
               "cassert", "csignal", "cstdlib", "cstring", "ctime", "clocale", "csetjmp", "cstdarg", "cstddef",
               "cctype", "cwchar", "cwctype", "iostream", "sstream", "string", "limits"]
    source = '#include "ming_stream.h"\n#include "ming_numerics.h"\n' + "".join(f"#include <{h}>\n" for h in headers)
    (tmp_path / "tu.cpp").write_text(source)
    result = subprocess.run(["g++", "-std=c++17", "-DMING_CSIM", "-DMING_CSIM_CONCURRENT", "-pthread", "-dM", "-E",
                             "-I", str(tmp_path), str(tmp_path / "tu.cpp")], capture_output=True, text=True, check=True)
    macros = {line.split()[1].split("(")[0] for line in result.stdout.splitlines() if line.startswith("#define")}
    assert {"NAN", "INFINITY", "M_PI", "FE_ALL_EXCEPT", "INT_MAX", "DBL_EPSILON"} <= macros  # the headers were read
    assert sorted(m for m in macros if not m.startswith("_") and not is_reserved(m)) == []
