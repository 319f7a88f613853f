"""How long each long-running command takes to exit after Ctrl-C, SIGTERM and SIGHUP.

Every command runs with a probe that hangs in its worker (``inject_fault = "hang"``, so the
signal always lands mid-probe), gets the signal after ``--delay`` seconds, and the seconds
from the signal to the process's exit are measured; median and max of ``--repeat`` runs.
docs/reliability.md "Streams, reports and signals" has the numbers (issue 24).

    python benchmarks/interrupt_latency.py [--repeat 3] [--delay 9]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

MATRIX = 'schema_version = 1\n[providers.HANG]\nname = "CPUExecutionProvider"\ninject_fault = "hang"\n'


def commands(matrix: str) -> dict[str, list[str]]:
    """Command name -> its arguments, each kept busy by the hanging probe."""
    return {
        "check": ["check", "--matrix", matrix, "--feature", "gqa.prompt", "--timeout", "600"],
        "probe": ["probe", "--matrix", matrix, "--ep", "HANG", "--feature", "gqa.prompt", "--timeout", "600"],
        "bless": ["bless", "--matrix", matrix, "--ep", "HANG", "--feature", "gqa.prompt", "--timeout", "600",
                  "--dry-run"],
        "conformance": ["conformance", "--matrix", matrix, "--case", "test_attention_3d", "--timeout", "600"],
        "selftest": ["selftest", "--feature", "gqa.prompt", "--hang-timeout", "600"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--delay", type=float, default=9.0, help="seconds into the run the signal is sent")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="epaudit-interrupt-") as tmp:
        matrix = os.path.join(tmp, "hang.toml")
        with open(matrix, "w", encoding="utf-8") as fh:
            fh.write(MATRIX)
        print("| command | SIGINT | SIGTERM | SIGHUP |\n|---|---|---|---|")
        for name, argv in commands(matrix).items():
            cells = []
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                times, codes = [], set()
                for _ in range(args.repeat):
                    proc = subprocess.Popen([sys.executable, "-m", "epaudit", *argv], stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL)
                    time.sleep(args.delay)
                    t0 = time.monotonic()
                    proc.send_signal(sig)
                    proc.wait(timeout=120)
                    times.append(time.monotonic() - t0)
                    codes.add(proc.returncode)
                cells.append(f"{statistics.median(times):.3f} ({max(times):.3f})"
                             + ("" if codes == {3} else f" exit {sorted(codes)}"))
            print(f"| `{name}` | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
