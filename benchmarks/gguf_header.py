"""How long and how much memory does reading a GGUF model's shape take?

Two headers written with the gguf package (no weights, one small tensor):
- llama3: a Llama 3 tokenizer (128,256 tokens and their types, 280,147 merges), 8.8 MB;
- strings: two million empty strings in one array (the fifteenth sweep's hostile file), 16 MB.
Each is read in a fresh process by felab's header walker (`felab_core.sizing.gguf_header`, what
`felab size --gguf` uses) and by the gguf package's `GGUFReader` (what it used before); the
time is the median of --repeat runs, the memory the process's peak RSS.

    .venv/bin/python benchmarks/gguf_header.py [--repeat 3] [--quick]
Writes benchmarks/results/gguf_header.json and prints a Markdown table for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_WRITE = """
import sys, gguf, numpy as np
kind, path, scale = sys.argv[1], sys.argv[2], float(sys.argv[3])
w = gguf.GGUFWriter(path, "llama")
w.add_block_count(32); w.add_head_count(32); w.add_head_count_kv(8)
w.add_embedding_length(4096); w.add_context_length(131072); w.add_name(kind)
if kind == "llama3":
    n = int(128256 * scale)
    w.add_tokenizer_model("gpt2")
    w.add_token_list([f"tok{i}".encode() for i in range(n)])
    w.add_token_types([1] * n)
    w.add_token_merges([f"a{i} b{i}" for i in range(int(280147 * scale))])
else:
    w.add_array("felab.strings", [""] * int(2_000_000 * scale))
w.add_tensor("blk.0.attn_q.weight", np.zeros((64, 64), dtype=np.float32))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
"""

_READ = """
import resource, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[3])
started = time.perf_counter()
if sys.argv[1] == "felab":
    from felab_core.sizing.gguf_header import read_header
    header = read_header(Path(sys.argv[2]))
    assert header.value("llama.block_count") == 32 and len(header.tensors) == 1
else:
    from gguf import GGUFReader
    reader = GGUFReader(sys.argv[2], "r")
    assert int(reader.fields["llama.block_count"].contents()) == 32
took = time.perf_counter() - started
print(took, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def read_once(reader: str, path: Path) -> tuple[float, float]:
    done = subprocess.run(
        [sys.executable, "-c", _READ, reader, str(path), str(ROOT)],
        capture_output=True,
        text=True,
        check=True,
    )
    took, peak_mb = done.stdout.split()
    return float(took), float(peak_mb)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="tiny headers, one run (seconds)")
    args = parser.parse_args()
    scale, repeat = (0.02, 1) if args.quick else (1.0, args.repeat)
    rows = []
    with tempfile.TemporaryDirectory(prefix="felab-gguf-") as tmp:
        for kind in ("llama3", "strings"):
            path = Path(tmp) / f"{kind}.gguf"
            subprocess.run([sys.executable, "-c", _WRITE, kind, str(path), str(scale)], check=True)
            for reader in ("felab", "gguf"):
                runs = [read_once(reader, path) for _ in range(repeat)]
                rows.append(
                    {
                        "header": kind,
                        "file_mb": round(path.stat().st_size / 1e6, 1),
                        "reader": reader,
                        "median_s": round(statistics.median(r[0] for r in runs), 3),
                        "peak_rss_mb": round(max(r[1] for r in runs)),
                    }
                )
                print(rows[-1], flush=True)
    print("\n| header | file | reader | time (median) | peak memory |\n|---|---:|---|---:|---:|")
    for row in rows:
        name = "felab's walker" if row["reader"] == "felab" else "gguf's GGUFReader"
        print(
            f"| {row['header']} | {row['file_mb']} MB | {name} | {row['median_s']} s "
            f"| {row['peak_rss_mb']} MB |"
        )
    if not args.quick:
        out = ROOT / "benchmarks" / "results" / "gguf_header.json"
        out.write_text(
            json.dumps(
                {
                    "when": datetime.now(UTC).isoformat(timespec="seconds"),
                    "machine": platform.platform(),
                    "repeat": repeat,
                    "rows": rows,
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
