"""One table of medians, ratios and errors from a single run.

    python bench/compare.py [--quick] [--json] [--chart FILE.png]

Same as `fastpe bench`; see fastpe/_bench.py.
"""

import sys

from fastpe._bench import main

if __name__ == "__main__":
    sys.exit(main())
