"""Steps the same model and batch in memprobe (tch, Rust) and in PyTorch eager
(Python), alternating between them, and prints the ratio of median step times.

Goal: memprobe's baseline step within 1.05x of PyTorch's, so memprobe measures
the optimizations rather than its own overhead. Both sides: same architecture,
same batch size, fp32, Adam(lr=1e-3) over all parameters, gradients zero-filled
(optimizer.zero_grad(set_to_none=False), memprobe's baseline), each measured
repeat in a fresh process, warm-up steps excluded, libtorch's default threads.

Known difference that is not overhead: tch's Adam is libtorch's C++ optimizer
(a per-parameter loop); Python's CPU default is the single-tensor loop too.

Usage: python scripts/bench-vs-pytorch.py --memprobe target/release/memprobe [--workload mlp|transformer]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def build_model(workload):
    import torch
    import torch.nn.functional as F

    if workload == "mlp":
        # memprobe mlp --size small: 64 -> 256 x4 (linear+ReLU) -> 10, batch 8192
        batch, inp, hidden, depth, classes = 8192, 64, 256, 4, 10
        layers = []
        for i in range(depth):
            layers += [torch.nn.Linear(inp if i == 0 else hidden, hidden), torch.nn.ReLU()]
        layers.append(torch.nn.Linear(hidden, classes))
        model = torch.nn.Sequential(*layers)

        def batch_fn(step):
            g = torch.Generator().manual_seed(step)
            return torch.randn(batch, inp, generator=g), torch.randint(classes, (batch,), generator=g)

        return model, batch_fn, lambda out, y: F.cross_entropy(out, y)

    # memprobe transformer --size small: batch 8, seq 64, d 128, 4 heads, 2 layers, vocab 512
    batch, seq, dim, heads, depth, vocab = 8, 64, 128, 4, 2, 512

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = torch.nn.LayerNorm(dim)
            self.qkv = torch.nn.Linear(dim, 3 * dim)
            self.proj = torch.nn.Linear(dim, dim)
            self.ln2 = torch.nn.LayerNorm(dim)
            self.fc1 = torch.nn.Linear(dim, 4 * dim)
            self.fc2 = torch.nn.Linear(4 * dim, dim)

        def forward(self, x):
            b, t, d = x.shape
            qkv = self.qkv(self.ln1(x)).view(b, t, 3, heads, d // heads).permute(2, 0, 3, 1, 4)
            att = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=True)
            x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class Decoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = torch.nn.Embedding(vocab, dim)
            self.pos = torch.nn.Embedding(seq + 16, dim)
            self.layers = torch.nn.ModuleList([Layer() for _ in range(depth)])
            self.ln = torch.nn.LayerNorm(dim)
            self.out = torch.nn.Linear(dim, vocab)

        def forward(self, x):
            h = self.tok(x) + self.pos(torch.arange(x.shape[1]))
            for layer in self.layers:
                h = layer(h)
            return self.out(self.ln(h))

    def batch_fn(step):
        g = torch.Generator().manual_seed(step)
        return torch.randint(vocab, (batch, seq), generator=g), torch.randint(vocab, (batch, seq), generator=g)

    return Decoder(), batch_fn, lambda out, y: F.cross_entropy(out.view(-1, vocab), y.view(-1))


def pytorch_worker(workload, warmup, steps):
    """One measured repeat in this (fresh) process; prints step times as JSON."""
    import torch

    torch.manual_seed(0)
    model, batch_fn, loss_fn = build_model(workload)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    batches = [batch_fn(i) for i in range(min(warmup + steps, 4))]
    times = []
    for s in range(warmup + steps):
        x, y = batches[s % len(batches)]
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        t1 = time.perf_counter()
        if s >= warmup:
            times.append((t1 - t0) * 1e3)
    print(json.dumps({"times_ms": times, "threads": torch.get_num_threads(), "torch": torch.__version__}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprobe", required=True)
    ap.add_argument("--workload", default="mlp", choices=["mlp", "transformer"])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        pytorch_worker(a.workload, a.warmup, a.steps)
        return

    mp_times, py_times, threads, version = [], [], None, None
    with tempfile.TemporaryDirectory() as d:
        report = os.path.join(d, "r.json")
        for r in range(a.repeats):
            # Alternate the two so machine drift hits both equally.
            subprocess.run(
                [a.memprobe, "bench", "--device", "cpu", "--workload", a.workload, "--runs", "1",
                 "--warmup", str(a.warmup), "--steps", str(a.steps), "--quiet", "--json", report],
                check=True, stdout=subprocess.DEVNULL)
            with open(report) as f:
                rep = json.load(f)
            base = next(v for v in rep["variants"] if v["id"] == "baseline")
            mp_times += base["runs"][0]["step_times_ms"]
            out = subprocess.run(
                [sys.executable, __file__, "--worker", "--workload", a.workload,
                 "--warmup", str(a.warmup), "--steps", str(a.steps), "--memprobe", a.memprobe],
                check=True, capture_output=True, text=True).stdout
            res = json.loads(out.strip().splitlines()[-1])
            py_times += res["times_ms"]
            threads, version = res["threads"], res["torch"]
            print(f"repeat {r + 1}/{a.repeats}: memprobe {statistics.median(base['runs'][0]['step_times_ms']):.2f} ms,"
                  f" pytorch {statistics.median(res['times_ms']):.2f} ms", file=sys.stderr)

    def q(v):
        s = sorted(v)
        qs = statistics.quantiles(s, n=4, method="inclusive")
        return statistics.median(s), qs[2] - qs[0]

    mp, mp_iqr = q(mp_times)
    py, py_iqr = q(py_times)
    ratio = mp / py
    print(f"workload {a.workload} (small), CPU, torch {version}, {threads} threads, "
          f"{a.repeats} repeats x {a.steps} steps after {a.warmup} warm-up")
    print(f"memprobe (tch)   : {mp:.2f} ms/step (IQR {mp_iqr:.2f}, n={len(mp_times)})")
    print(f"PyTorch eager    : {py:.2f} ms/step (IQR {py_iqr:.2f}, n={len(py_times)})")
    print(f"ratio memprobe/PyTorch: {ratio:.3f}x (goal <= 1.05x): {'OK' if ratio <= 1.05 else 'ABOVE GOAL'}")


if __name__ == "__main__":
    main()
