"""The `lstmviz` command line (`main`; `build_parser` its flags), one module per part:

    command   main(): parse, run the command, its errors in one line (exit 0, 2 or 130)
    parser    the flags of `gui` and `run` (`export`'s, `diagnose`'s and `compare`'s beside
              their commands)
    run       lstmviz run: the RunConfig of the flags, the run driven with progress and Ctrl-C
    gui       lstmviz gui: its flags checked, the window started, its process ended
    export    lstmviz export
    diagnose  lstmviz diagnose and lstmviz compare (on analysis/sources.py: lstmviz.diagnose,
              lstmviz.compare)
"""

from __future__ import annotations

import sys

# Ctrl-C while the command starts (during these imports, which are slow) ends it as it would
# later: no traceback, exit 130, nothing written
try:
    from lstmviz.cli.command import main
    from lstmviz.cli.parser import build_parser
except KeyboardInterrupt:
    sys.stderr.write("lstmviz: interrupted; nothing written\n")
    raise SystemExit(130) from None

__all__ = ["build_parser", "main"]

if __name__ == "__main__":
    sys.exit(main())
