"""Only the optional C module lives here; everything else is in setup.cfg.

``workloads.native._native`` (the native executor) needs a C compiler and the Python headers, no database
headers: it dlopen()s libpq/libmariadb with its own prototypes. When it cannot be built, the install
goes on and the workloads use the Python loop; each result's ``driver`` field says which one ran.
"""

import hashlib
from pathlib import Path

from setuptools import Extension, setup

# The module carries the digest of the source it was built from, so a checkout whose _native.c changed
# since its last build says so and takes the Python loop (workloads.native.nativelib) instead of calling a C
# module with another interface (seen: steps of 0 transactions after a pull without a rebuild).
_SRC = Path(__file__).resolve().parent / "workloads" / "native" / "_native.c"
_DIGEST = hashlib.sha256(_SRC.read_bytes()).hexdigest()[:16]

setup(ext_modules=[Extension("workloads.native._native", ["workloads/native/_native.c"], optional=True,
                             define_macros=[("NATIVE_SOURCE_DIGEST", f'"{_DIGEST}"')],
                             extra_compile_args=["-O2"])])
