"""The ``boltzlab`` command line: ``boltzlab demo | train | logz | evaluate | sample | info | report | reproduce``.

See :mod:`boltzlab.cli.main` for the group and how errors are shown; each subcommand is
declared in :mod:`boltzlab.cli.commands` (light, for ``--help``) and carried out in its own
module here (docs/architecture.md, "Start-up").
"""
