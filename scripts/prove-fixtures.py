#!/usr/bin/env python3
"""Proof by execution: run the fixtures of the rules whose hazard shows at
run time, under the project's torch, on the CPU.

Fixture convention (fixtures/python/MLxxx_*.py for the rules in RULES):
the module defines tiny models and helpers and runs nothing at import;
every case is a top-level function `case_<name>()` taking no arguments.
A case whose body holds a line the header lists as flagged is a flagged
case (exactly one such line per case); every other case is a near miss.
A flagged line outside every case is an error of the fixture. A fixture
whose second line is `# memlint-prove: not measured: <why>` is skipped,
with its reason printed.

- ML101, ML102, ML106, ML304: a flagged case must raise the error the rule's doc
  names; a near miss must run clean. ML106 cases named `case_silent_*` are
  flagged but do not raise (their harm is a wrong update): they must run.
- ML104, ML105: the harm is a wrong gradient, measured. Cases compute each
  micro-batch loss with the module's `loss_fn`; the harness wraps it to
  record the gradient of every such loss (w.r.t. the leaf tensors in its
  graph), and a global optimizer step pre-hook compares `.grad` at each
  step with the recorded gradients:
  - ML104 flagged: at a step after k >= 2 micro-batches, `.grad` equals
    the sum of their gradients (k times the scaled version, their mean);
    near miss: at every such step it equals the gradient one step over
    the large batch would take: the mean, or, for the losses summed over
    the samples that the module names in `SUMMED_LOSSES` (wrapped as
    `loss_fn` is), the sum.
  - ML105 flagged: at some optimizer's second or later step, `.grad`
    equals the sum of every gradient since the start (the first step's
    gradient applied again) and not the sum since its previous step;
    near miss: at every step it equals the sum since its previous step.

Usage: prove-fixtures.py [CODE...] (default: every rule above).
Exit status 0 when every case behaves as its rule says, 1 otherwise.
"""

import ast
import importlib.util
import pathlib
import re
import sys
import traceback
import warnings

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "python"

# The error each raising rule's doc names (crates/memlint_linter/src/rules).
RAISES = {
    "ML101": (
        RuntimeError,
        r"a leaf Variable that requires grad is being used in an in-place operation"
        r"|functions with out=\.\.\. arguments don't support automatic differentiation, but one of the arguments requires grad",
    ),
    "ML102": (RuntimeError, "one of the variables needed for gradient computation has been modified by an inplace operation"),
    "ML304": (
        ValueError,
        r"persistent_workers option needs num_workers > 0"
        r"|prefetch_factor option could only be specified in multiprocessing",
    ),
    "ML106": (
        (RuntimeError, AssertionError),
        r"step\(\) has already been called since the last update\(\)"
        r"|unscale_\(\) has already been called on this optimizer since the last update\(\)"
        r"|No inf checks were recorded prior to update",
    ),
}
MEASURED = ("ML104", "ML105")
RULES = tuple(RAISES) + MEASURED
MIN_CASES = 5


def header(text):
    m = re.match(r"# memlint-fixture: (ML\d+) must flag lines ([\d, ]*)", text)
    if not m:
        raise SystemExit(f"bad fixture header: {text.splitlines()[0]!r}")
    return m.group(1), {int(n) for n in m.group(2).replace(" ", "").split(",") if n}


def cases(path, flagged):
    tree = ast.parse(path.read_text(), str(path))
    out = []
    covered = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("case_"):
            lines = {n for n in flagged if node.lineno <= n <= node.end_lineno}
            covered |= lines
            out.append((node.name, sorted(lines)))
    stray = flagged - covered
    if stray:
        raise SystemExit(f"{path.name}: flagged lines {sorted(stray)} are outside every case_ function")
    return out


def load(path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def leaves(t):
    """Leaf tensors in the autograd graph of `t`."""
    seen, stack, out = set(), [t.grad_fn], []
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        if type(fn).__name__ == "AccumulateGrad":
            out.append(fn.variable)
        stack.extend(f for f, _ in fn.next_functions)
    return out


class Recorder:
    """Gradients of every `loss_fn` loss, and `.grad` at every optimizer step.

    A gradient counts from the last time its parameter was cleared
    (`zero_grad()`, `p.grad = None`): when `loss_fn` runs and finds `.grad`
    None or zero although earlier gradients were accumulated into it (a
    post-accumulate hook says when), those earlier ones were cleared."""

    def __init__(self):
        self.seq = 0
        self.contrib = {}  # id(param) -> [(seq, grad)]
        self.applied = {}  # id(param) -> seq of the last gradient accumulated into .grad
        self.cleared = {}  # id(param) -> gradients up to this seq were cleared
        self.hooked = set()
        self.last_step = {}  # id(optimizer) -> seq of its previous step
        self.steps = []  # (optimizer step number, [(grad, fresh, total, k)])
        self.counts = {}
        self.summed = False  # a loss summed over the samples was recorded

    def wrap(self, fn, summed=False):
        def wrapped(*args, **kwargs):
            loss = fn(*args, **kwargs)
            self.summed |= summed
            ps = [p for p in leaves(loss) if p.requires_grad]
            if ps:
                grads = torch.autograd.grad(loss, ps, retain_graph=True, allow_unused=True)
                self.seq += 1
                for p, g in zip(ps, grads):
                    if id(p) not in self.hooked:
                        self.hooked.add(id(p))
                        p.register_post_accumulate_grad_hook(self.accumulated)
                    if id(p) in self.applied and (p.grad is None or not p.grad.any()):
                        self.cleared[id(p)] = self.applied[id(p)]
                    if g is not None:
                        self.contrib.setdefault(id(p), []).append((self.seq, g.detach().clone()))
            return loss

        return wrapped

    def accumulated(self, p):
        self.applied[id(p)] = self.seq

    def pre_step(self, opt, args, kwargs):
        since = self.last_step.get(id(opt), 0)
        n = self.counts[id(opt)] = self.counts.get(id(opt), 0) + 1
        rows = []
        for group in opt.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                cleared = self.cleared.get(id(p), 0)
                cs = [(s, g) for s, g in self.contrib.get(id(p), []) if s > cleared]
                fresh = [g for s, g in cs if s > since]
                total = [g for _, g in cs]
                if not fresh:
                    continue
                rows.append((p.grad.detach().clone(), sum(fresh), sum(total), len(fresh)))
        self.steps.append((n, rows))
        self.last_step[id(opt)] = self.seq


def close(a, b):
    return torch.allclose(a, b, rtol=1e-4, atol=1e-6)


def measured_verdict(code, flagged, rec):
    steps = [(n, rows) for n, rows in rec.steps if rows]
    if not steps:
        return False, "no optimizer step saw a loss_fn gradient"
    if code == "ML104":
        acc = [(n, rows) for n, rows in steps if all(k >= 2 for *_, k in rows)]
        if not acc:
            if flagged:
                return False, "no step after two or more micro-batches"
            return True, "no step accumulated two or more micro-batches"
        if flagged:
            ok = any(all(close(g, f) and not close(g, f / k) for g, f, _, k in rows) for _, rows in acc)
            ks = sorted({k for _, rows in acc for *_, k in rows})
            return ok, f"grad = sum of {ks} micro-batch gradients (k x their mean)" if ok else "grad is not the unscaled sum"
        if rec.summed:
            ok = all(all(close(g, f) for g, f, _, _ in rows) for _, rows in acc)
            return ok, "grad = sum of the summed losses' gradients, the large batch's" if ok else "grad is not the large batch's sum"
        ok = all(all(close(g, f / k) for g, f, _, k in rows) for _, rows in acc)
        return ok, "grad = mean of the micro-batch gradients" if ok else "grad is not the mean of the micro-batch gradients"
    # ML105
    if flagged:
        ok = any(n >= 2 and any(close(g, t) and not close(g, f) for g, f, t, _ in rows) for n, rows in steps)
        return ok, "a later step applied the earlier steps' gradients again" if ok else "no step re-applied an earlier gradient"
    ok = all(all(close(g, f) for g, f, _, _ in rows) for _, rows in steps)
    return ok, "every step applied only its own gradients" if ok else "a step applied stale gradients"


def run_case(code, module, name, flagged):
    fn = getattr(module, name)
    if code in MEASURED:
        rec = Recorder()
        original = module.loss_fn
        module.loss_fn = rec.wrap(original)
        summed = {n: getattr(module, n) for n in getattr(module, "SUMMED_LOSSES", ())}
        for n, f in summed.items():
            setattr(module, n, rec.wrap(f, summed=True))
        handle = register_optimizer_step_pre_hook(rec.pre_step)
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            return False, f"raised {type(e).__name__}: {e}"
        finally:
            handle.remove()
            module.loss_fn = original
            for n, f in summed.items():
                setattr(module, n, f)
        return measured_verdict(code, flagged, rec)
    exc_types, pattern = RAISES[code]
    must_raise = flagged and not name.startswith("case_silent_")
    try:
        fn()
    except exc_types as e:
        if must_raise and re.search(pattern, str(e)):
            return True, f"raised {type(e).__name__}: {str(e).splitlines()[0][:90]}"
        return False, f"raised {type(e).__name__}: {e}"
    except Exception as e:  # noqa: BLE001
        return False, f"raised {type(e).__name__}: {e}\n{traceback.format_exc()}"
    if must_raise:
        return False, "ran clean, expected the rule's error"
    return True, "ran clean"


def main():
    only = set(sys.argv[1:])
    warnings.simplefilter("ignore")
    torch.manual_seed(0)
    failures = 0
    seen = set()
    for path in sorted(FIXTURES.glob("ML*.py")):
        text = path.read_text()
        code, flagged_lines = header(text)
        if code not in RULES or only and code not in only:
            continue
        # A fixture whose near misses rest on something a run of its cases
        # cannot show (an optimizer whose step ignores the gradient's
        # scale: the gradients still differ) says so on its second line.
        skip = re.match(r"# memlint-prove: not measured: (.+)", text.splitlines()[1] if text.count("\n") else "")
        if skip:
            print(f"skip {path.name}: {skip.group(1)}")
            continue
        seen.add(code)
        found = cases(path, flagged_lines)
        module = load(path)
        n_flag = n_miss = 0
        for name, lines in found:
            flagged = bool(lines)
            if len(lines) > 1:
                print(f"FAIL {path.name}:{name}: {len(lines)} flagged lines {lines}; one per case")
                failures += 1
                continue
            n_flag += flagged
            n_miss += not flagged
            ok, why = run_case(code, module, name, flagged)
            kind = f"flag line {lines[0]}" if flagged else "near miss"
            print(f"{'ok  ' if ok else 'FAIL'} {code} {name} ({kind}): {why}")
            failures += not ok
        for what, n in (("flagged cases", n_flag), ("near misses", n_miss)):
            if n < MIN_CASES:
                print(f"FAIL {path.name}: {n} {what}, at least {MIN_CASES} required")
                failures += 1
    for code in RULES:
        if code not in seen and (not only or code in only):
            print(f"FAIL {code}: no runnable fixture")
            failures += 1
    print(f"prove-fixtures: {'all cases behave as their rules say' if not failures else f'{failures} failure(s)'} (torch {torch.__version__})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
