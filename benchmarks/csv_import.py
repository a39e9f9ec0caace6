"""How long does `felab numbers import` take on a big results CSV?

60,000 rows as `felab bench` writes them (sweeps of concurrency 1, 4 and 16 over four servers,
one bench run per timestamp), imported by the real `felab` command into a fresh embedded SQLite
database (or --database-url), first import and re-import (every row already there). The same
script runs any checkout's code (--checkout), so one venv times before and after a change:

    .venv/bin/python benchmarks/csv_import.py                       # this checkout
    .venv/bin/python benchmarks/csv_import.py --checkout /work/main # another one (before)

Prints medians of --repeat runs and writes benchmarks/results/csv_import.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from felab_core.engine.results import CSV_COLUMNS  # noqa: E402

_RUN = "from felab.cli.main import app; app()"
SERVERS = ("ollama", "llamacpp", "mlx", "vllm")
MODELS = {"ollama": "llama3.1:8b", "llamacpp": "llama-3.1-8b-q4.gguf", "mlx": "m", "vllm": "v"}


def write_rows(path: Path, n: int) -> None:
    """`n` rows: a bench run per timestamp, each a sweep of three concurrencies."""
    start = datetime(2026, 3, 3, 10, tzinfo=UTC)
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
        out.writeheader()
        for i in range(n):
            run, step = divmod(i, 3)
            server = SERVERS[run % len(SERVERS)]
            row = dict.fromkeys(CSV_COLUMNS, "")
            row.update(
                timestamp=(start + timedelta(seconds=run)).isoformat(),
                host="bench-mac",
                target=server,
                server=server,
                model=MODELS[server],
                preset="day2+custom",  # a -c 1,4,16 sweep is not the preset
                concurrency=str((1, 4, 16)[step]),
                requests="8",
                ok="8",
                failed="0",
                writing_tps_p50=f"{40 + (i % 97) / 10:.1f}",
                tpot_p50_s=f"{1 / (40 + (i % 97) / 10):.6g}",  # as felab bench writes it
                ttft_p50_s=f"{0.1 + (i % 13) / 100:.3f}",
                # written in every row; each run's own (a row with another's figures is a copy)
                request_tps=f"{30 + i / 1e4:.6g}",  # 8 in 0.27 s: a sweep's three fit its second
                output_tps=f"{(30 + i / 1e4) * 100:.6g}",
                felab_version="0.1.0",
            )
            out.writerow(row)


def run_import(checkout: Path, csv_path: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _RUN, "numbers", "import", str(csv_path)],
        cwd=checkout,
        env={**env, "PYTHONPATH": str(checkout)},
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"import failed ({done.returncode}): {done.stderr[-2000:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=60_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--checkout", type=Path, default=ROOT, help="the felab code to time")
    ap.add_argument("--database-url", default=None, help="default: a fresh SQLite file per run")
    ap.add_argument("--label", default=None, help="name of this run in the JSON")
    ap.add_argument("--quick", action="store_true", help="500 rows, once: does it run?")
    args = ap.parse_args()
    if args.quick:
        args.rows, args.repeat = 500, 1
    first, again = [], []
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = Path(tmp) / "results.csv"
        write_rows(csv_path, args.rows)
        for i in range(args.repeat):
            env = {k: v for k, v in os.environ.items() if not k.startswith("FELAB_")}
            env["FELAB_DATA_DIR"] = str(Path(tmp) / f"data{i}")
            env["FELAB_RESULTS_DIR"] = str(Path(tmp) / "results")
            if args.database_url:
                env["FELAB_DATABASE_URL"] = args.database_url
            first.append(run_import(args.checkout, csv_path, env))
            again.append(run_import(args.checkout, csv_path, env))
            print(f"run {i + 1}: first import {first[-1]:.1f} s, again {again[-1]:.1f} s")
    record = {
        "label": args.label or str(args.checkout),
        "rows": args.rows,
        "first_import_s_median": statistics.median(first),
        "reimport_s_median": statistics.median(again),
        "first_import_s": first,
        "reimport_s": again,
        "rows_per_s": args.rows / statistics.median(first),
        "database": "postgresql" if args.database_url else "sqlite",
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}",
        "date": datetime.now(UTC).date().isoformat(),
    }
    out = ROOT / "benchmarks" / "results" / "csv_import.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    runs = json.loads(out.read_text()) if out.exists() else []
    runs = [r for r in runs if r.get("label") != record["label"]] + [record]
    if not args.quick:  # a smoke run's figures are not the ones the docs quote
        out.write_text(json.dumps(runs, indent=1) + "\n")
    print(
        f"| {record['label']} | {args.rows:,} | {record['first_import_s_median']:.1f} s | "
        f"{record['reimport_s_median']:.1f} s | {record['rows_per_s']:,.0f} rows/s |"
    )


if __name__ == "__main__":
    main()
