// Grad-off regions: a closure, a guard kept to the end of its block, and a
// guard dropped at once.
use tch::{nn, Tensor};

fn evaluate(net: &impl nn::Module, xs: &Tensor) -> f64 {
    let logits = tch::no_grad(|| {
        let out = net.forward(xs);
        out.softmax(-1, tch::Kind::Float)
    });
    let _guard = tch::no_grad_guard();
    let again = net.forward(xs);
    let _ = tch::no_grad_guard();
    f64::try_from(logits.mean(tch::Kind::Float) + again.sum(tch::Kind::Float)).unwrap_or(0.0)
}
