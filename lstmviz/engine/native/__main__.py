"""`python -m lstmviz.engine.native [-v]`: build the kernels (if needed) and say what runs."""

from lstmviz.engine.native.kernels import main

main()
