"""Turns the `memprobe ab` reports under docs/evidence/raw/ into
docs/evidence/<RULE>.json (the figures, as data) and docs/evidence/<RULE>.md
(the "Measured effect" section memlint appends to the rule's doc).
Run by docs/evidence/measure.sh; standard library only."""
import json
import pathlib
import re
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
STEPS = {}
# STEPS from scenarios.py without importing torch.
exec(re.search(r"STEPS = \{.*?\n\}", (HERE / "scenarios.py").read_text(), re.S).group(0))

MIB = 1024 * 1024

# What each comparison is, and how to read it. {delta}, {per_step}, {steps}
# are filled from the measurement.
TEXT = {
    ("ML201", "eval"): (
        "evaluation forward with autograd recording (A) vs under `torch.no_grad()` (B), "
        "MLP 1024→2048→2048→10, batch 2048, {steps} steps",
        "Recording autograd in evaluation keeps every layer's saved activations alive until the "
        "output is dropped: peak host RSS {change_rss} with no_grad; wall time {time_verdict}.",
    ),
    ("ML202", "backward"): (
        "`total = total + loss` (A) vs `total += loss.item()` (B) in a training loop that calls "
        "`backward()` every step, small MLP, {steps} steps",
        "Once `backward()` has run, the saved activations of each step are freed; what `total` still "
        "keeps alive is every step's autograd nodes and its loss scalar: {delta} more peak host RSS over "
        "{steps} steps, about {per_step} per step (with `.item()`: {change_rss}), and it grows "
        "without bound over a long run.",
    ),
    ("ML202", "no-backward"): (
        "`total = total + loss` (A) vs `total += loss.item()` (B) with no `backward()` "
        "(an evaluation loop with grad enabled), MLP 1024→2048→2048→10, batch 2048, {steps} steps",
        "Without `backward()` nothing frees the saved activations: each step's whole activations stay "
        "reachable from `total`: {delta} more peak host RSS over {steps} steps, about {per_step} per "
        "step (with `.item()`: {change_rss}).",
    ),
    ("ML302", "workers"): (
        "a `DataLoader` over a dataset that crops, flips, jitters and normalises each 3x112x112 image "
        "on the CPU, with `num_workers=0` (A) vs `num_workers=4` (B), a small conv net, batch 64, "
        "{steps} steps",
        "Here the training step itself runs on the CPU, so the workers and the step compete for the "
        "same cores (this machine has 2): wall time {time_verdict}, and the process tree's peak RSS "
        "{change_rss} (each worker is a process of its own; RSS counts pages they share once per "
        "process). The gain ML302 names needs a GPU: there the training process only launches kernels "
        "and the loading is the part of the step it no longer waits for. Not measured on a GPU yet.",
    ),
    ("ML305", "item"): (
        "`total += loss.item()` every step (A) vs `total += loss.detach()` read every 50 steps (B), "
        "MLP 128→256→256→10, batch 64, {steps} steps",
        "On the CPU every op has finished when it returns, so a read back has nothing to wait for: "
        "wall time {time_verdict}, peak host RSS {change_rss}. The cost ML305 names is a GPU's: the "
        "host waits for the queued kernels and the GPU idles while the next step is launched.",
    ),
    ("ML308", "frozen"): (
        "Adam over all of `model.parameters()` (A) vs over the trainable ones only (B), the first two "
        "of three linear layers frozen, MLP 1024→2048→2048→2048→10, batch 2048, {steps} steps",
        "Frozen parameters never get a `.grad`, and Adam allocates no state for them and skips them at "
        "each step: peak host RSS {change_rss}, wall time {time_verdict}. The cost of handing them to "
        "the optimizer is small, which is why ML308 is info and off by default.",
    ),
}
STEP_KEY = {
    ("ML201", "eval"): "ML201",
    ("ML202", "backward"): "ML202-backward",
    ("ML202", "no-backward"): "ML202-no-backward",
    ("ML302", "workers"): "ML302",
    ("ML305", "item"): "ML305",
    ("ML308", "frozen"): "ML308",
}
# Comparisons whose expected effect is small: the reading reports the
# figures as measured instead of deferring to a GPU measurement.
SMALL_EFFECT = {("ML308", "frozen"), ("ML302", "workers"), ("ML305", "item")}
PENDING = {
    "ML305": "the GPU figure (the host waiting for queued kernels every step) waits for a machine with an NVIDIA GPU.",
    "ML203": "the CPU measurement was inconclusive: host RSS grew by the same amount whether the view or a copy was kept, so it shows the host allocator's retention rather than the view; the figure needs the CUDA caching allocator's allocated-bytes counter (a machine with an NVIDIA GPU).",
    "ML401": "measured by `memprobe bench --amp` (docs/probe.md): on this CPU without native bf16, autocast is 6–23× slower than fp32; the GPU figure waits for a machine with an NVIDIA GPU.",
}


def mib(b):
    return f"{b / MIB:.1f} MiB"


def human(b):
    return f"{b / 1024:.0f} KiB" if abs(b) < MIB else mib(b)


def comparison(report, what):
    for c in report["comparisons"]:
        if c["what"] == what:
            return c
    raise KeyError(what)


def describe(c):
    words = {"better": {"time": "faster", "memory": "smaller"}, "worse": {"time": "slower", "memory": "larger"}}
    v = c["verdict"]
    verdict = words.get(v, {}).get(c["metric"], v.replace("-", " "))
    change = c.get("change")
    s = verdict
    if change is not None:
        s += f" ({change * 100:+.1f}%"
        if c.get("interval"):
            lo, hi = c["interval"]
            s += f", {c['confidence'] * 100:.0f}% CI [{lo * 100:+.1f}%, {hi * 100:+.1f}%]"
        if c.get("p_value") is not None:
            s += f", p={c['p_value']:.3f}"
        s += ")"
    return s


def main():
    out = {}
    for raw in sorted((HERE / "raw").glob("*.json")):
        rule, name = raw.stem.split("-", 1)
        r = json.loads(raw.read_text())
        rss = comparison(r, "peak RSS (tree)")
        tm = comparison(r, "wall time")
        steps = STEPS[STEP_KEY[(rule, name)]]
        delta = rss["new"]["median"] - rss["base"]["median"]  # B - A
        grown = -delta
        scenario, reading = TEXT[(rule, name)]
        noisy = rss["verdict"] != "better" and (rule, name) not in SMALL_EFFECT
        if noisy:
            reading = (
                "On this CPU the difference does not stand out of the run-to-run spread of host RSS "
                "(B vs A: {change_rss}); the figure that isolates it is the CUDA caching allocator's, "
                "measured on a machine with an NVIDIA GPU."
            )
        fig = {
            "comparison": name,
            "scenario": scenario.format(steps=steps),
            "device": f"cpu: {r['host']['cpu_model']} ({r['host']['cpu_logical_cores']} logical cores)",
            "date": time.strftime("%Y-%m-%d", time.gmtime(r["created_unix_s"])),
            "torch": None,
            "command": "memprobe ab --runs {} -- python docs/evidence/scenarios.py {} {} --- python docs/evidence/scenarios.py {} {}".format(
                r["runs"], rule, r["a"][-1], rule, r["b"][-1]
            ),
            "runs_per_side": r["runs"],
            "peak_rss_a_bytes": rss["base"]["median"],
            "peak_rss_b_bytes": rss["new"]["median"],
            "peak_rss_verdict": describe(rss),
            "wall_time_a_s": tm["base"]["median"],
            "wall_time_b_s": tm["new"]["median"],
            "wall_time_verdict": describe(tm),
            "steps": steps,
            "per_step_bytes": grown / steps,
            "reading": reading.format(
                delta=mib(grown),
                delta_abs=mib(abs(grown)),
                per_step=human(grown / steps),
                steps=steps,
                change_rss=describe(rss),
                time_verdict=describe(tm),
            ),
            "test": rss["test"],
        }
        out.setdefault(rule, []).append(fig)
    torch_version = None
    venv = pathlib.Path(sys.executable)
    try:
        import importlib.metadata as md

        torch_version = md.version("torch")
    except Exception:
        pass
    for rule in sorted(set(out) | set(PENDING)):
        figs = out.get(rule, [])
        for f in figs:
            f["torch"] = torch_version
        data = {"rule": rule, "generated_by": "docs/evidence/measure.sh", "figures": figs, "pending": PENDING.get(rule)}
        (HERE / f"{rule}.json").write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        md_lines = ["## Measured effect", ""]
        for f in figs:
            md_lines += [
                f"Measured by memprobe on {f['device']}, {f['date']}, torch {f['torch']}: {f['scenario']}.",
                "",
                "| | A (flagged) | B (fixed) | B vs A |",
                "|---|---|---|---|",
                f"| peak host RSS (median of {f['runs_per_side']} runs) | {mib(f['peak_rss_a_bytes'])} | {mib(f['peak_rss_b_bytes'])} | {f['peak_rss_verdict']} |",
                f"| wall time | {f['wall_time_a_s']:.2f} s | {f['wall_time_b_s']:.2f} s | {f['wall_time_verdict']} |",
                "",
                f"{f['reading']}",
                "",
                f"Reproduce: `{f['command']}` ({f['test']}; or `docs/evidence/measure.sh {rule}` to regenerate this section).",
                "",
            ]
        if data["pending"]:
            md_lines += [f"Not measured here yet: {data['pending']}", ""]
        (HERE / f"{rule}.md").write_text("\n".join(md_lines).rstrip() + "\n")
        print(f"wrote docs/evidence/{rule}.json and {rule}.md")


if __name__ == "__main__":
    main()
