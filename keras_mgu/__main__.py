"""``python -m keras_mgu``: the ``keras-mgu`` command line (see :mod:`keras_mgu.cli`)."""

import sys

from keras_mgu.cli import main

if __name__ == "__main__":
    sys.exit(main())
