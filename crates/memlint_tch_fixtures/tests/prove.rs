//! Proof by execution of memlint's Rust fixtures, on the CPU: every case
//! of a fixture is run, a flagged case shows the hazard its rule describes
//! and a near miss does not.
//!
//! Which cases are flagged is read from each fixture's header (`must flag
//! lines ...`): the functions that hold those lines must be exactly the
//! cases a proof runs as flagged, and every other function of the fixture
//! must be run as a near miss, so a fixture and its proof cannot drift
//! apart.
//!
//! ML107, ML203, ML301, ML305 and ML306 are only compiled: ML107 flags an
//! idiom that does no harm, and the cost of the others (a base tensor's
//! memory held, cuDNN's algorithm search, a device-to-host sync, a
//! host-side fill and copy) is not shown by running a case once on the CPU.
#![allow(missing_docs, clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};

use memlint_tch_fixtures::{ml101, ml105, ml201, ml202};
use tch::nn::{self, Module, OptimizerConfig};
use tch::{Device, Kind, Tensor};

const CPU: (Kind, Device) = (Kind::Float, Device::Cpu);

/// Runs a case for its effect, its result unused.
fn ran<T>(_result: T) {}

/// A case: its function's name and how the proof runs it.
type Case<'a> = (&'static str, Box<dyn Fn() + 'a>);

fn fixture(file: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/rust").join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The name of the function a line declares (`pub fn name(`), if any.
fn declared(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("pub fn ")?;
    rest.split(|c: char| !(c.is_alphanumeric() || c == '_')).next()
}

/// The fixture's functions, and those holding its flagged lines.
fn cases_of(file: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let text = fixture(file);
    let lines: Vec<&str> = text.lines().collect();
    let header = lines[0];
    let list = header.split("must flag lines ").nth(1).and_then(|r| r.split(';').next()).expect("a fixture header");
    let all: BTreeSet<String> = lines.iter().filter_map(|l| declared(l)).map(str::to_string).collect();
    let flagged = list
        .split(',')
        .filter(|n| !n.trim().is_empty())
        .map(|n| n.trim().parse::<usize>().expect("a line number"))
        .map(|n| {
            let holder = lines[..n].iter().rev().find_map(|l| declared(l));
            holder.unwrap_or_else(|| panic!("{file}:{n}: a flagged line outside every function")).to_string()
        })
        .collect();
    (all, flagged)
}

/// Checks that the proof runs every case of `file`, the flagged ones as
/// flagged.
fn check_coverage(file: &str, flagged: &[Case], near: &[Case]) {
    let (all, header) = cases_of(file);
    let proved: BTreeSet<String> = flagged.iter().map(|c| c.0.to_string()).collect();
    assert_eq!(proved, header, "{file}: the proof's flagged cases are not the functions of the flagged lines");
    let run: BTreeSet<String> = flagged.iter().chain(near).map(|c| c.0.to_string()).collect();
    assert_eq!(run, all, "{file}: the proof does not run every case");
}

/// The panic message of `f`, if it panics.
fn panic_of(f: &dyn Fn()) -> Option<String> {
    let payload = catch_unwind(AssertUnwindSafe(f)).err()?;
    Some(
        payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_string()))
            .unwrap_or_default(),
    )
}

/// A store holding one linear layer whose variables have gradients.
fn store_with_grads() -> nn::VarStore {
    let vs = nn::VarStore::new(Device::Cpu);
    let layer = nn::linear(vs.root(), 3, 3, Default::default());
    layer.forward(&Tensor::ones([2, 3], CPU)).sum(Kind::Float).backward();
    vs
}

const LEAF_ERROR: &str = "a leaf Variable that requires grad is being used in an in-place operation";

#[test]
fn ml101_flagged_cases_raise_the_leaf_error_and_near_misses_run() {
    let flagged: Vec<Case> = vec![
        ("sgd_on_trainable_variables", Box::new(|| ml101::sgd_on_trainable_variables(&store_with_grads(), 0.1))),
        ("sgd_on_named_variables", Box::new(|| ml101::sgd_on_named_variables(&store_with_grads()))),
        ("fill_a_leaf", Box::new(ml101::fill_a_leaf)),
        ("zero_a_path_variable", Box::new(|| ml101::zero_a_path_variable(&nn::VarStore::new(Device::Cpu)))),
        ("copy_into_a_variable", Box::new(|| ml101::copy_into_a_variable(&nn::VarStore::new(Device::Cpu)))),
    ];
    let near: Vec<Case> = vec![
        ("sgd_under_a_guard", Box::new(|| ml101::sgd_under_a_guard(&store_with_grads(), 0.1))),
        ("sgd_inside_no_grad", Box::new(|| ml101::sgd_inside_no_grad(&store_with_grads(), 0.1))),
        ("fill_a_plain_tensor", Box::new(ml101::fill_a_plain_tensor)),
        ("fill_a_tensor_without_grad", Box::new(ml101::fill_a_tensor_without_grad)),
        ("out_of_place_update", Box::new(|| ran(ml101::out_of_place_update(&store_with_grads(), 0.1)))),
    ];
    check_coverage("ML101_inplace_on_leaf.rs", &flagged, &near);
    for (name, case) in &flagged {
        let message = panic_of(case.as_ref()).unwrap_or_else(|| panic!("ML101 {name}: ran without error"));
        assert!(message.contains(LEAF_ERROR), "ML101 {name}: another error: {message}");
    }
    for (name, case) in &near {
        assert_eq!(panic_of(case.as_ref()), None, "ML101 near miss {name} failed");
    }
}

/// The gradients of a store's variables by name (zeros where there is
/// none: libtorch's `zero_grad` sets them to none).
fn grads(vs: &nn::VarStore) -> BTreeMap<String, Tensor> {
    vs.variables()
        .into_iter()
        .map(|(name, t)| {
            let g = t.grad();
            (name, if g.defined() { g.copy() } else { t.zeros_like() })
        })
        .collect()
}

fn same(a: &BTreeMap<String, Tensor>, b: &BTreeMap<String, Tensor>) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|((n, x), (m, y))| n == m && x.allclose(y, 1e-4, 1e-6, false))
}

fn scaled(g: &BTreeMap<String, Tensor>, k: f64) -> BTreeMap<String, Tensor> {
    g.iter().map(|(n, t)| (n.clone(), t * k)).collect()
}

/// A regression problem, a one-layer net and an SGD optimizer with
/// learning rate 0: the parameters never move, so every backward of a step
/// adds the same gradient, and a loop that never zeroes ends with `steps`
/// times the gradient of one step.
struct Regression {
    vs: nn::VarStore,
    net: nn::Sequential,
    opt: nn::Optimizer,
    xs: Tensor,
    ys: Tensor,
}

impl Regression {
    fn new(outputs: i64) -> Self {
        tch::manual_seed(0);
        let vs = nn::VarStore::new(Device::Cpu);
        let net = nn::seq().add(nn::linear(vs.root(), 4, outputs, Default::default()));
        let opt = nn::Sgd::default().build(&vs, 0.0).unwrap();
        let xs = Tensor::randn([8, 4], CPU);
        let ys = if outputs == 1 { Tensor::randn([8, 1], CPU) } else { Tensor::from_slice(&[0i64, 1, 2, 0, 1, 2, 0, 1]) };
        Regression { vs, net, opt, xs, ys }
    }

    /// The gradient of one step (regression loss), the gradients zeroed
    /// again after.
    fn one_step(&mut self) -> BTreeMap<String, Tensor> {
        self.opt.zero_grad();
        self.net.forward(&self.xs).mse_loss(&self.ys, tch::Reduction::Mean).backward();
        let g = grads(&self.vs);
        self.opt.zero_grad();
        g
    }
}

#[test]
fn ml105_flagged_loops_apply_earlier_gradients_again_and_near_misses_do_not() {
    // Each case returns the gradients it leaves and those one step gives.
    let after_loop = |run: &dyn Fn(&mut Regression)| {
        let mut r = Regression::new(1);
        let g1 = r.one_step();
        run(&mut r);
        (grads(&r.vs), g1)
    };
    let accumulates = |name: &str, (left, g1): (BTreeMap<String, Tensor>, BTreeMap<String, Tensor>), steps: f64| {
        assert!(same(&left, &scaled(&g1, steps)), "ML105 {name}: the gradient left is not {steps} steps' worth");
    };
    let flagged: Vec<Case> = vec![
        ("train", Box::new(|| accumulates("train", after_loop(&|r| ml105::train(&r.net, &mut r.opt, &r.xs, &r.ys)), 10.0))),
        (
            "train_built_here",
            Box::new(|| {
                let xs = Tensor::randn([8, 4], CPU);
                let ys = Tensor::randn([8, 1], CPU);
                let vs = ml105::train_built_here(&xs, &ys, 0.0).unwrap();
                let vars = vs.variables();
                let (w, b) = (&vars["weight"], &vars["bias"]);
                let left = grads(&vs);
                let one: BTreeMap<String, Tensor> = {
                    let (w, b) = (w.detach().set_requires_grad(true), b.detach().set_requires_grad(true));
                    xs.matmul(&w.tr()).g_add(&b).mse_loss(&ys, tch::Reduction::Mean).backward();
                    [("bias".to_string(), b.grad()), ("weight".to_string(), w.grad())].into_iter().collect()
                };
                assert!(same(&left, &scaled(&one, 100.0)), "ML105 train_built_here: not 100 steps' worth");
            }),
        ),
        (
            "train_batches",
            Box::new(|| {
                let mut r = Regression::new(3);
                r.opt.zero_grad();
                r.net.forward(&r.xs).cross_entropy_for_logits(&r.ys).backward();
                let g1 = grads(&r.vs);
                r.opt.zero_grad();
                let batches: Vec<(Tensor, Tensor)> = (0..3).map(|_| (r.xs.copy(), r.ys.copy())).collect();
                ml105::train_batches(&r.net, &mut r.opt, &batches);
                assert!(same(&grads(&r.vs), &scaled(&g1, 3.0)), "ML105 train_batches: not 3 steps' worth");
            }),
        ),
        ("train_while", Box::new(|| accumulates("train_while", after_loop(&|r| ml105::train_while(&r.net, &mut r.opt, &r.xs, &r.ys)), 100.0))),
        (
            "train_with_a_typed_optimizer",
            Box::new(|| {
                let left = after_loop(&|r| ml105::train_with_a_typed_optimizer(&r.net, &mut r.opt, &r.xs, &r.ys));
                accumulates("train_with_a_typed_optimizer", left, 10.0);
            }),
        ),
        (
            "train_two_optimizers",
            Box::new(|| {
                tch::manual_seed(0);
                let (gs, ds) = (nn::VarStore::new(Device::Cpu), nn::VarStore::new(Device::Cpu));
                let g = nn::seq().add(nn::linear(gs.root(), 4, 4, Default::default()));
                let d = nn::seq().add(nn::linear(ds.root(), 4, 1, Default::default()));
                let mut opt_g = nn::Sgd::default().build(&gs, 0.0).unwrap();
                let mut opt_d = nn::Sgd::default().build(&ds, 0.0).unwrap();
                let z = Tensor::randn([8, 4], CPU);
                // One iteration's gradient of the generator: through the
                // discriminator's loss and its own.
                d.forward(&g.forward(&z)).mean(Kind::Float).backward();
                g.forward(&z).mean(Kind::Float).backward();
                let g1 = grads(&gs);
                opt_g.zero_grad();
                opt_d.zero_grad();
                ml105::train_two_optimizers(&g, &d, &mut opt_g, &mut opt_d, &z);
                assert!(same(&grads(&gs), &scaled(&g1, 10.0)), "ML105 train_two_optimizers: the generator's gradient is not 10 steps' worth");
            }),
        ),
    ];
    let keeps_one_step = |name: &str, (left, g1): (BTreeMap<String, Tensor>, BTreeMap<String, Tensor>)| {
        assert!(same(&left, &g1), "ML105 near miss {name}: the gradient left is not one step's");
    };
    let near: Vec<Case> = vec![
        ("train_zeroed", Box::new(|| keeps_one_step("train_zeroed", after_loop(&|r| ml105::train_zeroed(&r.net, &mut r.opt, &r.xs, &r.ys))))),
        (
            "train_backward_step",
            Box::new(|| keeps_one_step("train_backward_step", after_loop(&|r| ml105::train_backward_step(&r.net, &mut r.opt, &r.xs, &r.ys)))),
        ),
        (
            "train_backward_step_clip",
            Box::new(|| {
                let (left, g1) = after_loop(&|r| ml105::train_backward_step_clip(&r.net, &mut r.opt, &r.xs, &r.ys));
                let clipped = g1.iter().map(|(n, t)| (n.clone(), t.clamp(-0.5, 0.5))).collect();
                assert!(same(&left, &clipped), "ML105 near miss train_backward_step_clip: not one clipped step");
            }),
        ),
        (
            "train_zeroed_after",
            Box::new(|| {
                let (left, g1) = after_loop(&|r| ml105::train_zeroed_after(&r.net, &mut r.opt, &r.xs, &r.ys));
                assert!(same(&left, &scaled(&g1, 0.0)), "ML105 near miss train_zeroed_after: gradients left over");
            }),
        ),
        (
            "evaluate",
            Box::new(|| {
                let (left, g1) = after_loop(&|r| ran(ml105::evaluate(&r.net, &r.xs)));
                assert!(same(&left, &scaled(&g1, 0.0)), "ML105 near miss evaluate: gradients appeared");
            }),
        ),
    ];
    check_coverage("ML105_missing_zero_grad.rs", &flagged, &near);
    for (_, case) in flagged.iter().chain(&near) {
        case();
    }
}

thread_local! {
    /// `requires_grad()` of every output of [`recording_net`] on this thread.
    static FORWARDS: std::cell::RefCell<Vec<bool>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A 4-in, 1-out net that records whether each of its outputs carries a
/// graph (autograd on during its forward).
fn recording_net(vs: &nn::VarStore) -> nn::Sequential {
    nn::seq().add(nn::linear(vs.root(), 4, 1, Default::default())).add_fn(|x| {
        FORWARDS.with(|f| f.borrow_mut().push(x.requires_grad()));
        x.shallow_clone()
    })
}

/// The grad mode of each forward `run` makes.
fn forwards(run: impl FnOnce()) -> Vec<bool> {
    FORWARDS.with(|f| f.borrow_mut().clear());
    run();
    FORWARDS.with(|f| f.borrow().clone())
}

#[test]
fn ml201_flagged_evaluation_loops_run_their_forwards_with_grad_on() {
    tch::manual_seed(0);
    let vs = nn::VarStore::new(Device::Cpu);
    let net = recording_net(&vs);
    let batches: Vec<(Tensor, Tensor)> = (0..3).map(|_| (Tensor::randn([5, 4], CPU), Tensor::zeros([5], (Kind::Int64, Device::Cpu)))).collect();
    let regression: Vec<(Tensor, Tensor)> = (0..3).map(|_| (Tensor::randn([5, 4], CPU), Tensor::randn([5, 1], CPU))).collect();
    let samples: Vec<Tensor> = (0..3).map(|_| Tensor::randn([4], CPU)).collect();
    let data = tch::vision::dataset::Dataset {
        train_images: Tensor::randn([10, 4], CPU),
        train_labels: Tensor::zeros([10], (Kind::Int64, Device::Cpu)),
        // Two full batches of 256 (`test_iter` drops a smaller last one).
        test_images: Tensor::randn([512, 4], CPU),
        test_labels: Tensor::zeros([512], (Kind::Int64, Device::Cpu)),
        labels: 1,
    };
    let flagged: Vec<Case> = vec![
        ("test_accuracy", Box::new(|| ran(ml201::test_accuracy(&net, &data)))),
        ("evaluate", Box::new(|| ran(ml201::evaluate(&net, &regression)))),
        ("validate", Box::new(|| ran(ml201::validate(&net, &batches)))),
        ("epoch_end_eval", Box::new(|| ran(ml201::epoch_end_eval(&net, &batches)))),
        ("predict_all", Box::new(|| ran(ml201::predict_all(&net, &samples)))),
        ("evaluate_in_a_block", Box::new(|| ran(ml201::evaluate_in_a_block(&net, &batches)))),
    ];
    // Near misses with grad off, and those outside the rule's definition
    // (one forward, training, generation over tokens), which only run.
    let no_grad: Vec<Case> = vec![
        ("test_accuracy_no_grad", Box::new(|| ran(ml201::test_accuracy_no_grad(&net, &data)))),
        ("evaluate_under_guard", Box::new(|| ran(ml201::evaluate_under_guard(&net, &regression)))),
        ("test_each_under_no_grad", Box::new(|| ran(ml201::test_each_under_no_grad(&net, &data)))),
        ("evaluate_in_a_no_grad_block", Box::new(|| ran(ml201::evaluate_in_a_no_grad_block(&net, &batches)))),
    ];
    let x = Tensor::randn([2, 4], CPU);
    let single: Vec<Case> = vec![
        ("evaluate_with_a_dropped_guard", Box::new(|| ran(ml201::evaluate_with_a_dropped_guard(&net, &x)))),
        ("predict_one", Box::new(|| ran(ml201::predict_one(&net, &x)))),
    ];
    let other: Vec<Case> = vec![
        (
            "train_epoch",
            Box::new(|| {
                let mut opt = nn::Sgd::default().build(&vs, 0.0).unwrap();
                ml201::train_epoch(&net, &mut opt, &batches);
            }),
        ),
        (
            "decode",
            Box::new(|| {
                let embed = nn::seq().add_fn(|t| t.to_kind(Kind::Float).reshape([1, 1]).repeat([1, 4])).add(recording_net(&vs));
                ran(ml201::decode(&embed, &[0, 1, 2]));
            }),
        ),
    ];
    let near: Vec<Case> = no_grad.into_iter().chain(single).chain(other).collect();
    check_coverage("ML201_eval_without_no_grad.rs", &flagged, &near);
    for (name, case) in &flagged {
        let seen = forwards(case);
        assert!(seen.len() > 1 && seen.iter().all(|&g| g), "ML201 {name}: forwards with grad {seen:?}");
    }
    for (name, case) in &near[..4] {
        let seen = forwards(case);
        assert!(!seen.is_empty() && seen.iter().all(|&g| !g), "ML201 near miss {name}: forwards with grad {seen:?}");
    }
    for (name, case) in &near[4..6] {
        assert_eq!(forwards(case).len(), 1, "ML201 near miss {name}: not a single forward");
    }
    for (_, case) in &near[6..] {
        case();
    }
}

#[test]
fn ml202_flagged_totals_keep_every_steps_graph() {
    tch::manual_seed(0);
    let vs = nn::VarStore::new(Device::Cpu);
    let net = nn::seq().add(nn::linear(vs.root(), 4, 1, Default::default()));
    let mut opt = nn::Sgd::default().build(&vs, 1e-3).unwrap();
    let opt = std::cell::RefCell::new(&mut opt);
    let batches: Vec<(Tensor, Tensor)> = (0..3).map(|_| (Tensor::randn([5, 4], CPU), Tensor::randn([5, 1], CPU))).collect();
    let graph = |t: &Tensor| t.requires_grad();
    let all_graphs = |ts: &[Tensor]| !ts.is_empty() && ts.iter().all(graph);
    let flagged: Vec<Case> = vec![
        ("train_sum", Box::new(|| assert!(graph(&ml202::train_sum(&net, &mut opt.borrow_mut(), &batches)), "ML202 train_sum"))),
        ("train_push", Box::new(|| assert!(all_graphs(&ml202::train_push(&net, &mut opt.borrow_mut(), &batches)), "ML202 train_push"))),
        (
            "train_rebuilt_sum",
            Box::new(|| assert!(graph(&ml202::train_rebuilt_sum(&net, &mut opt.borrow_mut(), &batches)), "ML202 train_rebuilt_sum")),
        ),
        ("train_outputs", Box::new(|| assert!(all_graphs(&ml202::train_outputs(&net, &mut opt.borrow_mut(), &batches)), "ML202 train_outputs"))),
        (
            "train_sum_before_backward",
            Box::new(|| {
                assert!(graph(&ml202::train_sum_before_backward(&net, &mut opt.borrow_mut(), &batches)), "ML202 train_sum_before_backward")
            }),
        ),
    ];
    let near: Vec<Case> = vec![
        ("train_sum_values", Box::new(|| ran(ml202::train_sum_values(&net, &mut opt.borrow_mut(), &batches)))),
        (
            "train_push_detached",
            Box::new(|| {
                let kept = ml202::train_push_detached(&net, &mut opt.borrow_mut(), &batches);
                assert!(kept.len() == 3 && !kept.iter().any(graph), "ML202 near miss train_push_detached keeps a graph");
            }),
        ),
        ("train_sum_reset_each_step", Box::new(|| ml202::train_sum_reset_each_step(&net, &mut opt.borrow_mut(), &batches))),
        // Evaluation with grad on is ML201's hazard, not a training loop's.
        ("evaluate_sum", Box::new(|| ran(ml202::evaluate_sum(&net, &batches)))),
        ("train_sum_kind", Box::new(|| assert_eq!(ml202::train_sum_kind(&net, &mut opt.borrow_mut(), &batches), 15))),
    ];
    check_coverage("ML202_loss_accumulated_with_graph.rs", &flagged, &near);
    for (_, case) in flagged.iter().chain(&near) {
        case();
    }
}

/// Two linear layers (4 -> 4 -> 1, named `l1` and `l2`), every weight
/// `w`, every bias 0.
fn two_layers(vs: &nn::VarStore, w: f64) -> nn::Sequential {
    let config = nn::LinearConfig { ws_init: nn::Init::Const(w), bs_init: Some(nn::Init::Const(0.0)), bias: true };
    nn::seq().add(nn::linear(vs.root() / "l1", 4, 4, config)).add(nn::linear(vs.root() / "l2", 4, 1, config))
}

#[test]
fn ml103_flagged_changes_through_data_give_wrong_gradients_silently() {
    use memlint_tch_fixtures::ml103;
    tch::manual_seed(0);
    let xs = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0]);
    // The gradient each case should have: of `w * w` summed at w = 0.5 is
    // 2w = 1; of `xs * w * w` summed at w = 1 is 2 xs; of `xs * w +
    // w.w` (the penalty read through `.data`) is xs + 2w.
    let ones3 = Tensor::ones([3], CPU);
    let square_grad = 2.0 * &xs;
    let penalty_grad = &xs + 2.0 * Tensor::ones([4], CPU);
    let differs = |name: &str, got: &Tensor, right: &Tensor| {
        assert!(!got.allclose(right, 1e-5, 1e-6, false), "ML103 {name}: the gradient is right ({got:?})");
    };
    let agrees = |name: &str, got: &Tensor, right: &Tensor| {
        assert!(got.allclose(right, 1e-5, 1e-6, false), "ML103 near miss {name}: the gradient is wrong ({got:?})");
    };
    let flagged: Vec<Case> = vec![
        (
            "clamp_before_backward",
            Box::new(|| differs("clamp_before_backward", &ml103::clamp_before_backward(&nn::VarStore::new(Device::Cpu), 1), &ones3)),
        ),
        (
            "clip_variables_mid_step",
            Box::new(|| {
                // Weights of 3 clamped to 1 after the forward: the first
                // layer's gradient mixes the two (the second layer's clamped
                // weight, the forward's activations) and is the gradient at
                // neither.
                let (x, y) = (xs.view([1, 4]), Tensor::zeros([1, 1], CPU));
                let first_grad = |w: f64, run: &dyn Fn(&nn::VarStore, &nn::Sequential)| {
                    let vs = nn::VarStore::new(Device::Cpu);
                    let net = two_layers(&vs, w);
                    run(&vs, &net);
                    vs.variables()["l1.weight"].grad()
                };
                let plain = |_: &nn::VarStore, net: &nn::Sequential| net.forward(&x).mse_loss(&y, tch::Reduction::Mean).backward();
                let mixed = first_grad(3.0, &|vs, net| ml103::clip_variables_mid_step(vs, net, &x, &y, 1).unwrap());
                differs("clip_variables_mid_step", &mixed, &first_grad(3.0, &plain));
                differs("clip_variables_mid_step", &mixed, &first_grad(1.0, &plain));
            }),
        ),
        ("scale_a_leaf_mid_step", Box::new(|| differs("scale_a_leaf_mid_step", &ml103::scale_a_leaf_mid_step(&xs, 1), &square_grad))),
        ("swap_a_leaf_mid_step", Box::new(|| differs("swap_a_leaf_mid_step", &ml103::swap_a_leaf_mid_step(&xs, 1), &square_grad))),
        ("penalty_from_a_leaf_read", Box::new(|| differs("penalty_from_a_leaf_read", &ml103::penalty_from_a_leaf_read(&xs, 1), &penalty_grad))),
    ];
    let near: Vec<Case> = vec![
        (
            "clamp_after_backward",
            Box::new(|| agrees("clamp_after_backward", &ml103::clamp_after_backward(&nn::VarStore::new(Device::Cpu), 1), &ones3)),
        ),
        (
            "clamp_under_no_grad",
            // Under no_grad it still changes a saved tensor before the
            // backward: the gradient is wrong, but that is not ML103's
            // `.data`-bypasses-autograd hazard (the op is explicit).
            Box::new(|| ran(ml103::clamp_under_no_grad(&nn::VarStore::new(Device::Cpu), 1))),
        ),
        (
            "clip_variables_after_the_step",
            Box::new(|| {
                let vs = nn::VarStore::new(Device::Cpu);
                let net = two_layers(&vs, 3.0);
                ml103::clip_variables_after_the_step(&vs, &net, &xs.view([1, 4]), &Tensor::zeros([1, 1], CPU)).unwrap();
            }),
        ),
        ("init_weights", Box::new(|| ml103::init_weights(&nn::VarStore::new(Device::Cpu)))),
        ("read_an_output", Box::new(|| assert_eq!(ml103::read_an_output(&xs, 2), vec![10.0, 10.0]))),
    ];
    check_coverage("ML103_data_attribute.rs", &flagged, &near);
    for (_, case) in flagged.iter().chain(&near) {
        case();
    }
}

#[test]
fn fixtures_proven_elsewhere_are_whole_cases_too() {
    // ML107, ML203, ML301, ML305 and ML306 are compiled here; their effect
    // is an idiom (ML107), memory held or device time, not shown by a CPU
    // run of one case. Their headers still name functions, as the
    // convention wants.
    for file in [
        "ML107_data_attribute_in_setup.rs",
        "ML203_view_retains_base.rs",
        "ML301_cudnn_benchmark_dynamic_shapes.rs",
        "ML301_multi_scale.rs",
        "ML305_host_sync_in_loop.rs",
        "ML306_tensor_created_then_moved.rs",
    ] {
        let (all, flagged) = cases_of(file);
        assert!(flagged.is_subset(&all) && !flagged.is_empty(), "{file}");
    }
    // A file of near misses only.
    let (all, flagged) = cases_of("ML301_fixed_shapes.rs");
    assert!(flagged.is_empty() && !all.is_empty());
}
