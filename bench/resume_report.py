"""Ten SIGKILL + resume cycles of a protocol-A and a protocol-B run against the loopback endpoint: is the
final ``memprobe report`` byte-identical to a clean run's? (issue 38, item 6)

    PYTHONPATH=. python bench/resume_report.py [--kills 10] [--protocols A,B]

Prints, per protocol, the sessions killed mid-run (and the live answers each had recorded), whether
the two reports are identical, and the wall time; exits 1 when one differs (the diff is printed).
"""

from __future__ import annotations

import argparse
import difflib
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.functional.resume_cycles import compare_reports  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--protocols", default="A,B")
    args = parser.parse_args()
    failed = False
    for protocol in args.protocols.split(","):
        started = time.monotonic()
        cycles = compare_reports(protocol, args.kills, Path(tempfile.mkdtemp(prefix=f"memprobe-resume-{protocol}-")),
                                 long=True)
        same = cycles.clean == cycles.resumed
        failed |= not same
        print(f"protocol {protocol}: {cycles.killed} of {args.kills} sessions killed mid-run (live answers at each "
              f"kill: {cycles.live_at_kill}), {cycles.sessions} sessions in all; report "
              f"{'byte-identical' if same else 'DIFFERS'} ({len(cycles.clean.encode()):,} bytes); "
              f"{time.monotonic() - started:.0f} s", flush=True)
        if not same:
            print("".join(difflib.unified_diff(cycles.clean.splitlines(True), cycles.resumed.splitlines(True))))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
