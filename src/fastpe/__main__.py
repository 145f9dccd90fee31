"""``python -m fastpe``: the same command line as the ``fastpe`` script."""

import sys

from ._cli import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m fastpe"))
