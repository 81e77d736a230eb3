"""Launch the lstmviz desktop app (same as `lstmviz gui`); pass --demo to start a demo run."""

import sys

from lstmviz.cli import main

if __name__ == "__main__":
    sys.exit(main(["gui", *sys.argv[1:]]))
