#!/usr/bin/env python3
"""Names the tests a Swift Testing log shows as started but never ended (passed, failed or
skipped): what a run stopped by `timeout` was stuck in. Given a `ps -eo pid=,ppid=,etimes=,args=`
listing taken shortly before and the test script's process id, it also names the processes the
run started that had been running for over a minute: what a hang waits on.

    python3 scripts/unfinished-tests.py .build/test-output.log [PROCESSES ROOT_PID]
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

if len(sys.argv) == 4:
    try:
        rows = [line.split(None, 3) for line in open(sys.argv[2], encoding="utf-8", errors="replace")]
    except OSError as error:
        sys.exit(f"no process listing: {error}")
    parents = {row[0]: row[1] for row in rows if len(row) == 4}
    def descends(pid, root=sys.argv[3]):
        seen = set()
        while pid in parents and pid not in seen:
            seen.add(pid)
            if parents[pid] == root:
                return True
            pid = parents[pid]
        return False
    # Not the script's own subshells (the watchdog), nor the sleeps and pipes of the script.
    script = next((row[3] for row in rows if len(row) == 4 and row[0] == sys.argv[3]), None)
    old = [row for row in rows if len(row) == 4 and int(row[2]) > 60 and descends(row[0])
           and row[3] != script and not row[3].startswith(("sleep ", "ps ", "tee ", "timeout "))]
    print("processes the tests started, running for over a minute shortly before the limit (seconds, command):")
    for row in old:
        print(f"  {row[2]:>6}  {row[3].strip()[:160]}")
    if not old:
        print("  (none)")
