"""Sums the test times of a pytest JUnit XML report (run_tests.sh writes
build/pytest-times.xml) by file and by test function (parametrizations
together), slowest first: where to trim to keep CI within its time.

    python build_tools/test_times.py [build/pytest-times.xml] [--top 30]
"""

import argparse
import collections
import xml.etree.ElementTree as ET


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("report", nargs="?", default="build/pytest-times.xml")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args()
    by_file, by_test, count = collections.Counter(), collections.Counter(), collections.Counter()
    total = 0.0
    for case in ET.parse(args.report).getroot().iter("testcase"):
        t = float(case.get("time", 0))
        path = case.get("classname", "").replace(".", "/") + ".py"
        name = case.get("name", "").split("[")[0]
        by_file[path] += t
        by_test[f"{path}::{name}"] += t
        count[path] += 1
        total += t
    print(f"{total:.0f} s in all (worker seconds)")
    for title, table in (("by file", by_file), ("by test function", by_test)):
        print(f"\n{title}:")
        for key, t in table.most_common(args.top):
            extra = f" ({count[key]} tests)" if key in count else ""
            print(f"{t:8.1f} s {100 * t / total:5.1f} %  {key}{extra}")


if __name__ == "__main__":
    main()
