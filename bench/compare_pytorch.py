#!/usr/bin/env python3
"""Fluence against PyTorch on McMahan et al. 2017's FedAvg set-up (docs/results/networks.md).

For each model (2nn, cnn) and seed, runs `fluence train inputs/fmnist_<model>.toml` on 2 ranks
(single precision) and bench/pytorch_fedavg.py (PyTorch 1.13, 2 threads, float32) for the same
number of rounds, and writes:
  - <out>/<model>_<side>_<seed>.csv: round, test loss, test accuracy, seconds per round;
  - <out>/summary.md: per-round time (median over rounds and seeds) and accuracy after the last
    round and averaged over the last 10 rounds (mean over seeds), both sides;
  - <out>/curves.png: the test accuracy curves.
PyTorch (Debian's python3-torch) is needed only here; nothing in Fluence's build or tests uses it.

Usage: /usr/bin/python3 bench/compare_pytorch.py [--models 2nn cnn] [--rounds2nn 100]
           [--roundscnn 30] [--seeds 1 2 3] [--out out/compare_pytorch] [--build build]
"""
import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run_fluence(model, rounds, seed, out, build):
    directory = os.path.join(out, f"{model}_fluence_{seed}")
    command = ["bash", os.path.join(ROOT, "scripts", "mpirun.sh"), "-n", "2",
               os.path.join(build, "fluence"), "train",
               os.path.join(ROOT, "inputs", f"fmnist_{model}.toml"), "--out", directory,
               "--set", f"federation.rounds={rounds}", "--set", f"seed={seed}", "--quiet"]
    subprocess.run(command, check=True)
    import h5py
    with h5py.File(os.path.join(directory, "results.h5"), "r") as f:
        rounds_ = f["/metrics/round"][...]
        loss = f["/metrics/test_loss"][...]
        accuracy = f["/metrics/test_accuracy"][...]
        wall = f["/metrics/wall_time_s"][...]
    seconds = [wall[0]] + [wall[i] - wall[i - 1] for i in range(1, len(wall))]
    return list(zip(rounds_, loss, accuracy, seconds))


def run_pytorch(model, rounds, seed, out):
    path = os.path.join(out, f"{model}_pytorch_{seed}.csv")
    subprocess.run(["/usr/bin/python3", os.path.join(HERE, "pytorch_fedavg.py"), model,
                    "--rounds", str(rounds), "--seed", str(seed), "--out", path], check=True,
                   stdout=subprocess.DEVNULL)
    rows = []
    with open(path) as f:
        next(f)
        for line in f:
            r, loss, accuracy, seconds, _ = line.split(",")
            rows.append((int(r), float(loss), float(accuracy), float(seconds)))
    return rows


def read_csv(path):
    with open(path) as f:
        next(f)
        return [(int(r), float(loss), float(accuracy), float(seconds))
                for r, loss, accuracy, seconds in (line.strip().split(",") for line in f)]


def write_csv(path, rows):
    with open(path, "w") as f:
        f.write("round,test_loss,test_accuracy,seconds\n")
        for row in rows:
            f.write(",".join(str(v) for v in row) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["2nn", "cnn"])
    parser.add_argument("--rounds2nn", type=int, default=100)
    parser.add_argument("--roundscnn", type=int, default=30)
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--out", default=os.path.join(ROOT, "out", "compare_pytorch"))
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--reuse", nargs="*", default=[], choices=["fluence", "pytorch"],
                        help="sides whose CSVs in --out are kept from an earlier run")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    curves = {}
    for model in args.models:
        rounds = args.rounds2nn if model == "2nn" else args.roundscnn
        for seed in args.seeds:
            for side in ("fluence", "pytorch"):
                path = os.path.join(args.out, f"{model}_{side}_{seed}.csv")
                if side in args.reuse:
                    rows = read_csv(path)
                else:
                    print(f"{model} {side} seed {seed}: {rounds} rounds", file=sys.stderr,
                          flush=True)
                    rows = (run_fluence(model, rounds, seed, args.out, args.build)
                            if side == "fluence" else run_pytorch(model, rounds, seed, args.out))
                    write_csv(path, rows)
                curves[(model, side, seed)] = rows
    lines = ["| model | rounds | side | s per round (median) | accuracy after the last round | "
             "mean accuracy, last 10 rounds | speed-up |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: |"]
    for model in args.models:
        stats = {}
        for side in ("fluence", "pytorch"):
            runs = [curves[(model, side, s)] for s in args.seeds]
            seconds = [row[3] for run in runs for row in run[1:]]  # round 1 includes warm-up
            stats[side] = (len(runs[0]), statistics.median(seconds),
                           statistics.mean(run[-1][2] for run in runs),
                           statistics.mean(statistics.mean(row[2] for row in run[-10:])
                                           for run in runs))
        speedup = stats["pytorch"][1] / stats["fluence"][1]
        for side in ("fluence", "pytorch"):
            rounds, median, last, tail = stats[side]
            lines.append(f"| {model} | {rounds} | {side} | {median:.3f} | {100 * last:.2f}% | "
                         f"{100 * tail:.2f}% | {speedup if side == 'fluence' else 1.0:.1f}x |")
    summary = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(summary)
    print(summary)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, axes = plt.subplots(1, len(args.models), figsize=(3.5 * len(args.models), 2.8),
                                squeeze=False)
    for axis, model in zip(axes[0], args.models):
        for side, colour in (("fluence", "#0072B2"), ("pytorch", "#D55E00")):
            for k, seed in enumerate(args.seeds):
                rows = curves[(model, side, seed)]
                axis.plot([r[0] for r in rows], [100 * r[2] for r in rows], color=colour,
                          alpha=0.8, linewidth=0.9, label=side if k == 0 else None)
        axis.set_title({"2nn": "2NN", "cnn": "CNN"}[model])
        axis.set_xlabel("round")
        axis.set_ylabel("test accuracy (%)")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(os.path.join(args.out, "curves.png"), dpi=200)


if __name__ == "__main__":
    main()
