#!/usr/bin/env python3
"""Runs a command and prints its peak memory, split as the kernel counts it (not a test).

    Benchmarks/peak-memory.py CMD [ARGS...]

/usr/bin/time's peak RSS adds up two kinds of pages: private memory (RssAnon: heaps, stacks,
buffers) and pages of files mapped in (RssFile: the binary's code and data, shared libraries),
which are the page cache's, shared, and dropped under memory pressure. A statically linked
bookcache maps 35 MiB of code, and every 4 KiB it runs faults in up to 64 KiB around it, so its
peak RSS says more about which code ran than about memory. This prints both peaks, sampled
from /proc/PID/status every 5 ms, and VmHWM (the kernel's peak of their sum).
"""
import subprocess
import sys
import time


def status(pid):
    fields = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name in ("RssAnon", "RssFile", "RssShmem", "VmHWM"):
                    fields[name] = int(value.split()[0])
    except OSError:
        pass
    return fields


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    process = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
    peaks = {"RssAnon": 0, "RssFile": 0, "RssShmem": 0, "VmHWM": 0}
    while process.poll() is None:
        for name, value in status(process.pid).items():
            peaks[name] = max(peaks[name], value)
        time.sleep(0.005)
    if process.returncode != 0:
        sys.exit(f"command failed ({process.returncode}): {' '.join(sys.argv[1:])}")
    mib = {name: value / 1024 for name, value in peaks.items()}
    print(
        f"peak RSS {mib['VmHWM']:.1f} MiB: private (RssAnon) {mib['RssAnon']:.1f} MiB, "
        f"mapped files (RssFile) {mib['RssFile']:.1f} MiB, shared memory {mib['RssShmem']:.1f} MiB"
    )


if __name__ == "__main__":
    main()
