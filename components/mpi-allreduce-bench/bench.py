"""All-reduce latency and bandwidth over message sizes, with mpi4py, on every rank of an MPI job.

For each power-of-two message size from ``--min-bytes`` to ``--max-bytes``: ``--warmup``
untimed calls, a barrier, then ``--iterations`` timed ``MPI.COMM_WORLD.Allreduce`` calls
(SUM) of a buffer whose expected result is known, so every rank checks every element of the
result. The time per call is averaged over the iterations on each rank, then over the ranks,
and reported as nccl-tests does:

* ``latency_us``: the time of one all-reduce, in microseconds;
* ``algbw_gbps``: algorithm bandwidth, message bytes / time (GB/s, 1 GB = 1e9 bytes);
* ``busbw_gbps``: bus bandwidth, algbw x 2(n-1)/n for n ranks: what each link carries in a
  ring all-reduce, comparable across rank counts.

Rank 0 logs them to MLflow through ``distcomp.runtime`` with step = message size in bytes,
and writes ``results.csv``, ``results.json`` and ``allreduce.svg`` (latency and bus
bandwidth against size: matplotlib when it is installed, else an SVG drawn here) to
``--out``, which are also logged as artifacts. A wrong result fails the job (exit 1) after
the results are written.
"""

from __future__ import annotations

import argparse
import csv
import json
import html
import math
from pathlib import Path
from typing import Any, Sequence

from distcomp import runtime

DTYPES = ("float32", "float64", "int32")
COLUMNS = ("size_bytes", "count", "dtype", "iterations", "latency_us", "algbw_gbps", "busbw_gbps", "correct")
PATTERN = 251  # element i of rank r sends (i % PATTERN) + r: exact in every dtype, and position-dependent


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="mpi4py all-reduce benchmark")
    parser.add_argument("--min-bytes", type=int, default=8, help="smallest message (rounded up to a power of two)")
    parser.add_argument("--max-bytes", type=int, default=1 << 22, help="largest message")
    parser.add_argument("--iterations", type=int, default=50, help="timed all-reduces per size")
    parser.add_argument("--warmup", type=int, default=10, help="untimed all-reduces per size first")
    parser.add_argument("--dtype", choices=DTYPES, default="float32")
    parser.add_argument("--plot", choices=("auto", "matplotlib", "builtin"), default="auto",
                        help="auto: matplotlib if installed, else the built-in SVG writer")
    parser.add_argument("--out", type=Path, required=True, help="folder for results.csv, results.json, the plot")
    args = parser.parse_args(argv)
    if args.min_bytes < 1 or args.max_bytes < args.min_bytes:
        parser.error("need 1 <= --min-bytes <= --max-bytes")
    if args.iterations < 1 or args.warmup < 0:
        parser.error("need --iterations >= 1 and --warmup >= 0")
    return args


def message_sizes(lo: int, hi: int, itemsize: int) -> list[int]:
    """Powers of two in [lo, hi], at least one element each."""
    size = 1 << max(lo - 1, itemsize - 1).bit_length()  # the first power of two >= max(lo, itemsize)
    out = []
    while size <= hi:
        out.append(size)
        size *= 2
    if not out:
        raise SystemExit(f"no power of two of at least {itemsize} bytes (one {itemsize}-byte element) "
                         f"lies in [{lo}, {hi}]")
    return out


def bus_factor(world: int) -> float:
    """nccl-tests' all-reduce bus bandwidth factor 2(n-1)/n."""
    return 2.0 * (world - 1) / world if world > 1 else 1.0


def measure(comm: Any, size: int, dtype: Any, iterations: int, warmup: int) -> dict[str, Any]:
    """One message size: timings averaged over the ranks, and whether every rank got the right sum."""
    import numpy as np
    from mpi4py import MPI

    world = comm.Get_size()
    count = size // dtype.itemsize
    pattern = np.arange(count) % PATTERN
    send = (pattern + comm.Get_rank()).astype(dtype)
    recv = np.zeros_like(send)
    for _ in range(warmup):
        comm.Allreduce(send, recv, op=MPI.SUM)
    comm.Barrier()
    start = MPI.Wtime()
    for _ in range(iterations):
        comm.Allreduce(send, recv, op=MPI.SUM)
    seconds = (MPI.Wtime() - start) / iterations
    seconds = comm.allreduce(seconds, op=MPI.SUM) / world  # nccl-tests reports the mean over the ranks
    expected = (pattern * world + world * (world - 1) // 2).astype(dtype)
    wrong = int(np.count_nonzero(recv != expected))
    wrong = comm.allreduce(wrong, op=MPI.SUM)
    algbw = size / seconds / 1e9
    return {"size_bytes": size, "count": count, "dtype": dtype.name, "iterations": iterations,
            "latency_us": seconds * 1e6, "algbw_gbps": algbw, "busbw_gbps": algbw * bus_factor(world),
            "correct": wrong == 0, "wrong_elements": wrong}


def human_bytes(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:g}{unit}"
        size /= 1024
    raise AssertionError("unreachable")


def plot_matplotlib(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["size_bytes"] for r in rows]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 7), sharex=True)
    top.loglog(sizes, [r["latency_us"] for r in rows], "o-", base=2)
    top.set_ylabel("latency (us)")
    bottom.semilogx(sizes, [r["busbw_gbps"] for r in rows], "o-", base=2, label="bus bandwidth")
    bottom.semilogx(sizes, [r["algbw_gbps"] for r in rows], "s--", base=2, label="algorithm bandwidth")
    bottom.set_ylabel("GB/s")
    bottom.set_xlabel("message size (bytes)")
    bottom.legend()
    ticks = sizes[:: max(1, len(sizes) // 8)]
    bottom.set_xticks(ticks, [human_bytes(s) for s in ticks])
    for ax in (top, bottom):
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, format="svg")
    plt.close(fig)


def plot_builtin(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    """The same two panels as plain SVG, for an environment without matplotlib."""
    width, left, right, panel_h, gap, top_margin = 640, 80, 20, 240, 60, 40
    xs = [math.log2(r["size_bytes"]) for r in rows]
    x_lo, x_hi = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1

    def sx(v: float) -> float:
        return left + (v - x_lo) / (x_hi - x_lo) * (width - left - right)

    parts = [f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15">{html.escape(title)}</text>']
    panels = [("latency (us, log scale)", [r["latency_us"] for r in rows], True),
              ("bus bandwidth (GB/s)", [r["busbw_gbps"] for r in rows], False)]
    for i, (label, values, log) in enumerate(panels):
        y0 = top_margin + i * (panel_h + gap)
        ys = [math.log10(max(v, 1e-12)) for v in values] if log else list(values)
        y_lo, y_hi = (min(ys), max(ys)) if log else (0.0, max(ys) or 1.0)
        if y_hi <= y_lo:
            y_hi = y_lo + 1

        def sy(v: float, y0: float = y0, y_lo: float = y_lo, y_hi: float = y_hi) -> float:
            return y0 + panel_h - (v - y_lo) / (y_hi - y_lo) * panel_h

        parts.append(f'<rect x="{left}" y="{y0}" width="{width - left - right}" height="{panel_h}" '
                     'fill="none" stroke="black"/>')
        parts.append(f'<text x="16" y="{y0 + panel_h / 2}" font-size="12" '
                     f'transform="rotate(-90 16 {y0 + panel_h / 2})" text-anchor="middle">{label}</text>')
        for k in range(5):  # y ticks
            v = y_lo + (y_hi - y_lo) * k / 4
            shown = 10 ** v if log else v
            parts.append(f'<text x="{left - 6}" y="{sy(v) + 4:.1f}" font-size="10" text-anchor="end">'
                         f'{shown:.3g}</text>')
        points = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in zip(xs, ys))
        parts.append(f'<polyline points="{points}" fill="none" stroke="#1f77b4" stroke-width="2"/>')
        parts += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="#1f77b4"/>' for x, y in zip(xs, ys)]
    axis_y = top_margin + 2 * panel_h + gap
    step = max(1, len(rows) // 8)
    for r, x in list(zip(rows, xs))[::step]:
        parts.append(f'<text x="{sx(x):.1f}" y="{axis_y + 16}" font-size="10" text-anchor="middle">'
                     f'{human_bytes(r["size_bytes"])}</text>')
    parts.append(f'<text x="{width / 2}" y="{axis_y + 36}" font-size="12" text-anchor="middle">'
                 'message size (bytes, log scale)</text>')
    height = axis_y + 50
    path.write_text(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
                    f'viewBox="0 0 {width} {height}" font-family="sans-serif">\n'
                    '<rect width="100%" height="100%" fill="white"/>\n' + "\n".join(parts) + "\n</svg>\n")


def plot(rows: list[dict[str, Any]], path: Path, title: str, how: str) -> str:
    """Draw the results to ``path``; returns which plotter drew them."""
    if how in ("auto", "matplotlib"):
        try:
            plot_matplotlib(rows, path, title)
            return "matplotlib"
        except ImportError:
            if how == "matplotlib":
                raise
    plot_builtin(rows, path, title)
    return "builtin"


def write_results(rows: list[dict[str, Any]], out: Path, summary: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with (out / "results.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    (out / "results.json").write_text(json.dumps({**summary, "results": rows}, indent=1))


def main() -> None:
    args = parse_args()
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    dtype = np.dtype(args.dtype)
    sizes = message_sizes(args.min_bytes, args.max_bytes, dtype.itemsize)
    runtime.log_params({"world_size": world, "mpi_library": MPI.Get_library_version().splitlines()[0][:200],
                        "sizes": len(sizes)})
    if rank == 0:
        print(f"{world} ranks, {args.dtype}, {human_bytes(sizes[0])}..{human_bytes(sizes[-1])}, "
              f"{args.iterations} iterations after {args.warmup} warm-up\n"
              f"{'size':>10} {'latency_us':>12} {'algbw_GB/s':>11} {'busbw_GB/s':>11}  ok", flush=True)
    rows = []
    for size in sizes:
        row = measure(comm, size, dtype, args.iterations, args.warmup)
        rows.append(row)
        runtime.log_metrics({k: row[k] for k in ("latency_us", "algbw_gbps", "busbw_gbps")}, step=size)
        if rank == 0:
            print(f"{human_bytes(size):>10} {row['latency_us']:12.2f} {row['algbw_gbps']:11.4f} "
                  f"{row['busbw_gbps']:11.4f}  {'yes' if row['correct'] else 'NO'}", flush=True)
    wrong = [r["size_bytes"] for r in rows if not r["correct"]]
    summary = {"world_size": world, "dtype": args.dtype, "warmup": args.warmup, "all_correct": not wrong,
               "peak_busbw_gbps": max(r["busbw_gbps"] for r in rows),
               "min_latency_us": min(r["latency_us"] for r in rows)}
    runtime.log_metrics({k: float(summary[k]) for k in ("peak_busbw_gbps", "min_latency_us", "all_correct")})
    if rank == 0:
        write_results(rows, args.out, summary)
        plotter = plot(rows, args.out / "allreduce.svg", f"MPI_Allreduce, {world} ranks, {args.dtype}", args.plot)
        runtime.log_param("plotter", plotter)
        for name in ("results.csv", "results.json", "allreduce.svg"):
            runtime.log_artifact(args.out / name)
        print(f"peak bus bandwidth {summary['peak_busbw_gbps']:.3f} GB/s, smallest latency "
              f"{summary['min_latency_us']:.1f} us; plot by {plotter} in {args.out}", flush=True)
    comm.Barrier()
    if wrong:
        raise SystemExit(f"rank {rank}: wrong all-reduce results at sizes {wrong}")


if __name__ == "__main__":
    main()
