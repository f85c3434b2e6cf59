"""An identified model as a file: the ``.kmgu`` format and the standalone simulator for export."""
