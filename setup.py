"""Only the optional C module lives here; everything else is in setup.cfg.

``workloads._native`` (the native executor) needs a C compiler and the Python headers, no database
headers: it dlopen()s libpq/libmariadb with its own prototypes. When it cannot be built, the install
goes on and the workloads use the Python loop; each result's ``driver`` field says which one ran.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("workloads._native", ["workloads/_native.c"], optional=True,
                             extra_compile_args=["-O2"])])
