"""`python -m memory.llm [MODEL ...]`: assemble the bundled part-package models ahead of time."""

import sys

from .bundled import main

sys.exit(main(sys.argv[1:]))
