"""`python -m mtkit` runs the command-line app."""

from mtkit.cli.main import main

if __name__ == "__main__":
    main()
