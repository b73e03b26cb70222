"""The ``boltzlab`` command line: ``boltzlab demo | train | logz | sample | info``.

See :mod:`boltzlab.cli.main` for the group and how errors are shown.
"""
