"""Peak resident memory of the current process (Linux), shared by the benchmarks."""

from __future__ import annotations


def proc_status_kb(field: str) -> int | None:
    """A ``kB`` field of ``/proc/self/status`` (Linux), or None where unavailable."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS counter (VmHWM) of this process; False if not possible."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as clear_refs:
            clear_refs.write("5")
    except OSError:
        return False
    return True


class PeakMemory:
    """Peak RSS increase (MB) of this process from construction to :meth:`peak_mb`."""

    def __init__(self) -> None:
        self.reset_ok = reset_peak_rss()
        self.base_kb = proc_status_kb("VmRSS")

    def peak_mb(self) -> float | None:
        peak_kb = proc_status_kb("VmHWM")
        if not self.reset_ok or peak_kb is None or self.base_kb is None:
            return None
        return (peak_kb - self.base_kb) / 1024.0
