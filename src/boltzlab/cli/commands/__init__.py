"""The subcommands' declarations: each module holds one click command, its options and its help.

They import only click, the standard library and the light CLI modules (:mod:`boltzlab.cli.common`,
:mod:`boltzlab.cli.choices`), so ``boltzlab COMMAND --help`` answers without importing torch; a
command's callback imports its implementation (``boltzlab.cli.<name>``) when it runs
(docs/architecture.md, "Start-up").
"""
