"""The compiled search core (search_space/_cwalk.c with _cprofile.c, search_space/_cdag.c,
search_space/_cpart.c, search_space/_cshape.c, search_space/_canalyse.c; _cdag.c,
_canalyse.c and _cwalk.c share search_space/_cutil.h) and the simulator's timed step
(sim/_csim.c) and its plans' movement and packing (sim/_cpack.c), and a bred pick's log
text's writer (logs/_cjson.c),
optional: without a C compiler the package installs and decoding runs in Python
(search_space/_ccore.py warns once)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "search_space._cwalk",
            ["search_space/_cwalk.c", "search_space/_cprofile.c"],
            depends=["search_space/_cprofile.h", "search_space/_cutil.h"],
            # the same floating-point sums as the Python walk: no fused multiply-adds
            extra_compile_args=["-O2", "-ffp-contract=off"],
            optional=True,
        ),
        Extension(
            "search_space._cpart",
            ["search_space/_cpart.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        Extension(
            "search_space._cshape",
            ["search_space/_cshape.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        Extension(
            "search_space._canalyse",
            ["search_space/_canalyse.c"],
            depends=["search_space/_cutil.h"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        Extension(
            "search_space._cdag",
            ["search_space/_cdag.c"],
            depends=["search_space/_cutil.h"],
            extra_compile_args=["-O2", "-ffp-contract=off"],
            optional=True,
        ),
        Extension(
            # the simulator's timed step (sim/_ctime.py): the same sums as the Python step
            "sim._csim",
            ["sim/_csim.c"],
            extra_compile_args=["-O2", "-ffp-contract=off"],
            optional=True,
        ),
        Extension(
            # a new step plan's moves, flow sums, costs, packing (sim/_ctime.py): as Python
            "sim._cpack",
            ["sim/_cpack.c"],
            extra_compile_args=["-O2", "-ffp-contract=off"],
            optional=True,
        ),
        Extension(
            "search_space._ccodes",
            ["search_space/_ccodes.c"],
            extra_compile_args=["-O2"],
            optional=True,
        ),
        Extension("logs._cjson", ["logs/_cjson.c"], extra_compile_args=["-O2"], optional=True),
    ]
)
