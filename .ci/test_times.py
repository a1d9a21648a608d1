"""Print where the test suite's time went, per test file, from the JUnit XML a pytest run wrote.

CI must stay under 25 minutes on a 2-core machine, and pytest's --durations lists single tests only:
the time is spread over ~1,900 of them, so the file totals say where cutting would pay.
Usage: python .ci/test_times.py junit.xml [N]
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import defaultdict


def main() -> None:
    path, top = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 25
    seconds: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for case in ET.parse(path).iter("testcase"):
        module = case.get("classname", "").split("::")[0]
        seconds[module] += float(case.get("time", 0))
        counts[module] += 1
    total = sum(seconds.values())
    print(f"test time by file, slowest {top} of {len(seconds)} ({total:.0f} s in all):")
    for module, s in sorted(seconds.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{s:8.1f} s {100 * s / total:5.1f}% {counts[module]:4d} tests  {module}")


if __name__ == "__main__":
    main()
