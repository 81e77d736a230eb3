"""A stand-in C++ compiler for tests/engine/test_native_first_run.py: it answers the commands
`lstmviz.engine.native.kernels` gives g++ without compiling (a real build takes a minute of two
cores).

Each call appends its arguments to FAKE_CXX_LOG (one JSON line). A compile (`-c SRC -o OBJ`)
writes an empty object file; the link (`-o LIB`) waits FAKE_CXX_SLEEP seconds (so that two first
runs overlap) and copies FAKE_CXX_LIBRARY, the checkout's own build of the same sources, to LIB.
With FAKE_CXX_FAIL set it prints a compiler's error and exits 1.
"""

import json
import os
import shutil
import sys
import time


def main() -> int:
    args = sys.argv[1:]
    with open(os.environ["FAKE_CXX_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps(args) + "\n")
    if os.environ.get("FAKE_CXX_FAIL"):
        print("lstm_kernels.cc:1:1: error: fake compiler failure", file=sys.stderr)
        return 1
    output = args[args.index("-o") + 1]
    if "-c" in args:
        open(output, "wb").close()
        return 0
    time.sleep(float(os.environ.get("FAKE_CXX_SLEEP", "0")))
    shutil.copyfile(os.environ["FAKE_CXX_LIBRARY"], output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
