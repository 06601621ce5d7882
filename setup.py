"""Only the optional C loops live here; everything else is in setup.cfg.

``workloads._keyloop`` (point lookups) and ``workloads._native`` (the native executor) need a C
compiler and the Python headers, no database headers: the first calls the driver's own library
through addresses handed over at run time, the second dlopen()s libpq/libmariadb with its own
prototypes. When they cannot be built, the install goes on and the workloads use the Python loop;
each result's ``driver`` field says which one ran.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("workloads._keyloop", ["workloads/_keyloop.c"], optional=True,
                             extra_compile_args=["-O2"]),
                   Extension("workloads._native", ["workloads/_native.c"], optional=True,
                             extra_compile_args=["-O2"])])
