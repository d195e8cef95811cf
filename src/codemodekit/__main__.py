import sys

from codemodekit.cli import main

sys.exit(main())
