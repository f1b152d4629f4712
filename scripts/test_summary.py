#!/usr/bin/env python3
"""The test command's closing summary, from cargo test's output and the tests' notes.

Usage: test_summary.py CARGO_TEST_OUTPUT NOTES

Prints each test binary's counts, each failing test by name (with its binary), a binary
that ended without a result (it failed to build or crashed), and what the timing tests
said of their accuracy: the links they judged (held, disturbed, the hypervisor's steal,
late packets), the measurements tried again, and those whose accuracy could not be
checked, each with its reason and figures (tests/common/accuracy.rs writes the notes).
"""

import re
import sys

RUNNING = re.compile(r"^\s*Running (?:unittests )?(\S+)")
DOCTESTS = re.compile(r"^\s*Doc-tests (\S+)")
TEST = re.compile(r"^test (.+?) \.\.\. (ok|FAILED|ignored)")
RESULT = re.compile(
    r"^test result: (\w+)\. (\d+) passed; (\d+) failed; (\d+) ignored; .*?finished in ([\d.]+)s"
)
LINK = re.compile(
    r"^LINK (.*?): set ([\d.]+) ms, kernel (\S+)(?: ms)?, steal (\S+) ms, (.*?); held (\S+(?: judged)?), busy (\w+)"
)
LATE = re.compile(r"^(\d+) of (\d+) packets late")


def binary_name(path):
    """tests/lab/main.rs -> lab; src/lib.rs -> lib (unit)."""
    parts = path.split("/")
    if parts[0] == "tests" and len(parts) > 2:
        return parts[1]
    if parts[0] == "tests":
        return parts[1].removesuffix(".rs")
    return parts[-1].removesuffix(".rs") + " (unit)"


def read_binaries(lines):
    binaries = []  # [name, passed, failed, ignored, seconds or None]
    failed = []
    current = None
    for line in lines:
        m = RUNNING.match(line) or DOCTESTS.match(line)
        if m:
            name = binary_name(m.group(1)) if RUNNING.match(line) else "doc-tests"
            current = [name, 0, 0, 0, None]
            binaries.append(current)
            continue
        m = TEST.match(line)
        if m and m.group(2) == "FAILED":
            failed.append((current[0] if current else "?", m.group(1)))
            continue
        m = RESULT.match(line)
        if m and current is not None:
            current[1:] = [int(m.group(2)), int(m.group(3)), int(m.group(4)), float(m.group(5))]
    return binaries, failed


def main():
    out_path, notes_path = sys.argv[1], sys.argv[2]
    with open(out_path, errors="replace") as f:
        lines = f.read().splitlines()
    try:
        with open(notes_path, errors="replace") as f:
            notes = f.read().splitlines()
    except FileNotFoundError:
        notes = []
    binaries, failed = read_binaries(lines)

    print("\n== test summary")
    print(f"{'binary':<16} {'passed':>7} {'failed':>7} {'ignored':>8} {'seconds':>8}")
    for name, p, fl, ig, secs in binaries:
        if secs is None:
            print(f"{name:<16} {'-':>7} {'-':>7} {'-':>8} {'-':>8}  no result: it did not build or it crashed")
        else:
            print(f"{name:<16} {p:>7} {fl:>7} {ig:>8} {secs:>8.0f}")
    passed = sum(b[1] for b in binaries)
    nfailed = sum(b[2] for b in binaries)
    ignored = sum(b[3] for b in binaries)
    broken = [b[0] for b in binaries if b[4] is None]

    links = [m for m in map(LINK.match, notes) if m]
    disturbed = [m for m in links if m.group(6) == "false" or m.group(7) == "true"]
    steal = sum(float(m.group(4)) for m in links if m.group(4) != "-")
    late = [LATE.match(m.group(5)) for m in links]
    late_packets = sum(int(m.group(1)) for m in late if m)
    packets = sum(int(m.group(2)) for m in late if m)
    retries = [n for n in notes if n.startswith("ACCURACY RETRY ")]
    rechecked = [n for n in notes if n.startswith("ACCURACY CHECKED ")]
    unchecked = [n for n in notes if n.startswith("ACCURACY NOT CHECKED ")]

    print(
        f"\ntests: {passed} passed, {nfailed} failed, {ignored} ignored, "
        f"{len(unchecked)} with accuracy not checked"
        + (f"; {len(broken)} binaries without a result ({', '.join(broken)})" if broken else "")
    )
    print(
        f"links judged: {len(links)}, {len(disturbed)} said disturbed; the hypervisor's steal "
        f"{steal:.0f} ms in all; {late_packets} of {packets} delay-line packets late beyond "
        f"their tolerance; {len(retries)} measurements tried again, {len(rechecked)} of them "
        f"checked on a later try"
    )
    if failed:
        print("\nfailed:")
        for binary, name in failed:
            print(f"  {binary}: {name}")
    if retries:
        print("\ntried again:")
        for n in retries:
            print(f"  {n.removeprefix('ACCURACY RETRY ')}")
    if unchecked:
        print("\naccuracy not checked:")
        for n in unchecked:
            print(f"  {n.removeprefix('ACCURACY NOT CHECKED ')}")


if __name__ == "__main__":
    main()
