"""The native parts of the live worker's per-event path (the rest is in pyproject.toml).

Each is optional: where no C compiler is at hand the install goes on without it, and the
Python it mirrors runs (the reference either way; bench/RESULTS.md has what each saves)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(name, sources=[source], optional=True)
        for name, source in [
            ("runwatch.stream.timekeeping._skew", "stream/timekeeping/_skew.c"),
            ("runwatch.stream._fetched", "stream/_fetched.c"),
            ("runwatch.stream._ids", "stream/_ids.c"),
        ]
    ]
)
