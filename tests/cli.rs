//! End-to-end tests of the `memlint` binary on temporary trees.

use tests::*;
use std::process::Command;
use tempfile::TempDir;

const CLEAN: &str = "import torch\n\n\n@torch.no_grad()\ndef evaluate(model, x):\n    model.eval()\n    return model(x)\n";

fn tree() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "src/train.py", TRAIN);
    write(dir.path(), "src/clean.py", CLEAN);
    dir
}

#[test]
fn exit_codes() {
    let dir = tree();
    assert_eq!(memlint(dir.path(), &["check", "src/clean.py"]).status.code(), Some(0));
    assert_eq!(memlint(dir.path(), &["check", "src"]).status.code(), Some(1));
    assert_eq!(memlint(dir.path(), &["check", "src", "--exit-zero"]).status.code(), Some(0));
    assert_eq!(memlint(dir.path(), &["check", "src", "--fail-on", "error"]).status.code(), Some(0));
    assert_eq!(memlint(dir.path(), &["check", "src", "--fail-on", "info"]).status.code(), Some(1));
    let bad_flag = memlint(dir.path(), &["check", "--no-such-flag"]);
    assert_eq!(bad_flag.status.code(), Some(2));
    let bad_code = memlint(dir.path(), &["check", "src", "--select", "ML999"]);
    assert_eq!(bad_code.status.code(), Some(2));
    assert!(stderr(&bad_code).contains("ML999"), "{}", stderr(&bad_code));
    let missing = memlint(dir.path(), &["check", "nope"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("`nope` does not exist"));
}

#[test]
fn full_format_snapshot() {
    let dir = tree();
    let o = memlint(dir.path(), &["check", "src"]);
    insta::assert_snapshot!("full", stdout(&o));
}

#[test]
fn concise_format_snapshot() {
    let dir = tree();
    let o = memlint(dir.path(), &["check", "src", "--format", "concise"]);
    insta::assert_snapshot!("concise", stdout(&o));
    let q = memlint(dir.path(), &["check", "src", "--format", "concise", "--quiet"]);
    assert!(!stdout(&q).contains("Found"));
}

#[test]
fn json_format_snapshot() {
    let dir = tree();
    let o = memlint(dir.path(), &["check", "src", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["tool"]["name"], "memlint");
    assert_eq!(v["summary"]["files"], 2);
    assert_eq!(v["summary"]["diagnostics"], 2);
    insta::assert_snapshot!("json", stdout(&o));
}

#[test]
fn json_fix_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "amp.py", "import torch\nscaler = torch.cuda.amp.GradScaler()\n");
    // No declared torch minimum: the fix would break an old torch, so it is unsafe.
    let o = memlint(dir.path(), &["check", "amp.py", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let fix = &v["diagnostics"][0]["fix"];
    assert_eq!(fix["applicability"], "unsafe");
    assert!(fix["message"].as_str().unwrap().contains("needs torch >= 2.3"), "{fix}");
    assert_eq!(fix["edits"][0]["content"], "torch.amp.GradScaler");
    assert_eq!(fix["edits"][1]["content"], "\"cuda\"");
    // A project that requires torch >= 2.4 can take it safely.
    write(dir.path(), "requirements.txt", "numpy\ntorch>=2.4.0\n");
    let o = memlint(dir.path(), &["check", "amp.py", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["diagnostics"][0]["fix"]["applicability"], "safe");
    // One that still supports torch 2.1 cannot.
    write(dir.path(), "pyproject.toml", "[project]\ndependencies = [\"torch >= 2.1, < 3\"]\n");
    let o = memlint(dir.path(), &["check", "amp.py", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let fix = &v["diagnostics"][0]["fix"];
    assert_eq!(fix["applicability"], "unsafe");
    assert!(fix["message"].as_str().unwrap().contains("declares torch >= 2.1"), "{fix}");
}

/// ML401 is about a deprecation of torch 2.4: a project that runs only on
/// an older torch (a pin or cap in its requirements or README, an import
/// of a module torch removed in 2.0) has nothing deprecated.
#[test]
fn deprecated_amp_needs_a_torch_that_deprecates_it() {
    let amp = "import torch\nscaler = torch.cuda.amp.GradScaler()\n";
    let ml401 = |dir: &std::path::Path| stdout(&memlint(dir, &["check", ".", "--format", "concise", "--quiet", "--select", "ML401"]));
    let cases: [(&str, &str, bool); 8] = [
        ("README.md", "# Toy\n\nDeveloped with PyTorch version 1.7.1 and CUDA 11.0.\n", false),
        ("README.md", "## Requirements\n* python3.6/3.7/3.8\n* pytorch 1.10 (pip package)\n", false),
        ("README.md", "```\nconda install pytorch=1.8.1 torchvision -c pytorch\n```\n", false),
        ("requirements.txt", "torch<2.0\nnumpy\n", false),
        ("util.py", "from torch._six import inf\n", false),
        // Compatibility code runs on either torch.
        ("util.py", "try:\n    from torch._six import inf\nexcept ImportError:\n    from torch import inf\n", true),
        ("README.md", "Needs PyTorch version 1.8+ (tested on 2.5).\n", true),
        ("requirements.txt", "torch>=1.8,<3\n", true),
    ];
    for (name, text, reported) in cases {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "train.py", amp);
        write(dir.path(), name, text);
        let out = ml401(dir.path());
        assert_eq!(out.contains("train.py:2:10: ML401"), reported, "{name}: {text:?}\n{out}");
    }
}

/// ML402 points to native AMP: a project pinned to a torch before it
/// (1.6) has only apex.
#[test]
fn apex_is_reported_where_native_amp_exists() {
    let apex = "import torch\nfrom apex import amp\n\n\ndef train(model, optimizer, loader):\n    model, optimizer = amp.initialize(model, optimizer, opt_level=\"O1\")\n    for x, y in loader:\n        loss = model(x, y)\n        with amp.scale_loss(loss, optimizer) as scaled:\n            scaled.backward()\n        optimizer.step()\n";
    for (requirements, reported) in [("torch==1.0\nnumpy\n", false), ("torch>=1.0\n", true), ("torch==1.8.1\n", true)] {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "train.py", apex);
        write(dir.path(), "requirements.txt", requirements);
        let out = stdout(&memlint(dir.path(), &["check", ".", "--format", "concise", "--quiet", "--select", "ML402"]));
        assert_eq!(out.contains("train.py:6:24: ML402"), reported, "{requirements:?}\n{out}");
    }
}

/// A project that declares a PyTorch before 0.4 (`PyTorch 0.2.0` in its
/// README, `Pytorch before 0.4`) is checked as code of that PyTorch, file by
/// file as a `loss.data[0]` marks one: no `no_grad` advice (ML201), no
/// `.data` advice (ML103), no `device=` (ML306).
#[test]
fn a_project_declaring_torch_before_0_4() {
    let eval = "import torch\nfrom torch.autograd import Variable\n\n\ndef evaluate(net, loader):\n    net.eval()\n    for x, y in loader:\n        out = net(Variable(x, volatile=True).cuda())\n        w = net.fc.weight.data\n        noise = torch.zeros(4).cuda()\n";
    let run = |readme: Option<&str>| {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "eval.py", eval);
        if let Some(text) = readme {
            write(dir.path(), "README.md", text);
        }
        stdout(&memlint(dir.path(), &["check", ".", "--format", "concise", "--quiet", "--select", "ML103,ML201,ML306"]))
    };
    let current = run(None);
    assert!(current.contains("eval.py:8:15: ML201"), "{current}");
    for readme in ["## Requirements\n1. PyTorch 0.2.0\n", " - [Pytorch](http://pytorch.org/) before 0.4\n"] {
        assert_eq!(run(Some(readme)), "", "{readme:?}");
    }
}

#[test]
fn superseded_copies_keep_their_deprecated_calls() {
    let apex = "import torch\nfrom apex import amp\n\n\ndef train(model, optimizer, loader):\n    model, optimizer = amp.initialize(model, optimizer, opt_level=\"O1\")\n    for x, y in loader:\n        loss = model(x, y)\n        with amp.scale_loss(loss, optimizer) as scaled:\n            scaled.backward()\n        optimizer.step()\n";
    let cuda_amp = "import torch\n\nscaler = torch.cuda.amp.GradScaler()\n";
    let dir = tempfile::tempdir().unwrap();
    for d in ["", "old/fp16/", "Legacy/", "archive/", "olden/"] {
        write(dir.path(), &format!("{d}train.py"), apex);
        write(dir.path(), &format!("{d}amp.py"), cuda_amp);
    }
    let run = |args: &[&str]| {
        let mut argv = vec!["check", "--format", "concise", "--quiet", "--select", "ML4"];
        argv.extend_from_slice(args);
        stdout(&memlint(dir.path(), &argv))
    };
    let out = run(&["."]);
    let mut files: Vec<&str> = out.lines().filter_map(|l| l.split(':').next()).collect();
    files.dedup();
    // A directory named `olden` holds no superseded copy.
    assert_eq!(files, ["./amp.py", "./olden/amp.py", "./olden/train.py", "./train.py"], "{out}");
    assert_eq!(out.lines().filter(|l| l.starts_with("./train.py:")).count(), 2, "{out}");
    // Only the directories below the one walked count, and a file named on
    // the command line is checked wherever it lies.
    assert_eq!(run(&["old"]).lines().count(), 3, "{}", run(&["old"]));
    assert_eq!(run(&["archive/amp.py"]).lines().count(), 1);
}

#[test]
fn findings_rest_on_facts_from_other_files() {
    let dir = tempfile::tempdir().unwrap();
    // A project decorator defined in one module and used in another.
    write(dir.path(), "pkg/__init__.py", "");
    write(
        dir.path(),
        "pkg/utils.py",
        "import torch\n\ndef smart_inference_mode():\n    def decorate(fn):\n        return torch.inference_mode()(fn)\n    return decorate\n",
    );
    write(
        dir.path(),
        "pkg/val.py",
        "import torch\nfrom .utils import smart_inference_mode\n\n@smart_inference_mode()\ndef evaluate(model, val_loader):\n    model.eval()\n    return [model(x) for x in val_loader]\n\ndef evaluate_plain(model, val_loader):\n    model.eval()\n    return [model(x) for x in val_loader]\n",
    );
    // A helper called from a training loop in another file, after its
    // backward(): no graph needs the parameters there.
    write(dir.path(), "pkg/clip.py", "import torch\n\ndef clip(model):\n    for p in model.parameters():\n        p.data.clamp_(-1, 1)\n");
    // A parameter defined by a class of another file, read through `.data`
    // into a loss that is backpropagated: it trains nothing.
    write(
        dir.path(),
        "pkg/net.py",
        "import torch\nfrom torch import nn\n\nclass Scaled(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.scale = nn.Parameter(torch.ones(1))\n",
    );
    write(
        dir.path(),
        "train.py",
        "import torch\nfrom pkg.clip import clip\nfrom pkg.net import Scaled\n\nnet = Scaled()\n\ndef train(model, loader, opt):\n    for x in loader:\n        opt.zero_grad()\n        out = model(x)\n        loss = (out * net.scale.data).sum()\n        loss.backward()\n        opt.step()\n        clip(net)\n",
    );
    let o = memlint(dir.path(), &["check", ".", "--format", "concise", "--quiet"]);
    let out = stdout(&o);
    assert!(out.contains("pkg/val.py:11:13: ML201"), "{out}");
    assert!(!out.contains("pkg/val.py:7"), "{out}");
    assert!(out.contains("train.py:11:32: ML103"), "{out}");
    assert!(!out.contains("pkg/clip.py"), "{out}");
    // Alone, train.py does not know that `Scaled.scale` is a parameter.
    let o = memlint(dir.path(), &["check", "train.py", "--format", "concise", "--quiet"]);
    assert!(!stdout(&o).contains("ML103"), "{}", stdout(&o));
}

#[test]
fn callers_and_helpers_in_other_files() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "lib/__init__.py", "from .evaluation import evaluate\nfrom .meters import AverageMeter\n");
    write(
        dir.path(),
        "lib/evaluation.py",
        "import torch\n\ndef evaluate(model, val_loader):\n    model.eval()\n    return [model(x) for x in val_loader]\n",
    );
    write(
        dir.path(),
        "lib/meters.py",
        "class AverageMeter:\n    def __init__(self):\n        self.sum = 0.0\n\n    def update(self, val):\n        self.sum += val\n",
    );
    // The only caller runs the evaluation under no_grad, through the package's re-export;
    // the meter of another file accumulates the loss with its graph.
    write(
        dir.path(),
        "run.py",
        "import torch\nimport torch.nn.functional as F\nfrom lib import evaluate, AverageMeter\n\ndef main(model, loader, val_loader, opt):\n    meter = AverageMeter()\n    for x, y in loader:\n        loss = F.cross_entropy(model(x), y)\n        loss.backward()\n        opt.step()\n        meter.update(loss)\n    with torch.no_grad():\n        evaluate(model, val_loader)\n",
    );
    let o = memlint(dir.path(), &["check", ".", "--format", "concise", "--quiet"]);
    let out = stdout(&o);
    assert!(!out.contains("lib/evaluation.py"), "{out}");
    assert!(out.contains("run.py:11:9: ML202"), "{out}");
    // Without its caller, the evaluation function is reported.
    let o = memlint(dir.path(), &["check", "lib/evaluation.py", "--format", "concise", "--quiet"]);
    assert!(stdout(&o).contains("lib/evaluation.py:5:13: ML201"), "{}", stdout(&o));
}

/// A method called on an instance of a class of another file resolves to
/// that class's method; one called on children it cannot resolve counts
/// with the grad mode of those calls.
#[test]
fn method_calls_on_instances_and_children_in_other_files() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "models/units.py",
        "import torch
from torch import nn

class Unit(nn.Module):
    def __init__(self):
        super().__init__()
        self.gn = nn.GroupNorm(2, 4)

    def load_from(self, w):
        self.gn.weight.copy_(w)
",
    );
    write(
        dir.path(),
        "models/vit.py",
        "import torch
from torch import nn
from models.units import Unit

class ViT(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(4, 2)
        self.body = nn.Sequential(Unit(), Unit())

    def load_from(self, w):
        with torch.no_grad():
            self.head.bias.zero_()
            for name, unit in self.body.named_children():
                unit.load_from(w)

    def reset_head(self):
        self.head.bias.zero_()
",
    );
    // `setup` builds the model, loads it, then resets its head with `reset`.
    let train = |reset: &str| {
        format!("import torch\nfrom models.vit import ViT\n\ndef setup(w):\n    model = ViT()\n    model.load_from(w)\n{reset}    return model\n")
    };
    let ml101 = || stdout(&memlint(dir.path(), &["check", ".", "--select", "ML101", "--format", "concise", "--quiet"]));
    write(dir.path(), "train.py", train("    with torch.no_grad():\n        model.reset_head()\n"));
    assert_eq!(ml101(), "", "every in-place write runs under no_grad");
    // Without the caller that turns grad off, `reset_head` is reported.
    write(dir.path(), "train.py", train("    model.reset_head()\n"));
    let out = ml101();
    assert!(out.contains("models/vit.py:18:24: ML101"), "{out}");
    assert!(!out.contains("units.py"), "{out}");
}

/// The training-step rules see zeroing, stepping and scaling done by
/// helpers in other files of the run.
#[test]
fn training_step_helpers_in_other_files() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "steps.py",
        "import torch\n\n\ndef clear(optimizer):\n    optimizer.zero_grad()\n\n\ndef apply(optimizer):\n    optimizer.step()\n\n\ndef finish(scaler, optimizer):\n    scaler.step(optimizer)\n    scaler.update()\n\n\ndef micro_loss(model, x, accum):\n    return model(x).mean() / accum\n",
    );
    write(
        dir.path(),
        "train.py",
        "import torch\nfrom steps import apply, clear, finish, micro_loss\n\n\ndef zeroed_elsewhere(model, loader, optimizer):\n    for x in loader:\n        clear(optimizer)\n        model(x).mean().backward()\n        optimizer.step()\n\n\ndef never_zeroed(model, loader, optimizer):\n    for x in loader:\n        model(x).mean().backward()\n        apply(optimizer)\n\n\ndef scaled_elsewhere(model, loader, optimizer, accum):\n    for i, x in enumerate(loader):\n        loss = micro_loss(model, x, accum)\n        loss.backward()\n        if (i + 1) % accum == 0:\n            apply(optimizer)\n            clear(optimizer)\n\n\ndef updated_elsewhere(model, loader, optimizer, scaler):\n    for x in loader:\n        clear(optimizer)\n        scaler.scale(model(x).mean()).backward()\n        finish(scaler, optimizer)\n",
    );
    let o = memlint(dir.path(), &["check", ".", "--format", "concise", "--quiet", "--select", "ML104,ML105,ML106"]);
    let out = stdout(&o);
    assert_eq!(out.lines().collect::<Vec<_>>(), ["./train.py:15:9: ML105 [error] missing-zero-grad: `apply(optimizer)` steps an optimizer and nothing in this loop zeroes the gradients: every step adds in all earlier gradients"], "{out}");
    // Alone, train.py cannot see that `clear` zeroes or `micro_loss` scales.
    let o = memlint(dir.path(), &["check", "train.py", "--format", "concise", "--quiet", "--select", "ML104,ML105,ML106"]);
    let out = stdout(&o);
    assert!(out.contains("train.py:9:9: ML105"), "{out}");
}

/// A step's helper over the parameters in a module of its own, which never
/// says `cuda` (vits' `commons.clip_grad_value_`): one read per parameter
/// every step when the run trains on a GPU; not when it trains on the CPU.
#[test]
fn per_parameter_reads_in_a_helper_module_of_a_gpu_run() {
    let commons = "import torch\n\n\ndef grad_norm(parameters):\n    total = 0\n    for p in parameters:\n        total += p.grad.data.norm(2).item() ** 2\n    return total ** 0.5\n";
    let train = |device: &str| {
        format!("import torch\nimport commons\n\n\ndef train(net, opt, loader):\n    for x, y in loader:\n        x, y = x.to({device}), y.to({device})\n        loss = torch.nn.functional.l1_loss(net(x), y)\n        opt.zero_grad()\n        loss.backward()\n        norm = commons.grad_norm(net.parameters())\n        opt.step()\n")
    };
    let args = ["check", ".", "--format", "concise", "--quiet", "--select", "ML305"];
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "commons.py", commons);
    write(dir.path(), "train.py", train("\"cuda\""));
    let out = stdout(&memlint(dir.path(), &args));
    assert!(out.starts_with("./commons.py:7:18: ML305"), "{out}");
    let cpu = tempfile::tempdir().unwrap();
    write(cpu.path(), "commons.py", commons);
    write(cpu.path(), "train.py", train("\"cpu\""));
    let out = stdout(&memlint(cpu.path(), &args));
    assert!(!out.contains("ML305"), "{out}");
}

/// A directory without `__init__.py` is a namespace package: `from
/// util.util import f` names `util/util.py` (run with the project's root on
/// `sys.path`). ML305 sees that the metric it names waits for the device
/// (a mask read), so the step's read is not reported.
#[test]
fn helpers_of_namespace_packages() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "util/util.py",
        "import torch\n\n\ndef intersection(out, target, k):\n    hits = out[out == target]\n    return torch.histc(hits, bins=k)\n",
    );
    let train = "import torch\nfrom util.util import intersection\n\n\ndef train(model, loader, optimizer):\n    for x, y in loader:\n        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)\n        out, loss = model(x, y)\n        optimizer.zero_grad()\n        loss.backward()\n        optimizer.step()\n        inter = intersection(out.argmax(1), y, 21)\n        print(inter.cpu().numpy())\n";
    write(dir.path(), "tool/train.py", train);
    let args = ["check", ".", "--format", "concise", "--quiet", "--select", "ML305"];
    let o = memlint(dir.path(), &args);
    assert_eq!(stdout(&o), "", "{}", stdout(&o));
    // Without the helper's file, the read is the step's only wait.
    let o = memlint(dir.path(), &["check", "tool/train.py", "--format", "concise", "--quiet", "--select", "ML305"]);
    assert!(stdout(&o).contains("tool/train.py:13:15: ML305"), "{}", stdout(&o));
}

/// `from utils import *` brings the module's names in: a metric's loop
/// over classes in `utils.py`, called once per evaluation through the star
/// import, is not a hot loop (ML306).
#[test]
fn names_brought_in_by_star_imports() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "utils.py",
        "import torch\n\n\ndef calculate_map(scores, labels, n_classes):\n    aps = []\n    for c in range(1, n_classes):\n        hits = torch.zeros(len(scores), dtype=torch.uint8).cuda()\n        aps.append((hits + scores[c]).mean())\n    return aps\n",
    );
    write(
        dir.path(),
        "eval.py",
        "import torch\nfrom utils import *\n\n\ndef evaluate(model, loader):\n    scores, labels = [], []\n    with torch.no_grad():\n        for x, y in loader:\n            scores.append(model(x.cuda()))\n            labels.append(y)\n    return calculate_map(scores, labels, 21)\n",
    );
    let args = ["check", ".", "--format", "concise", "--quiet", "--select", "ML306"];
    let o = memlint(dir.path(), &args);
    assert_eq!(stdout(&o), "", "{}", stdout(&o));
    // Alone, nothing says how often the metric runs.
    let o = memlint(dir.path(), &["check", "utils.py", "--format", "concise", "--quiet", "--select", "ML306"]);
    assert!(stdout(&o).contains("utils.py:7:16: ML306"), "{}", stdout(&o));
}

/// `torch` brought in only by `from build_utils.utils import *` (YOLO-style
/// repositories): `@torch.no_grad()` on the evaluation function resolves
/// through the star import, so its forward is not reported (ML201).
#[test]
fn torch_brought_in_by_a_star_import() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "build_utils/__init__.py", "");
    write(dir.path(), "build_utils/utils.py", "import math

import torch


def scale(x):
    return x * math.pi
");
    write(
        dir.path(),
        "train_utils.py",
        "import torch.nn.functional as F
from build_utils.utils import *


@torch.no_grad()
def evaluate(model, data_loader, device):
    model.eval()
    for imgs, targets in data_loader:
        pred = model(imgs.to(device))[0]
    return pred
",
    );
    let args = ["check", ".", "--format", "concise", "--quiet", "--select", "ML201"];
    let o = memlint(dir.path(), &args);
    assert_eq!(stdout(&o), "", "{}", stdout(&o));
    // Without the module that imports torch, only the star import can
    // give `torch`, and a module named so is torch.
    let o = memlint(dir.path(), &["check", "train_utils.py", "--format", "concise", "--quiet", "--select", "ML201"]);
    assert_eq!(stdout(&o), "", "{}", stdout(&o));
    // The same evaluation without the decorator records a graph per batch.
    let text = std::fs::read_to_string(dir.path().join("train_utils.py")).unwrap();
    write(dir.path(), "train_utils.py", text.replace("@torch.no_grad()\n", ""));
    let o = memlint(dir.path(), &args);
    assert!(stdout(&o).contains("train_utils.py:8:16: ML201"), "{}", stdout(&o));
}

/// A file that imports nothing of torch itself, only `from module import
/// *` of a module doing `import torch as t`: it is checked, and `t` is
/// torch (ML306 on `t.ones(n, n).cuda()` in a `forward`).
#[test]
fn a_torch_alias_brought_in_by_a_star_import() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "module.py", "import torch as t\nimport torch.nn as nn\n");
    write(
        dir.path(),
        "network.py",
        "from module import *\n\n\nclass Decoder(nn.Module):\n    def forward(self, x):\n        n = x.size(1)\n        mask = t.triu(t.ones(n, n).cuda(), diagonal=1)\n        return x + mask.sum()\n",
    );
    let args = ["check", ".", "--format", "concise", "--quiet", "--select", "ML306"];
    let o = memlint(dir.path(), &args);
    assert!(stdout(&o).contains("network.py:7:23: ML306"), "{}", stdout(&o));
    // A module that brings no torch leaves the file unchecked.
    write(dir.path(), "module.py", "import math as t\n");
    let o = memlint(dir.path(), &args);
    assert_eq!(stdout(&o), "", "{}", stdout(&o));
}

/// A helper called from step code only under a debugging condition (`if
/// debug_mode:`) does not run every step: its per-parameter reads
/// are not reported. Under a user option (`if args.clip_grad:`) it does.
#[test]
fn helpers_called_only_when_debugging() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "norms.py",
        "import torch\nDEVICE = \"cuda\"\n\ndef log_norms(model):\n    total = 0.0\n    for p in model.parameters():\n        total += p.grad.norm().item() ** 2\n    return total\n\n\ndef clip_norms(model, clip):\n    for p in model.parameters():\n        norm = p.grad.norm()\n        p.grad.mul_(clip / (norm.item() + 1e-6))\n",
    );
    write(
        dir.path(),
        "agent.py",
        "import torch\nfrom norms import clip_norms, log_norms\n\n\ndef optimise(net, optimizer, loss, args, debug_mode):\n    optimizer.zero_grad()\n    loss.backward()\n    if debug_mode:\n        log_norms(net)\n    if args.clip_grad:\n        clip_norms(net, args.clip_grad)\n    optimizer.step()\n\n\ndef train(net, batches, optimizer, args):\n    for x in batches:\n        optimise(net, optimizer, net(x.cuda()).sum(), args, False)\n",
    );
    let o = memlint(dir.path(), &["check", ".", "--format", "concise", "--quiet", "--select", "ML305"]);
    let out = stdout(&o);
    assert!(!out.contains("norms.py:7"), "{out}");
    assert!(out.contains("norms.py:14:"), "{out}");
    // Checked alone, the helpers are not known to be step code.
    let o = memlint(dir.path(), &["check", "norms.py", "--format", "concise", "--quiet", "--select", "ML305"]);
    assert_eq!(stdout(&o), "", "{}", stdout(&o));
}

/// ML302 knows a dataset class of another module whose samples are in
/// memory, also through a setup function that returns it in a tuple.
#[test]
fn in_memory_dataset_classes_of_other_files() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "datautils.py",
        "import torch\nfrom torch.utils.data import Dataset\n\n\nclass ToyData(Dataset):\n    def __init__(self, size):\n        self.data = [(torch.rand(20), torch.rand(1)) for _ in range(size)]\n\n    def __len__(self):\n        return len(self.data)\n\n    def __getitem__(self, index):\n        return self.data[index]\n\n\nclass Photos(Dataset):\n    def __init__(self, paths):\n        self.paths = paths\n\n    def __len__(self):\n        return len(self.paths)\n\n    def __getitem__(self, index):\n        return torch.load(self.paths[index])\n",
    );
    write(
        dir.path(),
        "train.py",
        "import torch\nfrom torch.utils.data import DataLoader\nfrom datautils import Photos, ToyData\n\n\ndef load_train_objs():\n    train_set = ToyData(2048)\n    model = torch.nn.Linear(20, 1)\n    return train_set, model, torch.optim.SGD(model.parameters(), lr=1e-3)\n\n\ndef prepare_dataloader(dataset, batch_size):\n    return DataLoader(dataset, batch_size=batch_size, pin_memory=True)\n\n\ndef main(paths):\n    dataset, model, optimizer = load_train_objs()\n    toy_loader = prepare_dataloader(dataset, 32)\n    photo_loader = DataLoader(Photos(paths), batch_size=32)\n    for loader in (toy_loader, photo_loader):\n        for x, y in loader:\n            optimizer.zero_grad()\n            model(x.cuda()).sum().backward()\n            optimizer.step()\n",
    );
    let o = memlint(dir.path(), &["check", ".", "--format", "concise", "--quiet", "--select", "ML302"]);
    let out = stdout(&o);
    assert_eq!(out.lines().map(|l| l.split(": ").next().unwrap_or(l)).collect::<Vec<_>>(), ["./train.py:19:20"], "{out}");
    // Alone, train.py cannot see that `ToyData` holds its samples.
    let o = memlint(dir.path(), &["check", "train.py", "--format", "concise", "--quiet", "--select", "ML302"]);
    assert!(stdout(&o).contains("train.py:13:12: ML302"), "{}", stdout(&o));
}

/// ML302 knows a dataset class of another module that keeps its samples
/// and applies a transform given at construction: in memory when the
/// construction gives none or one that only converts, not when it gives
/// an augmentation. Scripts in a package's directory reach the modules
/// beside them by their bare names.
#[test]
fn in_memory_dataset_classes_of_other_files_with_a_transform() {
    // Also as scripts in a package's directory (`src/__init__.py`), run
    // from there: `from omniglot import Glyphs` names `src/omniglot.py`.
    for sub in ["", "src/"] {
        let dir = tempfile::tempdir().unwrap();
        if !sub.is_empty() {
            write(dir.path(), "src/__init__.py", "");
        }
        write(
            dir.path(),
            &format!("{sub}omniglot.py"),
            "import torch\nfrom torch.utils.data import Dataset\n\n\nclass Glyphs(Dataset):\n    def __init__(self, images, transform=None):\n        self.x = [torch.load(p) for p in images]\n        self.transform = transform\n\n    def __getitem__(self, idx):\n        x = self.x[idx]\n        if self.transform:\n            x = self.transform(x)\n        return x\n\n    def __len__(self):\n        return len(self.x)\n",
        );
        write(
            dir.path(),
            &format!("{sub}train.py"),
            "import torch\nfrom torchvision import transforms\nfrom omniglot import Glyphs\n\n\ndef train(model, opt, paths):\n    plain = torch.utils.data.DataLoader(Glyphs(paths), batch_size=60)\n    converted = torch.utils.data.DataLoader(Glyphs(paths, transform=transforms.Normalize((0.5,), (0.5,))), batch_size=60)\n    augmented = torch.utils.data.DataLoader(Glyphs(paths, transform=transforms.RandomRotation(15)), batch_size=60)\n    for loader in (plain, converted, augmented):\n        for x in loader:\n            opt.zero_grad()\n            model(x.cuda()).sum().backward()\n            opt.step()\n",
        );
        let o = memlint(dir.path(), &["check", ".", "--format", "concise", "--quiet", "--select", "ML302"]);
        let out = stdout(&o);
        assert_eq!(out.lines().map(|l| l.split(": ").next().unwrap_or(l)).collect::<Vec<_>>(), [format!("./{sub}train.py:9:17")], "{out}");
    }
    // A package's module named `torch` (d2l's `d2l/torch.py`) imports the
    // library, not itself: its `torch.no_grad()` turns grad off.
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "mylib/__init__.py", "");
    write(
        dir.path(),
        "mylib/torch.py",
        "import torch\n\n\ndef evaluate_accuracy(net, data_iter):\n    net.eval()\n    correct = 0\n    with torch.no_grad():\n        for X, y in data_iter:\n            correct += (net(X.cuda()).argmax(1) == y.cuda()).sum().item()\n    return correct\n",
    );
    let o = memlint(dir.path(), &["check", ".", "--format", "concise", "--quiet", "--select", "ALL"]);
    assert_eq!(stdout(&o), "", "{}", stdout(&o));
}

/// Two experiments side by side, each with its own `helpers.py` (and a
/// package copied into both): each script's import reaches the module
/// of its own directory, as Python's search path starting at the script's
/// directory does, so only the experiment whose loader has no workers is
/// reported.
#[test]
fn same_named_modules_in_two_folders() {
    let dir = tempfile::tempdir().unwrap();
    let main = "import torch\nfrom torchvision import datasets\nfrom helpers import make_loader\nfrom pkg.steps import train_step\n\n\ndef main():\n    model = torch.nn.Linear(10, 2).cuda()\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    loader = make_loader(datasets.ImageFolder(\"data\"))\n    for epoch in range(10):\n        for x, y in loader:\n            train_step(model, opt, x.cuda(), y.cuda())\n\n\nif __name__ == \"__main__\":\n    main()\n";
    let step = "import torch\n\n\ndef train_step(model, opt, x, y):\n    loss = torch.nn.functional.cross_entropy(model(x), y)\n    opt.zero_grad()\n    loss.backward()\n    opt.step()\n";
    for (sub, workers) in [("a", ", num_workers=4, pin_memory=True"), ("b", "")] {
        write(dir.path(), &format!("{sub}/main.py"), main);
        write(dir.path(), &format!("{sub}/helpers.py"), &format!("import torch\n\n\ndef make_loader(ds):\n    return torch.utils.data.DataLoader(ds, batch_size=32{workers})\n"));
        write(dir.path(), &format!("{sub}/pkg/__init__.py"), "");
        write(dir.path(), &format!("{sub}/pkg/steps.py"), step);
    }
    let o = memlint(dir.path(), &["check", ".", "--format", "concise", "--quiet", "--select", "ML302"]);
    let out = stdout(&o);
    assert_eq!(out.lines().map(|l| l.split(": ").next().unwrap_or(l)).collect::<Vec<_>>(), ["./b/helpers.py:5:12"], "{out}");
}

/// ML201 follows a model that freezes itself as it is built (pytorch-fid's
/// `InceptionV3`, defined in another file) through the helpers that pass it
/// on, and still reports the same chain given a model built trainable.
#[test]
fn self_frozen_model_of_another_file_passed_on() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "inception.py",
        "import torch.nn as nn\n\n\nclass FeatureNet(nn.Module):\n    def __init__(self, blocks, requires_grad=False):\n        super().__init__()\n        self.body = nn.Sequential(nn.Conv2d(3, 64, 3), nn.AdaptiveAvgPool2d(1))\n        for param in self.parameters():\n            param.requires_grad = requires_grad\n\n    def forward(self, x):\n        return self.body(x)\n",
    );
    let fid = "import torch\nfrom inception import FeatureNet\n\n\ndef get_activations(images, model):\n    model.eval()\n    return [model(torch.from_numpy(b).cuda()).cpu() for b in images]\n\n\ndef statistics(images, model):\n    return get_activations(images, model)\n\n\ndef fid(images, cuda):\n    model = FeatureNet([3]ARGS)\n    if cuda:\n        model.cuda()\n    return statistics(images, model)\n";
    write(dir.path(), "fid.py", &fid.replace("ARGS", ""));
    write(dir.path(), "tuned.py", &fid.replace("ARGS", ", requires_grad=True"));
    let o = memlint(dir.path(), &["check", ".", "--format", "concise", "--quiet", "--select", "ML201"]);
    let out = stdout(&o);
    assert_eq!(out.lines().map(|l| l.split(": ").next().unwrap_or(l)).collect::<Vec<_>>(), ["./tuned.py:7:13"], "{out}");
}

/// ML302 knows a function of another module that returns an in-memory
/// dataset (torchvision's MNIST with a transform that only converts), and
/// still reports one that returns a dataset read from disk.
#[test]
fn in_memory_datasets_returned_by_functions_of_other_files() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "data_utils.py",
        "from torchvision import datasets, transforms\n\n\ndef get_dataset():\n    t = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])\n    return datasets.MNIST(\"data\", train=True, download=True, transform=t)\n\n\ndef get_photos(root):\n    return datasets.ImageFolder(root, transform=transforms.ToTensor())\n",
    );
    write(
        dir.path(),
        "train.py",
        "import torch\nfrom torch.utils.data import DataLoader\nfrom data_utils import get_dataset, get_photos\n\n\ndef main(model, opt, root):\n    digits = DataLoader(get_dataset(), batch_size=64, shuffle=True)\n    photos = DataLoader(get_photos(root), batch_size=64, shuffle=True)\n    for loader in (digits, photos):\n        for x, y in loader:\n            loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())\n            opt.zero_grad()\n            loss.backward()\n            opt.step()\n",
    );
    let o = memlint(dir.path(), &["check", ".", "--format", "concise", "--quiet", "--select", "ML302"]);
    let out = stdout(&o);
    assert_eq!(out.lines().map(|l| l.split(": ").next().unwrap_or(l)).collect::<Vec<_>>(), ["./train.py:8:14"], "{out}");
}

#[test]
fn selection_flags() {
    let dir = tree();
    assert_eq!(codes(&memlint(dir.path(), &["check", "src", "--format", "json", "--select", "ML201"])), ["ML201"]);
    assert_eq!(codes(&memlint(dir.path(), &["check", "src", "--format", "json", "--ignore", "ML2"])), Vec::<String>::new());
    assert_eq!(
        codes(&memlint(dir.path(), &["check", "src", "--format", "json", "--ignore", "ML2", "--extend-select", "ML202"])),
        ["ML202"]
    );
    assert_eq!(
        codes(&memlint(dir.path(), &["check", "src", "--format", "json", "--select", "eval-without-no-grad"])),
        ["ML201"]
    );
}

#[test]
fn config_discovery_closest_wins() {
    let dir = tree();
    write(dir.path(), "pyproject.toml", "[project]\nname = \"x\"\n\n[tool.memlint]\nignore = [\"ML201\"]\n");
    assert_eq!(codes(&memlint(dir.path(), &["check", "src", "--format", "json"])), ["ML202"]);
    // A closer memlint.toml replaces the pyproject's settings for files below it.
    write(dir.path(), "src/memlint.toml", "ignore = [\"ML202\"]\n");
    assert_eq!(codes(&memlint(dir.path(), &["check", "src", "--format", "json"])), ["ML201"]);
    // CLI flags override the configuration.
    assert_eq!(
        codes(&memlint(dir.path(), &["check", "src", "--format", "json", "--select", "ML202"])),
        ["ML202"]
    );
    // pyproject.toml without [tool.memlint] is skipped on the way up.
    std::fs::remove_file(dir.path().join("src/memlint.toml")).unwrap();
    write(dir.path(), "src/pyproject.toml", "[project]\nname = \"inner\"\n");
    assert_eq!(codes(&memlint(dir.path(), &["check", "src", "--format", "json"])), ["ML202"]);
}

#[test]
fn config_per_file_ignores_exclude_and_fail_on() {
    let dir = tree();
    write(dir.path(), "src/legacy/old.py", TRAIN);
    write(
        dir.path(),
        "memlint.toml",
        "exclude = [\"legacy\"]\nfail-on = \"error\"\n\n[per-file-ignores]\n\"train.py\" = [\"ML202\"]\n",
    );
    let o = memlint(dir.path(), &["check", "src", "--format", "json"]);
    assert_eq!(codes(&o), ["ML201"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["summary"]["files"], 2, "legacy/ is excluded");
    assert_eq!(o.status.code(), Some(0), "fail-on = error: warnings do not fail");
    // An explicitly named file is checked even when excluded.
    assert_eq!(codes(&memlint(dir.path(), &["check", "src/legacy/old.py", "--format", "json"])).len(), 2);
}

#[test]
fn config_errors_name_file_and_line() {
    let dir = tree();
    write(dir.path(), "memlint.toml", "select = [\"ML2\"]\nunknown-key = 1\n");
    let o = memlint(dir.path(), &["check", "src"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("memlint.toml") && err.contains("unknown-key") && err.contains("line 2"), "{err}");
    assert!(o.stdout.is_empty(), "nothing is reported before a configuration error");

    write(dir.path(), "memlint.toml", "select = [\"ML2\", \"ML977\"]\n");
    let o = memlint(dir.path(), &["check", "src"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("memlint.toml:1:") && err.contains("ML977"), "{err}");

    write(dir.path(), "memlint.toml", "select = [\n");
    let o = memlint(dir.path(), &["check", "src"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("memlint.toml"));
}

#[test]
fn suppression_comments() {
    let dir = tempfile::tempdir().unwrap();
    let text = TRAIN
        .replace("out = model(x)", "out = model(x)  # memlint: ignore[ML201]")
        .replace("total += loss", "total += loss  # noqa: ML202");
    write(dir.path(), "a.py", &text);
    assert_eq!(codes(&memlint(dir.path(), &["check", "a.py", "--format", "json"])), Vec::<String>::new());
    let other = TRAIN.replace("out = model(x)", "out = model(x)  # memlint: ignore[ML202]");
    write(dir.path(), "b.py", &other);
    assert_eq!(codes(&memlint(dir.path(), &["check", "b.py", "--format", "json"])), ["ML201", "ML202"]);
    write(dir.path(), "c.py", format!("# memlint: ignore-file[ML2]\n{TRAIN}"));
    assert_eq!(codes(&memlint(dir.path(), &["check", "c.py", "--format", "json"])), Vec::<String>::new());
}

#[test]
fn syntax_error_still_reports_recovered_findings() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "broken.py", format!("{TRAIN}\ndef oops(:\n    pass\n"));
    let o = memlint(dir.path(), &["check", "broken.py", "--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let diags = v["diagnostics"].as_array().unwrap();
    let parse: Vec<_> = diags.iter().filter(|d| d["code"] == "ML000").collect();
    assert_eq!(parse.len(), 1);
    assert_eq!(parse[0]["severity"], "error");
    assert_eq!(parse[0]["line"], 22);
    assert!(diags.iter().any(|d| d["code"] == "ML201") && diags.iter().any(|d| d["code"] == "ML202"));
}

#[test]
fn non_utf8_and_unreadable_files_are_reported_and_the_run_continues() {
    let dir = tree();
    write(dir.path(), "src/latin1.py", b"# caf\xe9\nimport torch\n");
    write(dir.path(), "src/blob.py", b"\x00\x01\x02");
    let o = memlint(dir.path(), &["check", "src", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let by_path = |p: &str| -> Vec<String> {
        v["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["path"] == p)
            .map(|d| format!("{} {}", d["code"].as_str().unwrap(), d["message"].as_str().unwrap()))
            .collect()
    };
    assert_eq!(by_path("src/latin1.py"), ["ML000 cannot check file: not valid UTF-8 (invalid byte at offset 5)"]);
    assert_eq!(by_path("src/blob.py"), ["ML000 cannot check file: binary file (contains NUL bytes)"]);
    assert_eq!(by_path("src/train.py").len(), 2, "the other files are still checked");

    // A file that exists but cannot be read: /proc/self/mem fails to read
    // at offset 0 for every user, root included.
    #[cfg(target_os = "linux")]
    {
        let o = memlint(dir.path(), &["check", "/proc/self/mem", "src/train.py", "--format", "json"]);
        assert_eq!(o.status.code(), Some(1));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let first = &v["diagnostics"][0];
        assert_eq!(first["code"], "ML000");
        assert!(first["message"].as_str().unwrap().starts_with("cannot read file:"), "{first}");
        assert_eq!(v["summary"]["diagnostics"], 3);
    }
}

#[test]
fn walk_honours_gitignore_and_skips_virtualenvs() {
    let dir = tree();
    write(dir.path(), ".gitignore", "generated/\n");
    write(dir.path(), "generated/gen.py", TRAIN);
    write(dir.path(), ".venv/lib/site.py", TRAIN);
    write(dir.path(), "myenv/pyvenv.cfg", "home = /usr\n");
    write(dir.path(), "myenv/lib/x.py", TRAIN);
    write(dir.path(), "build/lib/y.py", TRAIN);
    let o = memlint(dir.path(), &["check", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["summary"]["files"], 2, "{}", stdout(&o));
    // Given explicitly, a virtualenv is checked.
    let o = memlint(dir.path(), &["check", "myenv", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["summary"]["files"], 1);
}

#[test]
fn walk_skips_source_copies_saved_in_run_directories() {
    let dir = tree();
    // Copies a training script saved beside its checkpoints, and a
    // tracker's copy of the code: same names as files of the run.
    write(dir.path(), "log/exp1/train.py", TRAIN);
    write(dir.path(), "wandb/run-1/files/code/src/train.py", TRAIN);
    // Not copies: a name of its own, and a package named `logs`.
    write(dir.path(), "runs/sweep.py", TRAIN);
    write(dir.path(), "logs/__init__.py", "");
    write(dir.path(), "logs/train.py", TRAIN);
    let o = memlint(dir.path(), &["check", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut paths: Vec<String> =
        v["diagnostics"].as_array().unwrap().iter().map(|d| d["path"].as_str().unwrap().replace('\\', "/").trim_start_matches("./").to_string()).collect();
    paths.dedup();
    assert_eq!(paths, ["logs/train.py", "runs/sweep.py", "src/train.py"], "{}", stdout(&o));
    // Named on the command line, a copy is checked.
    let o = memlint(dir.path(), &["check", "log", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["summary"]["files"], 1, "{}", stdout(&o));
}

#[test]
fn rule_and_rules_commands() {
    let dir = tree();
    let o = memlint(dir.path(), &["rule", "ML201"]);
    assert_eq!(o.status.code(), Some(0));
    let text = stdout(&o);
    for h in ["## What it does", "## Why is this bad?", "## Example", "## Use instead", "## Known false positives", "## References"] {
        assert!(text.contains(h), "missing {h}");
    }
    let o = memlint(dir.path(), &["rule", "ML999"]);
    assert_eq!(o.status.code(), Some(2));
    let o = memlint(dir.path(), &["rules"]);
    let text = stdout(&o);
    for code in ["ML000", "ML101", "ML103", "ML201", "ML202", "ML203", "ML401"] {
        assert!(text.contains(code), "rules lists {code}");
    }
}

#[test]
fn broken_pipe_exits_quietly() {
    let dir = tree();
    for i in 0..50 {
        write(dir.path(), &format!("many/t{i}.py"), TRAIN);
    }
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("{} check many | head -n 1", memlint_bin().display()))
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn unit_tests_in_test_modules_are_not_evaluation_code() {
    let dir = tempfile::tempdir().unwrap();
    let body = "import torch\n\n\ndef test_forward(model, loader):\n    model.eval()\n    return [model(x) for x in loader]\n";
    write(dir.path(), "tests/test_model.py", body);
    write(dir.path(), "src/check_model.py", body);
    let o = memlint(dir.path(), &["check", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let paths: Vec<&str> = v["diagnostics"].as_array().unwrap().iter().map(|d| d["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["./src/check_model.py"]);
}

#[test]
fn scripts_with_one_module_path_do_not_share_facts() {
    let dir = tempfile::tempdir().unwrap();
    // Each script's own evaluate is called under no_grad only in b/.
    let a = "import torch\n\ndef evaluate(model, val_loader):\n    model.eval()\n    return [model(x) for x in val_loader]\n\ndef main(model, val_loader):\n    evaluate(model, val_loader)\n";
    let b = "import torch\n\ndef evaluate(model, val_loader):\n    model.eval()\n    return [model(x) for x in val_loader]\n\ndef main(model, val_loader):\n    with torch.no_grad():\n        evaluate(model, val_loader)\n";
    write(dir.path(), "a/train.py", a);
    write(dir.path(), "b/train.py", b);
    let alone_a = stdout(&memlint(dir.path(), &["check", "a/train.py", "--format", "concise", "--quiet"]));
    let alone_b = stdout(&memlint(dir.path(), &["check", "b/train.py", "--format", "concise", "--quiet"]));
    let both = stdout(&memlint(dir.path(), &["check", "a", "b", "--format", "concise", "--quiet"]));
    assert!(alone_a.contains("a/train.py:5:13: ML201"), "{alone_a}");
    assert!(!alone_b.contains("ML201"), "{alone_b}");
    assert_eq!(both.lines().count(), 1, "{both}");
    assert!(both.contains("a/train.py:5:13: ML201"), "{both}");
}

/// A helper in another module of a Rust crate counts, reached through
/// `mod train;` and a `train::` path, `crate::`, a `pub use` re-export or
/// `super::`: a loop that steps after a helper's `backward()` and never
/// zeroes is ML105's; with a helper that runs no backward it is not.
#[test]
fn rust_helpers_in_other_modules_of_the_crate_count() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "Cargo.toml", "[package]\nname = \"trainer\"\nversion = \"0.1.0\"\n");
    let main = |call: &str| {
        format!(
            "use tch::{{nn, Tensor}};\n\nmod train;\n\nfn fit(net: &nn::Sequential, opt: &mut nn::Optimizer, xs: &Tensor, ys: &Tensor) {{\n    for _ in 0..100 {{\n        {call}(net, xs, ys);\n        opt.step();\n    }}\n}}\n"
        )
    };
    write(dir.path(), "src/train/mod.rs", "pub mod steps;\npub use self::steps::backward_only;\n");
    write(
        dir.path(),
        "src/train/steps.rs",
        "use tch::{nn, nn::Module, Tensor};\n\npub fn backward_only(net: &nn::Sequential, xs: &Tensor, ys: &Tensor) {\n    let loss = net.forward(xs).mse_loss(ys, tch::Reduction::Mean);\n    loss.backward();\n}\n\npub fn via_parent(net: &nn::Sequential, xs: &Tensor, ys: &Tensor) {\n    super::backward_only(net, xs, ys);\n}\n\npub fn forward_only(net: &nn::Sequential, xs: &Tensor, ys: &Tensor) -> f64 {\n    net.forward(xs).mse_loss(ys, tch::Reduction::Mean).double_value(&[])\n}\n",
    );
    for (call, flagged) in [
        ("train::steps::backward_only", true),
        ("crate::train::steps::backward_only", true),
        ("train::backward_only", true),
        ("train::steps::via_parent", true),
        ("train::steps::forward_only", false),
    ] {
        write(dir.path(), "src/main.rs", &main(call));
        let out = memlint(dir.path(), &["check", "--format", "json-lines", "--select", "ML105", "."]);
        let text = stdout(&out);
        assert_eq!(text.lines().any(|l| l.contains("main.rs") && l.contains("\"line\":8")), flagged, "{call}: {text}");
    }
}

/// A tree of Python and Rust (tch) sources gives one report and one exit
/// code in every format; a Rust suppression comment works; Cargo's
/// `target/` beside a manifest is not walked.
#[test]
fn mixed_python_and_rust_tree() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "py/train.py", TRAIN);
    write(dir.path(), "rs/Cargo.toml", "[package]\nname = \"trainer\"\nversion = \"0.1.0\"\n");
    let rust = "use tch::{nn, Tensor};\n\nfn train(net: &nn::Sequential, opt: &mut nn::Optimizer, xs: &Tensor) {\n    for _epoch in 0..10 {\n        let loss = xs.sum(tch::Kind::Float);\n        loss.backward();\n        opt.step();\n    }\n}\n\nfn sgd(vs: &nn::VarStore, lr: f64) {\n    for mut p in vs.trainable_variables() {\n        let g = p.grad();\n        p -= g * lr; // memlint: ignore[ML101]\n    }\n}\n";
    write(dir.path(), "rs/src/main.rs", rust);
    write(dir.path(), "rs/target/debug/build/out/generated.rs", rust);
    let out = memlint(dir.path(), &["check", "--format", "json-lines", "py", "rs"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    let rust_lines: Vec<&str> = text.lines().filter(|l| l.contains("main.rs")).collect();
    assert_eq!(rust_lines.len(), 1, "{text}");
    assert!(rust_lines[0].contains("\"ML105\"") && rust_lines[0].contains("\"line\":7"), "{text}");
    assert!(text.lines().any(|l| l.contains("train.py")), "{text}");
    assert!(!text.contains("target"), "Cargo's target/ is not walked: {text}");
    for format in ["full", "concise", "json", "sarif", "github", "gitlab", "junit"] {
        let out = memlint(dir.path(), &["check", "--format", format, "py", "rs"]);
        assert_eq!(out.status.code(), Some(1), "{format}: {}", stderr(&out));
        assert!(stdout(&out).contains("main.rs"), "{format}: {}", stdout(&out));
    }
    // A file syn rejects is one ML000 and the run goes on.
    write(dir.path(), "rs/src/broken.rs", "use tch::Tensor;\nfn main( {}\n");
    let out = memlint(dir.path(), &["check", "--format", "json-lines", "rs"]);
    let text = stdout(&out);
    assert!(text.lines().any(|l| l.contains("broken.rs") && l.contains("\"ML000\"")), "{text}");
    assert!(text.lines().any(|l| l.contains("main.rs") && l.contains("\"ML105\"")), "{text}");
}

/// Code its maintainers keep frozen is not reported, though it joins the
/// project index: a module of a `deprecated` package, and a file whose
/// leading comments say it is generated and must not be edited (a fix goes
/// to the `modular_*.py` it is generated from, which is reported).
#[test]
fn frozen_code_is_not_reported() {
    let hazard = "import torch\n\n\ndef step(model, loader, optimizer):\n    for x in loader:\n        w = torch.zeros(3, requires_grad=True)\n        w.add_(1)\n        model(x).sum().backward()\n        optimizer.step()\n";
    let generated = format!(
        "#  This file was automatically generated from src/pkg/models/tiny/modular_tiny.py.\n#  Do NOT edit this file manually as any edits will be overwritten.\n{hazard}"
    );
    let dir = tempfile::tempdir().unwrap();
    for init in ["pkg", "pkg/models", "pkg/models/deprecated", "pkg/models/deprecated/old", "pkg/models/tiny"] {
        write(dir.path(), &format!("{init}/__init__.py"), "");
    }
    write(dir.path(), "pkg/models/deprecated/old/train_old.py", hazard);
    write(dir.path(), "pkg/models/tiny/modeling_tiny.py", &generated);
    write(dir.path(), "pkg/models/tiny/modular_tiny.py", hazard);
    let args = ["check", ".", "--format", "concise", "--quiet", "--select", "ML101"];
    let out = stdout(&memlint(dir.path(), &args));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "{out}");
    assert!(lines[0].starts_with("./pkg/models/tiny/modular_tiny.py:7:11: ML101"), "{out}");
    // A comment that says "generated" alone is no such header.
    write(dir.path(), "pkg/models/tiny/modeling_tiny.py", &format!("# Weights generated by a script.\n{hazard}"));
    let out = stdout(&memlint(dir.path(), &args));
    assert!(out.contains("modeling_tiny.py:8:11: ML101"), "{out}");
}

/// A submodule a factory function builds (`self.emb = get_module(kind)`,
/// returning one of several classes): a method called on it is followed to
/// each class the factory returns, and a step whose helper waits for the
/// device in one of them already waits (ML305 is silent). The step's
/// micro-batch loop (`for j in range(accum)`) runs every step.
#[test]
fn submodules_built_by_a_factory_function() {
    let dir = tempfile::tempdir().unwrap();
    let emb = "import torch\nimport torch.nn as nn\n\n\nclass Base(nn.Module):\n    def __init__(self, device):\n        super().__init__()\n        self.device = device\n        self.lin = nn.Linear(4, 4)\n\n    def compute(self, nodes):\n        t = torch.from_numpy(nodes).float().to(self.device)\n        return self.lin(t)\n\n\nclass Graph(Base):\n    pass\n\n\nclass Identity(Base):\n    def compute(self, nodes):\n        return nodes\n\n\ndef get_module(kind, device):\n    if kind == \"graph\":\n        return Graph(device)\n    elif kind == \"identity\":\n        return Identity(device)\n    raise ValueError(kind)\n";
    write(dir.path(), "modules/emb.py", emb);
    let model = "import torch.nn as nn\nfrom modules.emb import get_module\n\n\nclass Net(nn.Module):\n    def __init__(self, kind, device):\n        super().__init__()\n        self.emb = get_module(kind, device)\n\n    def probs(self, nodes):\n        out = self.emb.compute(nodes)\n        return out.sigmoid()\n";
    write(dir.path(), "model.py", model);
    let train = "import numpy as np\nimport torch\nfrom model import Net\n\ndevice = torch.device(\"cuda\")\nnet = Net(\"graph\", device).to(device)\nopt = torch.optim.Adam(net.parameters())\nlosses = []\nfor k in range(0, 100, 4):\n    loss = 0\n    opt.zero_grad()\n    for j in range(4):\n        loss += net.probs(np.arange(4)).sum()\n    loss.backward()\n    opt.step()\n    losses.append(loss.item())\n";
    write(dir.path(), "train.py", train);
    let args = ["check", ".", "--format", "concise", "--quiet", "--select", "ML305"];
    let o = memlint(dir.path(), &args);
    assert_eq!(stdout(&o), "", "{}", stdout(&o));
    // A factory whose classes never wait: the read is the step's only wait.
    write(dir.path(), "modules/emb.py", &emb.replace("        return Graph(device)\n", "        return Identity(device)\n").replace("        t = torch.from_numpy(nodes).float().to(self.device)\n        return self.lin(t)\n", "        return self.lin(nodes)\n"));
    let o = memlint(dir.path(), &args);
    assert!(stdout(&o).starts_with("./train.py:16:19: ML305"), "{}", stdout(&o));
}

/// A module of a directory without `__init__.py` named like the package
/// at the root (`tgn/model/tgn.py` beside `tgn/__init__.py`) keeps the
/// name the root's scripts import it by (`from model.tgn import TGN`).
#[test]
fn a_namespace_module_named_like_the_root_package() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "tgn/__init__.py", "");
    let model = "import torch\nimport torch.nn as nn\n\n\nclass TGN(nn.Module):\n    def __init__(self, device):\n        super().__init__()\n        self.device = device\n        self.lin = nn.Linear(4, 1)\n\n    def probs(self, nodes):\n        t = torch.from_numpy(nodes).float().to(self.device)\n        return self.lin(t).sigmoid()\n";
    write(dir.path(), "tgn/model/tgn.py", model);
    let train = "import numpy as np\nimport torch\nfrom model.tgn import TGN\n\ndevice = torch.device(\"cuda\")\ntgn = TGN(device).to(device)\nopt = torch.optim.Adam(tgn.parameters())\nlosses = []\nfor k in range(100):\n    loss = tgn.probs(np.arange(4)).sum()\n    opt.zero_grad()\n    loss.backward()\n    opt.step()\n    losses.append(loss.item())\n";
    write(dir.path(), "tgn/train.py", train);
    let o = memlint(dir.path(), &["check", "tgn", "--format", "concise", "--quiet", "--select", "ML305"]);
    assert_eq!(stdout(&o), "", "{}", stdout(&o));
}

/// A script its first line declares Python 2 is not reported as a parse
/// error; a Python 3 file with the same error is.
#[test]
fn python2_scripts_are_not_parse_errors() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "text2token.py", "#!/usr/bin/env python2\nimport sys\nprint 'usage'\n");
    let o = memlint(dir.path(), &["check", ".", "--format", "concise", "--quiet"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert_eq!(stdout(&o), "");
    write(dir.path(), "text2token.py", "#!/usr/bin/env python\nimport sys\nprint 'usage'\n");
    let o = memlint(dir.path(), &["check", ".", "--format", "concise", "--quiet"]);
    assert!(stdout(&o).contains("ML000"), "{}", stdout(&o));
}

/// A helper of another module that moves a list item by item
/// (`[x.cuda() for x in xs]`), handed the batch: the step copies it with a
/// blocking copy every iteration and already waits there (ML305 is silent).
#[test]
fn a_helper_that_moves_a_list_of_the_batch() {
    let dir = tempfile::tempdir().unwrap();
    let utils = "import torch\n\n\ndef cuda(xs):\n    if torch.cuda.is_available():\n        if not isinstance(xs, (list, tuple)):\n            return xs.cuda()\n        else:\n            return [x.cuda() for x in xs]\n";
    write(dir.path(), "utils.py", utils);
    let train = "import torch\nimport torch.nn as nn\nimport utils\n\nG, D = nn.Linear(8, 8), nn.Linear(8, 1)\nutils.cuda([G, D])\nd_opt = torch.optim.Adam(D.parameters())\nfor epoch in range(10):\n    for i, (imgs, _) in enumerate(loader):\n        imgs, z = utils.cuda([imgs, torch.randn(imgs.size(0), 8)])\n        d_loss = D(imgs).mean() - D(G(z)).mean()\n        d_opt.zero_grad()\n        d_loss.backward()\n        d_opt.step()\n        writer.add_scalar(\"d_loss\", d_loss.data.cpu().numpy(), i)\n";
    write(dir.path(), "train.py", train);
    let args = ["check", ".", "--format", "concise", "--quiet", "--select", "ML305"];
    let o = memlint(dir.path(), &args);
    assert_eq!(stdout(&o), "", "{}", stdout(&o));
    // Handed only the models, the helper moves no batch: the read is the
    // step's only wait.
    write(dir.path(), "train.py", train.replace("        imgs, z = utils.cuda([imgs, torch.randn(imgs.size(0), 8)])\n", "        imgs, z = imgs.cuda(non_blocking=True), torch.randn(imgs.size(0), 8, device=\"cuda\")\n"));
    let o = memlint(dir.path(), &args);
    assert!(stdout(&o).starts_with("./train.py:15:37: ML305"), "{}", stdout(&o));
}

/// A trainer in its own module given the model by a script of a namespace
/// package (`model/Run.py`: `Trainer(model, ...)` after `model =
/// Network()`), the model's wait three submodules down, through a cell of
/// an `nn.ModuleList` (`self.cells[i](x)`): the step already waits and
/// its read is not reported; without the copy in the innermost module it is.
#[test]
fn a_trainers_model_waits_through_its_submodules() {
    let dir = tempfile::tempdir().unwrap();
    let net = "import torch\nimport torch.nn as nn\n\n\nclass Inner(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.w = nn.Parameter(torch.randn(8, 8))\n\n    def forward(self, x):\n        eye = torch.eye(8).to(x.device)\n        return x @ (self.w + eye)\n\n\nclass Cell(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.gate = Inner()\n\n    def forward(self, x):\n        return torch.sigmoid(self.gate(x))\n\n\nclass Stack(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.cells = nn.ModuleList([Cell() for _ in range(2)])\n\n    def forward(self, x):\n        for i in range(2):\n            x = self.cells[i](x)\n        return x\n";
    write(dir.path(), "model/net.py", net);
    let trainer = "import torch\n\n\nclass Trainer:\n    def __init__(self, model, loader, opt):\n        self.model, self.loader, self.opt = model, loader, opt\n\n    def train_epoch(self):\n        total = 0\n        for (x,) in self.loader:\n            x = x.cuda(non_blocking=True)\n            loss = self.model(x).sum()\n            self.opt.zero_grad()\n            loss.backward()\n            self.opt.step()\n            total += loss.item()\n        return total\n";
    write(dir.path(), "model/BasicTrainer.py", trainer);
    let run = "import torch\nfrom model.net import Stack as Network\nfrom model.BasicTrainer import Trainer\n\nmodel = Network().cuda()\nt = Trainer(model, loader, torch.optim.SGD(model.parameters(), lr=0.1))\nfor e in range(3):\n    t.train_epoch()\n";
    write(dir.path(), "model/Run.py", run);
    let args = ["check", ".", "--format", "concise", "--quiet", "--select", "ML305"];
    let o = memlint(dir.path(), &args);
    assert_eq!(stdout(&o), "", "{}", stdout(&o));
    write(dir.path(), "model/net.py", net.replace("        eye = torch.eye(8).to(x.device)\n        return x @ (self.w + eye)\n", "        return x @ self.w\n"));
    let o = memlint(dir.path(), &args);
    assert!(stdout(&o).starts_with("./model/BasicTrainer.py:16:22: ML305"), "{}", stdout(&o));
}
