"""The package version (one place, read by the build and by the native library cache)."""

__version__ = "0.1.0.dev0"
