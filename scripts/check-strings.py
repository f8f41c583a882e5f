#!/usr/bin/env python3
"""Fails when a string of the command line exists in English but not in every other language
(or the other way round). Reads Sources/bookcache-cli/Resources/*.lproj/Localizable.strings."""
import glob
import os
import re
import sys

root = os.path.join(os.path.dirname(__file__), "..", "Sources", "bookcache-cli", "Resources")
entry = re.compile(r'^\s*"((?:[^"\\]|\\.)*)"\s*=\s*"((?:[^"\\]|\\.)*)"\s*;\s*$')
tables = {}
for path in sorted(glob.glob(os.path.join(root, "*.lproj", "Localizable.strings"))):
    language = os.path.basename(os.path.dirname(path))[: -len(".lproj")]
    keys = {}
    for number, line in enumerate(open(path, encoding="utf-8"), 1):
        text = line.strip()
        if not text or text.startswith("/*") or text.startswith("//"):
            continue
        match = entry.match(line)
        if not match:
            sys.exit(f"error: {path}:{number} is not a \"key\" = \"value\"; line")
        keys[match.group(1)] = match.group(2)
    tables[language] = keys
english = tables.get("en")
if english is None:
    sys.exit("error: no en.lproj/Localizable.strings")
problems = []
placeholders = re.compile(r"%(?:\d+\$)?(?:lld|@|d)")
for language, keys in tables.items():
    for key in sorted(set(english) - set(keys)):
        problems.append(f"{language}: missing '{key}'")
    for key in sorted(set(keys) - set(english)):
        problems.append(f"{language}: '{key}' is not in English")
    for key in set(english) & set(keys):
        if sorted(placeholders.findall(english[key])) != sorted(placeholders.findall(keys[key])):
            problems.append(f"{language}: '{key}' has other placeholders than English")
if problems:
    sys.exit("error: the command line's strings differ between languages:\n  " + "\n  ".join(problems))
print(f"strings: {len(english)} in each of {', '.join(sorted(tables))}")
