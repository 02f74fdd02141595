use tch::{nn, nn::Module, Device, Kind, Reduction, Tensor};

use super::{relu, seeded, Batch, Fwd, Workload};
use crate::plan::SizePreset;

/// Multi-layer perceptron: `depth` hidden blocks (linear + ReLU) and a linear
/// head, cross-entropy over synthetic labels. Sized so activations, not
/// parameters, dominate memory (large batch, moderate width), which makes the
/// effect of accumulation and checkpointing visible.
pub struct Mlp {
    vs: nn::VarStore,
    blocks: Vec<nn::Linear>,
    head: nn::Linear,
    size: SizePreset,
    batch: i64,
    input: i64,
    hidden: i64,
    classes: i64,
}

impl Mlp {
    /// Builds the preset on `device`.
    pub fn new(size: SizePreset, batch: Option<i64>, device: Device) -> Mlp {
        let (b, input, hidden, depth, classes) = match size {
            SizePreset::Small => (8192, 64, 256, 4, 10),
            SizePreset::Medium => (16384, 256, 1024, 6, 100),
            SizePreset::Large => (65536, 1024, 4096, 8, 1000),
        };
        let vs = nn::VarStore::new(device);
        let root = vs.root();
        let mut blocks = Vec::new();
        for i in 0..depth {
            let fan_in = if i == 0 { input } else { hidden };
            blocks.push(nn::linear(&root / format!("b{i}"), fan_in, hidden, Default::default()));
        }
        let head = nn::linear(&root / "head", hidden, classes, Default::default());
        Mlp { vs, blocks, head, size, batch: batch.unwrap_or(b), input, hidden, classes }
    }
}

impl Workload for Mlp {
    fn name(&self) -> &'static str {
        "mlp"
    }
    fn size_label(&self) -> String {
        self.size.name().into()
    }
    fn description(&self) -> String {
        format!(
            "MLP {}→{}×{}→{} (linear+ReLU blocks)",
            self.input,
            self.hidden,
            self.blocks.len(),
            self.classes
        )
    }
    fn loss_name(&self) -> &'static str {
        "cross-entropy"
    }
    fn batch_size(&self) -> i64 {
        self.batch
    }
    fn input_shape(&self, _step: usize, _dynamic: bool) -> Vec<i64> {
        vec![self.batch, self.input]
    }
    fn make_batch(&self, step: usize, _dynamic: bool, seed: u64) -> Batch {
        seeded(seed, step);
        Batch {
            input: Tensor::randn([self.batch, self.input], (Kind::Float, Device::Cpu)),
            target: Tensor::randint(self.classes, [self.batch], (Kind::Int64, Device::Cpu)),
        }
    }
    fn num_segments(&self) -> usize {
        self.blocks.len() + 1
    }
    fn segment(&self, i: usize, x: &Tensor, f: Fwd) -> Tensor {
        match self.blocks.get(i) {
            Some(l) => relu(l.forward(x), f.inplace),
            None => self.head.forward(x),
        }
    }
    fn loss(&self, out: &Tensor, target: &Tensor) -> Tensor {
        out.cross_entropy_loss::<Tensor>(target, None, Reduction::Mean, -100, 0.0)
    }
    fn var_store(&self) -> &nn::VarStore {
        &self.vs
    }
    fn num_blocks(&self) -> usize {
        self.blocks.len()
    }
    fn forward_flops_per_sample(&self) -> Option<f64> {
        let d = self.blocks.len() as f64;
        let (i, h, c) = (self.input as f64, self.hidden as f64, self.classes as f64);
        Some(2.0 * (i * h + (d - 1.0) * h * h + h * c))
    }
    fn dynamic_unsupported(&self) -> Option<String> {
        Some("the MLP has no spatial or sequence dimension to vary".into())
    }
}
