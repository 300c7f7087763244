"""The ``cvfs`` console script: ``demo | data | warmup | motion | keypoints | astro`` subcommands.

The CLI only parses arguments and calls the library or :mod:`cvfs.cli.commands` (the
subcommands that open sources and write output sets; the scripts in ``apps/`` call :func:`main`
too). The subcommands are the functions of :mod:`cvfs.cli.handlers`, bound to the parser of
:mod:`cvfs.cli.parser`; :mod:`cvfs.cli.app` runs them.
``main(argv=None)`` is what tests call.
"""

from cvfs.cli.app import main

__all__ = ["main"]
