"""Helpers shared by the dataset tests."""

from __future__ import annotations


def write_file(path, text: str) -> str:
    with open(path, "w", newline="") as f:
        f.write(text)
    return str(path)
