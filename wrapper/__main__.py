import sys

from wrapper.cli import main

sys.exit(main())
