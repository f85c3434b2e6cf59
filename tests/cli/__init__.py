"""The ``keras-mgu`` command line's rules for every command: its output files, options, pipes."""
