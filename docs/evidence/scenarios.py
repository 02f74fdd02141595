"""Training-loop scenarios behind the measured effects in memlint's rule docs.

    python docs/evidence/scenarios.py RULE VARIANT

Each rule has a flagged variant (the hazard) and a fixed one; measure.sh runs
them alternately under `memprobe ab` and render.py turns the reports into
docs/evidence/<RULE>.json and the "Measured effect" section of the rule doc.
Everything runs on the CPU unless the scenario needs CUDA (then it exits 3
with a message, and the doc says the figure waits for a GPU machine).
"""
import sys

import torch
import torch.nn as nn

torch.manual_seed(0)

# Steps per scenario, also read by render.py to give a per-step figure.
STEPS = {
    "ML201": 10,
    "ML202-backward": 1000,
    "ML202-no-backward": 12,
    "ML203": 40,
    "ML204": 20,
    "ML302": 60,
    "ML305": 400,
    "ML308": 20,
    "ML401": 6,
}


def mlp(width=2048, depth=2, inp=1024, out=10):
    layers, d = [], inp
    for _ in range(depth):
        layers += [nn.Linear(d, width), nn.ReLU()]
        d = width
    layers.append(nn.Linear(d, out))
    return nn.Sequential(*layers)


def batch(n=2048, inp=1024):
    return torch.randn(n, inp), torch.randint(0, 10, (n,))


def ml201(variant):
    # Evaluation forward with autograd recording vs under no_grad.
    model = mlp().eval()
    x, _ = batch()
    for _ in range(STEPS["ML201"]):
        if variant == "grad":
            out = model(x)
        else:
            with torch.no_grad():
                out = model(x)
        out.argmax(dim=1)


def ml202(variant):
    loss_fn = nn.CrossEntropyLoss()
    if variant in ("graph", "item"):
        # A training loop: backward() frees the saved activations, so
        # `total += loss` keeps the autograd nodes and loss scalars only.
        model = mlp(width=64, depth=2, inp=64)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        x, y = batch(64, 64)
        total = 0.0
        for _ in range(STEPS["ML202-backward"]):
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            total = total + (loss if variant == "graph" else loss.item())
    else:
        # No backward (an evaluation loop with grad enabled): every step's
        # whole activations stay reachable from `total`.
        model = mlp()
        x, y = batch()
        total = 0.0
        for _ in range(STEPS["ML202-no-backward"]):
            loss = loss_fn(model(x), y)
            total = total + (loss if variant == "no-backward-graph" else loss.item())
    float(total)


def ml203(variant):
    # Keeping a view keeps the whole base tensor's storage alive.
    kept = []
    for _ in range(STEPS["ML203"]):
        t = torch.randn(1024, 1024)  # 4 MiB
        row = t[0]
        kept.append(row if variant == "view" else row.clone())
    sum(float(r.sum()) for r in kept)


def train(model, opt, steps, set_to_none=True, amp=False):
    loss_fn = nn.CrossEntropyLoss()
    x, y = batch()
    for _ in range(steps):
        opt.zero_grad(set_to_none=set_to_none)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()


def ml204(variant):
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    train(model, opt, STEPS["ML204"], set_to_none=(variant == "none"))


def ml308(variant):
    model = mlp(depth=3)
    for p in list(model.parameters())[:4]:  # the first two linear layers
        p.requires_grad_(False)
    params = model.parameters() if variant == "all" else (p for p in model.parameters() if p.requires_grad)
    opt = torch.optim.Adam(params, lr=1e-3)
    train(model, opt, STEPS["ML308"])


def ml401(variant):
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    train(model, opt, STEPS["ML401"], amp=(variant == "bf16"))


class Augmented(torch.utils.data.Dataset):
    """Images made and augmented on the CPU per sample, as a decoding and
    augmenting image dataset does: a random crop, a flip, a colour jitter
    and normalisation of a 3x96x96 image, in Python and torch ops."""

    def __init__(self, n=60 * 64):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        img = torch.rand(3, 112, 112, generator=g)
        top, left = (int(v) for v in torch.randint(0, 16, (2,), generator=g))
        img = img[:, top:top + 96, left:left + 96]
        if i % 2:
            img = img.flip(-1)
        img = img * (0.8 + 0.4 * torch.rand(3, 1, 1, generator=g))
        img = torch.nn.functional.avg_pool2d(img[None], 3, stride=1, padding=1)[0]
        img = (img - img.mean(dim=(1, 2), keepdim=True)) / (img.std(dim=(1, 2), keepdim=True) + 1e-6)
        return img, i % 10


def ml302(variant):
    # The same training steps fed by a loader without workers (A) or with 4 (B).
    workers = 0 if variant == "workers0" else 4
    loader = torch.utils.data.DataLoader(Augmented(), batch_size=64, shuffle=True, num_workers=workers)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    for step, (x, y) in enumerate(loader):
        if step == STEPS["ML302"]:
            break
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()


def ml305(variant):
    # `.item()` every step (A) vs summing on the device and reading every 50 steps (B).
    model = mlp(width=256, inp=128)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    x, y = batch(n=64, inp=128)
    total = 0.0 if variant == "item" else torch.zeros(())
    for step in range(STEPS["ML305"]):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        if variant == "item":
            total += loss.item()
        else:
            total += loss.detach()
            if step % 50 == 0:
                float(total)


def cuda_only(rule):
    def run(_variant):
        if not torch.cuda.is_available():
            print(f"{rule} needs CUDA (pinned host memory / the caching allocator): no CUDA device here", file=sys.stderr)
            sys.exit(3)
        raise SystemExit(f"{rule}: the CUDA scenario is measured by scripts/gpu-check.sh")
    return run


SCENARIOS = {
    "ML201": ml201,
    "ML202": ml202,
    "ML203": ml203,
    "ML204": ml204,
    "ML205": cuda_only("ML205"),
    "ML302": ml302,
    "ML303": cuda_only("ML303"),
    "ML305": ml305,
    "ML307": cuda_only("ML307"),
    "ML308": ml308,
    "ML401": ml401,
}

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in SCENARIOS:
        sys.exit(f"usage: {sys.argv[0]} {{{'|'.join(SCENARIOS)}}} VARIANT")
    SCENARIOS[sys.argv[1]](sys.argv[2])
