#!/usr/bin/env python3
"""Names the tests a Swift Testing log shows as started but never ended (passed, failed or
skipped): what a run stopped by `timeout` was stuck in.

    python3 scripts/unfinished-tests.py .build/test-output.log
"""
import re
import sys

lines = open(sys.argv[1], encoding="utf-8", errors="replace").read().splitlines()
started = [m.group(1) for line in lines if (m := re.search(r'Test "(.*)" started\.$', line))]
ended = [line for line in lines if not line.rstrip().endswith("started.")]
unfinished = [name for name in started if not any(f'Test "{name}"' in line for line in ended)]
for name in unfinished:
    print(f"  {name}")
if not unfinished:
    print("  (none: every test that started ended; the run itself did not finish)")
