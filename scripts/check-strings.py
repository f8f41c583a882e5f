#!/usr/bin/env python3
"""Fails when a string for people exists in English but not in every other language (or the other
way round), or when a translation has other placeholders than its English text. Reads every
Sources/*/Resources/*.lproj/Localizable.strings: the library's (error messages, refusal kinds,
statuses), the command line's and the service's web page's."""
import glob
import os
import re
import sys

sources = os.path.join(os.path.dirname(__file__), "..", "Sources")
entry = re.compile(r'^\s*"((?:[^"\\]|\\.)*)"\s*=\s*"((?:[^"\\]|\\.)*)"\s*;\s*$')
placeholders = re.compile(r"%(?:\d+\$)?(?:lld|@|d)")
problems = []
counts = []
for root in sorted(glob.glob(os.path.join(sources, "*", "Resources"))):
    target = os.path.basename(os.path.dirname(root))
    tables = {}
    for path in sorted(glob.glob(os.path.join(root, "*.lproj", "Localizable.strings"))):
        language = os.path.basename(os.path.dirname(path))[: -len(".lproj")]
        keys = {}
        in_comment = False
        for number, line in enumerate(open(path, encoding="utf-8"), 1):
            text = line.strip()
            if in_comment:
                in_comment = "*/" not in text
                continue
            if text.startswith("/*"):
                in_comment = "*/" not in text
                continue
            if not text or text.startswith("//"):
                continue
            match = entry.match(line)
            if not match:
                sys.exit(f"error: {path}:{number} is not a \"key\" = \"value\"; line")
            if match.group(1) in keys:
                problems.append(f"{target} {language}: '{match.group(1)}' is there twice (line {number})")
            keys[match.group(1)] = match.group(2)
        tables[language] = keys
    if not tables:
        continue
    english = tables.get("en")
    if english is None:
        problems.append(f"{target}: no en.lproj/Localizable.strings")
        continue
    for key, value in english.items():
        if key != value:
            problems.append(f"{target} en: '{key}' is not its own English text (keys are the English wording)")
    for language, keys in tables.items():
        for key in sorted(set(english) - set(keys)):
            problems.append(f"{target} {language}: missing '{key}'")
        for key in sorted(set(keys) - set(english)):
            problems.append(f"{target} {language}: '{key}' is not in English")
        for key in set(english) & set(keys):
            if sorted(placeholders.findall(english[key])) != sorted(placeholders.findall(keys[key])):
                problems.append(f"{target} {language}: '{key}' has other placeholders than English")
    # Every key the code asks for is in the English table (a new message cannot miss translation).
    used = set()
    call = re.compile(r'(?:MessageTemplate\(|LocalizedText\.format\(|Localized\.text\(|Localized\.template\(|key = )\s*"((?:[^"\\]|\\.)*)"')
    for swift in glob.glob(os.path.join(os.path.dirname(root), "**", "*.swift"), recursive=True):
        text = open(swift, encoding="utf-8").read()
        used.update(call.findall(text))
        # The web page: {{key}} in its HTML, t("key") in its script
        used.update(k for k in re.findall(r"\{\{([^{}]+)\}\}", text) if k not in ("lang", "strings"))
        used.update(re.findall(r'\bt\("((?:[^"\\]|\\.)*)"', text))
    for key in sorted(used - set(english)):
        problems.append(f"{target}: the code uses '{key}', which is not in en.lproj")
    counts.append(f"{target}: {len(english)} ({len(used)} used by the code) in each of {', '.join(sorted(tables))}")
if problems:
    sys.exit("error: strings differ between languages:\n  " + "\n  ".join(problems))
print("strings: " + "; ".join(counts))
