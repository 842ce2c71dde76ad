#!/usr/bin/env python3
"""The FedAvg loop of inputs/fmnist_2nn.toml and inputs/fmnist_cnn.toml in PyTorch, for the
side-by-side comparison in docs/results/networks.md (bench/compare_pytorch.sh runs both).

Not part of Fluence: it needs Debian's python3-torch, which no build or test depends on. The set-up
is McMahan et al. 2017's, as in the decks: Fashion-MNIST pixels in [0, 1]; 100 clients, each two
random shards of 300 images of the label-sorted training set; per round 10 clients drawn without
replacement, each one epoch of SGD (batch 10, no momentum, no weight decay) from the global model;
the average of their models weighted by their sizes; the test loss and accuracy on all 10,000 test
images. float32, torch.set_num_threads(2). PyTorch initializes its layers its own way
(Kaiming-uniform weights, uniform biases); Fluence uses He normal weights and zero biases.

Usage: /usr/bin/python3 bench/pytorch_fedavg.py {2nn,cnn} [--rounds R] [--seed S] [--lr LR]
                                                [--out curve.csv]
"""
import argparse
import gzip
import struct
import time

import numpy as np
import torch
from torch import nn

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(name):
    with gzip.open(f"{DATA}/{name}.gz", "rb") as f:
        data = f.read()
    dims = data[3]
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def model_for(kind):
    if kind == "2nn":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 200), nn.ReLU(), nn.Linear(200, 200),
                             nn.ReLU(), nn.Linear(200, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(7 * 7 * 64, 512), nn.ReLU(), nn.Linear(512, 10))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", choices=["2nn", "cnn"])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--per-round", type=int, default=10)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    train_x = torch.from_numpy(read_idx("train-images-idx3-ubyte").astype(np.float32) / 255.0)
    train_y = torch.from_numpy(read_idx("train-labels-idx1-ubyte").astype(np.int64))
    test_x = torch.from_numpy(read_idx("t10k-images-idx3-ubyte").astype(np.float32) / 255.0)
    test_y = torch.from_numpy(read_idx("t10k-labels-idx1-ubyte").astype(np.int64))
    train_x, test_x = train_x.unsqueeze(1), test_x.unsqueeze(1)  # N x 1 x 28 x 28

    # Two shards of the label-sorted training set per client.
    order = np.argsort(train_y.numpy(), kind="stable")
    shards = args.clients * 2
    shard_rows = len(order) // shards
    shard_order = rng.permutation(shards)
    clients = [np.concatenate([order[s * shard_rows:(s + 1) * shard_rows]
                               for s in shard_order[2 * c:2 * c + 2]])
               for c in range(args.clients)]

    model = model_for(args.model)
    loss_fn = nn.CrossEntropyLoss()
    rows = []
    start = time.perf_counter()
    for round_ in range(1, args.rounds + 1):
        round_start = time.perf_counter()
        chosen = rng.choice(args.clients, size=args.per_round, replace=False)
        global_state = {k: v.clone() for k, v in model.state_dict().items()}
        total = {k: torch.zeros_like(v) for k, v in global_state.items()}
        weight = 0
        for c in chosen:
            model.load_state_dict(global_state)
            optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
            index = clients[c][rng.permutation(len(clients[c]))]
            for b in range(0, len(index), 10):
                batch = torch.from_numpy(index[b:b + 10])
                optimizer.zero_grad()
                loss_fn(model(train_x[batch]), train_y[batch]).backward()
                optimizer.step()
            n = len(clients[c])
            for k, v in model.state_dict().items():
                total[k] += n * v
            weight += n
        model.load_state_dict({k: v / weight for k, v in total.items()})
        train_seconds = time.perf_counter() - round_start
        with torch.no_grad():
            loss, correct = 0.0, 0
            for b in range(0, len(test_y), 1000):
                logits = model(test_x[b:b + 1000])
                loss += loss_fn(logits, test_y[b:b + 1000]).item() * len(logits)
                correct += (logits.argmax(1) == test_y[b:b + 1000]).sum().item()
        seconds = time.perf_counter() - round_start
        rows.append((round_, loss / len(test_y), correct / len(test_y), seconds, train_seconds))
        print(f"round {round_:4d}  test loss {loss / len(test_y):.5f}  test acc "
              f"{100 * correct / len(test_y):6.2f}%  {seconds:.2f} s ({train_seconds:.2f} s "
              f"training)  elapsed {time.perf_counter() - start:.1f} s", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write("round,test_loss,test_accuracy,seconds,train_seconds\n")
            for r in rows:
                f.write(",".join(str(v) for v in r) + "\n")


if __name__ == "__main__":
    main()
