import sys

from nlicl_lib.experiments.cli import main

sys.exit(main())
