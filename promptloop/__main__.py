"""`python -m promptloop ...`: the same command line as the `promptloop` script."""

from promptloop.optimizer.cli.app import main

if __name__ == "__main__":
    main()
