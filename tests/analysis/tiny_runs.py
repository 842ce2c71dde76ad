"""Tiny `fluence` runs for the Python tests of the results files and of analysis/
(tests/analysis/test_*.py): each runs the built binary through scripts/mpirun.sh on 2 ranks
into a work folder and returns the results file's path, or raises with the log's tail.

A test script is called as ``test_<name>.py FLUENCE_BINARY SOURCE_DIR`` (tests/CMakeLists.txt);
``arguments()`` takes those two off sys.argv so that unittest sees the rest.
"""

import os
import subprocess
import sys
import tempfile

QUICKSTART_ROUNDS = 3

# FeO2 with opt-out clients on a small synthetic federation (tests/app/cli_train_private.sh's deck): the
# /privacy and /feo2 groups.
PRIVATE_DECK = """seed = 4
[data.synthetic]
rows = 2000
numeric = 4
categorical = [3]
classes = 2
[partition]
clients = 30
scheme = "label_shards"
shards_per_client = 1
[federation]
rounds = 4
batch_size = 16
[privacy]
mode = "feo2"
sampling_rate = 0.3
noise_multiplier = 0.9
count_noise = 2.0
opt_out_fraction = 0.2
ratio = 0.5
clip = 0.3
"""


def arguments():
    """(fluence binary, source directory), taken off sys.argv."""
    if len(sys.argv) < 3:
        sys.exit(f"usage: {sys.argv[0]} FLUENCE_BINARY SOURCE_DIR [unittest options]")
    fluence, source = sys.argv[1], sys.argv[2]
    del sys.argv[1:3]
    return os.path.abspath(fluence), os.path.abspath(source)


class Runs:
    """Runs `fluence` commands into a temporary folder (removed by cleanup())."""

    def __init__(self, fluence, source):
        self.fluence, self.source = fluence, source
        self.folder = tempfile.TemporaryDirectory(prefix="fluence_py_")
        self.work = self.folder.name

    def cleanup(self):
        self.folder.cleanup()

    def deck(self, name, text):
        """Writes a deck into the work folder; returns its path."""
        path = os.path.join(self.work, name + ".toml")
        with open(path, "w") as f:
            f.write(text)
        return path

    def input(self, name):
        return os.path.join(self.source, "inputs", name)

    def run(self, command, deck, out, *settings, ranks=2):
        """`fluence COMMAND DECK --out WORK/OUT --set ...`; the results file's path."""
        directory = os.path.join(self.work, out)
        line = [os.path.join(self.source, "scripts", "mpirun.sh"), "-n", str(ranks),
                self.fluence, command, deck, "--out", directory, "--quiet"]
        for setting in settings:
            line += ["--set", setting]
        done = subprocess.run(line, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(line)} exited {done.returncode}:\n"
                               + (done.stdout + done.stderr)[-2000:])
        return os.path.join(directory, "results.h5")

    def quickstart(self, out="train", *settings):
        return self.run("train", self.input("quickstart.toml"), out,
                        f"federation.rounds={QUICKSTART_ROUNDS}", *settings)

    def private(self, out="private", *settings):
        return self.run("train", self.deck("private", PRIVATE_DECK), out, *settings)

    def influence(self, out="influence"):
        return self.run("influence", self.input("influence_synthetic.toml"), out,
                        "federation.rounds=5", "influence.vectors=true")

    def whatif(self, out="whatif"):
        return self.run("whatif", self.input("whatif_synthetic.toml"), out,
                        "whatif.test_sample=500", "whatif.repeats=2",
                        "whatif.second_order=true")

    def lia(self, out="lia"):
        return self.run("lia", self.input("lia_synthetic.toml"), out)

    def fldp(self, out="fldp"):
        return self.run("fldp", self.input("fldp_synthetic.toml"), out,
                        "fldp.enumeration_limit=4", "fldp.monte_carlo_samples=16",
                        "fldp.monte_carlo_batches=4", "fldp.retrain_seeds=2")
