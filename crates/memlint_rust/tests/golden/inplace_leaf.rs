// In-place ops on leaves that require grad: outside and inside no_grad,
// through `.data()`, and `+=` on a tensor.
use tch::{Device, Kind, Tensor};

fn update(x: &Tensor) {
    let mut w = Tensor::zeros([3], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    w.copy_(x);
    tch::no_grad(|| {
        w.copy_(x);
    });
    w.data().add_(x);
    w += x;
    *w.borrow_mut() = x.shallow_clone();
}
