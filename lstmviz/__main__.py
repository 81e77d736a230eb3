import sys

from lstmviz.cli import main

sys.exit(main())
