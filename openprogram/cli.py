"""The ``openprogram`` command line as a library: ``main(argv)`` runs one command and returns
its exit code, as the console script does; ``parser()`` is its argument parser."""

from openprogram._cli import main, parser, run

__all__ = ["main", "parser", "run"]

if __name__ == "__main__":
    import sys

    sys.exit(main())
