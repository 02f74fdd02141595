//! The semantic model's probes: small programs whose right answer is known,
//! asserted through the rules that read the model. Those the model answers
//! wrong today are `#[ignore]`d with the step of the model v3 work
//! (../shared/design/MODEL-V3.md, step numbers as there) that makes them
//! right; that step removes the `#[ignore]`. `cargo test -- --ignored`
//! shows where the model stands.

use memlint_linter::{lint_source, LintOptions, RuleSet, Selector};

/// The lines (1-based) where `code` is reported in `source`, all rules on.
fn lines(source: &str, code: &str) -> Vec<usize> {
    let all = Selector::parse("ALL").expect("ALL");
    let options = LintOptions { rules: RuleSet::from_selection(Some(&[all]), &[], &[]), is_test_file: false, module: None };
    let index = memlint_diagnostics::LineIndex::new(source);
    lint_source(source, &options).iter().filter(|d| d.code == code).map(|d| index.location(d.span.start).0).collect()
}

// Right today: guards for the steps that rework the model.

#[test]
fn in_place_on_a_requires_grad_leaf_is_reported() {
    let src = "import torch\nw = torch.zeros(3, requires_grad=True)\nw.add_(1)\n";
    assert_eq!(lines(src, "ML101"), [3]);
}

#[test]
fn in_place_under_no_grad_is_not_reported() {
    let src = "import torch\nw = torch.zeros(3, requires_grad=True)\nwith torch.no_grad():\n    w.add_(1)\n";
    assert!(lines(src, "ML101").is_empty());
}

#[test]
fn torch_from_a_library_star_import_is_torch() {
    // fastai's notebooks take torch from `from fastai.text import *`.
    let eval = "def evaluate(model, loader):\n    model.eval()\n    for x in loader:\n        out = model(x)\n    return torch.zeros(1)\n";
    assert_eq!(lines(&format!("from fastai.text import *\n{eval}"), "ML201"), [5]);
    // No star import: `torch` is bound by nothing the file shows.
    assert!(lines(eval, "ML201").is_empty());
    // `torch` only as an attribute is not the module.
    let attr = eval.replace("torch.zeros(1)", "cfg.torch");
    assert!(lines(&format!("from utils import *\n{attr}"), "ML201").is_empty());
}

#[test]
fn the_optimizer_name_does_not_decide_ml106_when_it_is_optimizer() {
    let src = "import torch\n\ndef train(model, loader):\n    scaler = torch.amp.GradScaler(\"cuda\")\n    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n    for x in loader:\n        scaler.scale(model(x).sum()).backward()\n        optimizer.step()\n        optimizer.zero_grad()\n";
    assert_eq!(lines(src, "ML106"), [8], "optimizer.step() bypasses the scaler");
}

#[test]
fn the_counter_of_an_enumerated_loader_is_not_a_batch() {
    // `i` counts batches: an int on the host, and `i + 1 < 10` reads
    // nothing back; `loss < best` does (the copy does not wait).
    let src = "import torch\ndevice = 'cuda'\n\ndef train(model, loader, opt, best):\n    for i, (x, y) in enumerate(loader):\n        loss = model(x.to(device, non_blocking=True)).sum()\n        opt.zero_grad()\n        loss.backward()\n        opt.step()\n        if i + 1 < 10:\n            print(i)\n        if loss < best:\n            best = loss.detach()\n";
    assert_eq!(lines(src, "ML305"), [12]);
}

#[test]
fn a_blocking_copy_every_step_already_waits_for_the_device() {
    // `x.to(device)` without `non_blocking=True` waits for the stream
    // every iteration; the `.item()` after it adds little. With
    // `non_blocking=True` the read is the step's only wait.
    let blocking = "import torch\ndevice = 'cuda'\n\ndef train(model, loader, opt, log):\n    for x, y in loader:\n        loss = model(x.to(device)).sum()\n        opt.zero_grad()\n        loss.backward()\n        opt.step()\n        log.append(loss.item())\n";
    assert!(lines(blocking, "ML305").is_empty());
    let overlapped = blocking.replace("x.to(device)", "x.to(device, non_blocking=True)");
    assert_eq!(lines(&overlapped, "ML305"), [10]);
}

// Wrong today: each names the step that fixes it.

#[test]
fn rebinding_a_prefix_forgets_what_hung_below_it() {
    let src = "import torch\n\nclass Box:\n    pass\n\nobj = Box()\nobj.t = torch.zeros(3, requires_grad=True)\nobj = Box()\nobj.t.add_(1)\n";
    assert!(lines(src, "ML101").is_empty(), "obj.t is a new object's attribute");
}

#[test]
fn an_alias_of_a_leaf_is_the_leaf() {
    let src = "import torch\nx = torch.zeros(3, requires_grad=True)\ny = x\ny.add_(1)\n";
    assert_eq!(lines(src, "ML101"), [4]);
}

#[test]
fn a_comprehension_target_shadows_the_function_name() {
    let src = "import torch\nw = torch.zeros(3, requires_grad=True)\n[w.add_(1) for w in [torch.zeros(3)]]\n";
    assert!(lines(src, "ML101").is_empty(), "the comprehension's w is a fresh tensor");
}

#[test]
fn train_or_eval_in_two_arms_does_not_depend_on_their_order() {
    let a = "import torch\n\ndef run(model, val_loader, training):\n    if training:\n        model.train()\n    else:\n        model.eval()\n    return [model(x) for x in val_loader]\n";
    let b = "import torch\n\ndef run(model, val_loader, training):\n    if not training:\n        model.eval()\n    else:\n        model.train()\n    return [model(x) for x in val_loader]\n";
    let both = "import torch\n\ndef run(model, val_loader, training):\n    if training:\n        model.eval()\n    else:\n        model.eval()\n    return [model(x) for x in val_loader]\n";
    assert_eq!(lines(a, "ML201"), lines(b, "ML201"));
    assert!(lines(a, "ML201").is_empty(), "evaluation on one path only");
    assert_eq!(lines(both, "ML201"), [8], "evaluation on every path");
}

#[test]
fn ml106_does_not_depend_on_the_optimizer_name() {
    let src = |name: &str| {
        format!("import torch\n\n\ndef step(model, x):\n    scaler = torch.amp.GradScaler(\"cuda\")\n    loss = model(x).sum()\n    scaler.scale(loss).backward()\n    {name} = torch.optim.SGD(model.parameters(), lr=0.1)\n    {name}.step()\n")
    };
    assert_eq!(lines(&src("optimizer"), "ML106"), [9], "reported today");
    assert_eq!(lines(&src("sgd"), "ML106"), [9], "the same code with another name");
}

#[test]
fn a_comprehension_over_parameters_binds_its_target() {
    let src = "import torch\nfrom torch import nn\nm = nn.Linear(2, 2)\n[q.add_(1) for q in m.parameters()]\n";
    assert_eq!(lines(src, "ML101"), [4]);
}

#[test]
fn a_nested_function_sees_the_enclosing_leaf() {
    let src = "import torch\n\ndef outer():\n    w = torch.zeros(3, requires_grad=True)\n\n    def inner():\n        w.add_(1)\n\n    inner()\n";
    assert_eq!(lines(src, "ML101"), [7]);
}

#[test]
fn data_after_backward_freed_the_graph_is_not_reported() {
    let src = "import torch\n\n\ndef train(net, target, opt, loader, tau):\n    for x in loader:\n        loss = net(x).sum()\n        opt.zero_grad()\n        loss.backward()\n        opt.step()\n        for p, tp in zip(net.parameters(), target.parameters()):\n            tp.data.copy_(tau * p.data + (1 - tau) * tp.data)\n";
    assert!(lines(src, "ML103").is_empty(), "a target-network update after the step: no graph is live");
}

#[test]
fn the_else_arm_does_not_see_what_the_if_arm_bound() {
    // Exclusive arms: the `else` arm writes a tensor nothing saved; after
    // the `if`, the `if` arm's facts hold where the `else` arm leaves the
    // name alone, and an arm that returns adds nothing.
    let exclusive = "import torch\n\ndef f(sig):\n    x = torch.randn(3, 2, requires_grad=True)\n    y = (x * 2).permute(1, 0)\n    if sig:\n        y = torch.sigmoid(y)\n    else:\n        y += 0.5\n    y.sum().backward()\n";
    assert!(lines(exclusive, "ML102").is_empty());
    let after = "import torch\n\ndef f(sig):\n    x = torch.randn(3, 2, requires_grad=True)\n    y = (x * 2).permute(1, 0)\n    if sig:\n        y = torch.sigmoid(y)\n    else:\n        s = 2\n    y += 0.5\n    y.sum().backward()\n";
    assert_eq!(lines(after, "ML102"), [10]);
    let returned = "import torch\n\ndef f(sig):\n    x = torch.randn(3, 2, requires_grad=True)\n    y = (x * 2).permute(1, 0)\n    if sig:\n        y = torch.sigmoid(y)\n        return y\n    else:\n        s = 2\n    y += 0.5\n    y.sum().backward()\n";
    assert!(lines(returned, "ML102").is_empty(), "the sigmoid arm returned");
}
