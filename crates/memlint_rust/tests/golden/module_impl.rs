// A model as a struct of layers with an `nn::Module` impl.
use tch::{nn, Tensor};

#[derive(Debug)]
struct Net {
    fc1: nn::Linear,
    fc2: nn::Linear,
}

impl Net {
    fn new(vs: &nn::Path) -> Net {
        let fc1 = nn::linear(vs / "fc1", 784, 128, Default::default());
        Net { fc1, fc2: nn::linear(vs / "fc2", 128, 10, nn::LinearConfig { bias: false, ..Default::default() }) }
    }
}

impl nn::Module for Net {
    fn forward(&self, xs: &Tensor) -> Tensor {
        xs.view([-1, 784]).apply(&self.fc1).relu().apply(&self.fc2)
    }
}
