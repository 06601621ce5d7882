"""Only the optional C query loop lives here; everything else is in setup.cfg.

``workloads._keyloop`` needs a C compiler and the Python headers (no database headers:
it calls the driver's own library through addresses handed over at run time). When it
cannot be built, the install goes on and the point-lookup workloads use the Python loop;
each result's ``driver`` field says which one ran.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("workloads._keyloop", ["workloads/_keyloop.c"], optional=True,
                             extra_compile_args=["-O2"])])
