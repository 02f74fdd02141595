use tch::{nn, nn::Module, nn::ModuleT, Device, Kind, Reduction, Tensor};

use super::{relu, seeded, Batch, Fwd, Workload};
use crate::plan::SizePreset;

struct ResBlock {
    conv1: nn::Conv2D,
    bn1: nn::BatchNorm,
    conv2: nn::Conv2D,
    bn2: nn::BatchNorm,
    shortcut: Option<(nn::Conv2D, nn::BatchNorm)>,
    cin: i64,
    cout: i64,
    stride: i64,
}

fn conv(p: nn::Path, cin: i64, cout: i64, k: i64, stride: i64) -> nn::Conv2D {
    let cfg = nn::ConvConfig { stride, padding: k / 2, bias: false, ..Default::default() };
    nn::conv2d(p, cin, cout, k, cfg)
}

impl ResBlock {
    fn new(p: nn::Path, cin: i64, cout: i64, stride: i64) -> ResBlock {
        let shortcut = (stride != 1 || cin != cout)
            .then(|| (conv(&p / "sc", cin, cout, 1, stride), nn::batch_norm2d(&p / "sc_bn", cout, Default::default())));
        ResBlock {
            conv1: conv(&p / "conv1", cin, cout, 3, stride),
            bn1: nn::batch_norm2d(&p / "bn1", cout, Default::default()),
            conv2: conv(&p / "conv2", cout, cout, 3, 1),
            bn2: nn::batch_norm2d(&p / "bn2", cout, Default::default()),
            shortcut,
            cin,
            cout,
            stride,
        }
    }

    fn forward(&self, x: &Tensor, f: Fwd) -> Tensor {
        let h = relu(self.bn1.forward_t(&self.conv1.forward(x), f.train), f.inplace);
        let mut h = self.bn2.forward_t(&self.conv2.forward(&h), f.train);
        let sc = match &self.shortcut {
            Some((c, bn)) => bn.forward_t(&c.forward(x), f.train),
            None => x.shallow_clone(),
        };
        if f.inplace {
            // batch norm's backward needs its input, not its output, so the
            // residual add may overwrite the output in place.
            let _ = h.g_add_(&sc);
            relu(h, true)
        } else {
            relu(h + sc, false)
        }
    }

    /// FLOPs of one sample at input spatial size `hw`; returns (flops, out hw).
    fn flops(&self, hw: i64) -> (f64, i64) {
        let out = (hw + self.stride - 1) / self.stride;
        let o2 = (out * out) as f64;
        let mut f = 2.0 * (self.cin * self.cout * 9) as f64 * o2 + 2.0 * (self.cout * self.cout * 9) as f64 * o2;
        if self.shortcut.is_some() {
            f += 2.0 * (self.cin * self.cout) as f64 * o2;
        }
        (f, out)
    }
}

/// ResNet-style convnet: a 3×3 stem, one residual block (two 3×3 convs with
/// batch norm) per stage with stride-2 downsampling between stages, global
/// average pooling and a linear classifier; cross-entropy on synthetic images.
pub struct ConvNet {
    vs: nn::VarStore,
    stem: nn::Conv2D,
    stem_bn: nn::BatchNorm,
    blocks: Vec<ResBlock>,
    head: nn::Linear,
    size: SizePreset,
    batch: i64,
    image: i64,
    widths: Vec<i64>,
    classes: i64,
}

impl ConvNet {
    /// Builds the preset on `device`.
    pub fn new(size: SizePreset, batch: Option<i64>, device: Device) -> ConvNet {
        let (b, image, widths, per_stage, classes): (i64, i64, Vec<i64>, usize, i64) = match size {
            SizePreset::Small => (32, 32, vec![16, 32, 64], 1, 10),
            SizePreset::Medium => (64, 64, vec![32, 64, 128, 256], 2, 100),
            SizePreset::Large => (128, 224, vec![64, 128, 256, 512], 2, 1000),
        };
        let vs = nn::VarStore::new(device);
        let root = vs.root();
        let stem = conv(&root / "b0" / "conv", 3, widths[0], 3, 1);
        let stem_bn = nn::batch_norm2d(&root / "b0" / "bn", widths[0], Default::default());
        let mut blocks = Vec::new();
        let mut cin = widths[0];
        let mut k = 1;
        for (s, &w) in widths.iter().enumerate() {
            for j in 0..per_stage {
                let stride = if s > 0 && j == 0 { 2 } else { 1 };
                blocks.push(ResBlock::new(&root / format!("b{k}"), cin, w, stride));
                cin = w;
                k += 1;
            }
        }
        let head = nn::linear(&root / "head", cin, classes, Default::default());
        ConvNet { vs, stem, stem_bn, blocks, head, size, batch: batch.unwrap_or(b), image, widths, classes }
    }

    fn image_at(&self, step: usize, dynamic: bool) -> i64 {
        if dynamic {
            // Three sizes in rotation: every step sees a shape the previous one did not.
            self.image + 8 * ((step % 3) as i64 - 1)
        } else {
            self.image
        }
    }
}

impl Workload for ConvNet {
    fn name(&self) -> &'static str {
        "convnet"
    }
    fn size_label(&self) -> String {
        self.size.name().into()
    }
    fn description(&self) -> String {
        format!(
            "ResNet-style convnet, widths {:?}, {} residual blocks with batch norm, {}×{} input",
            self.widths,
            self.blocks.len(),
            self.image,
            self.image
        )
    }
    fn loss_name(&self) -> &'static str {
        "cross-entropy"
    }
    fn batch_size(&self) -> i64 {
        self.batch
    }
    fn input_shape(&self, step: usize, dynamic: bool) -> Vec<i64> {
        let hw = self.image_at(step, dynamic);
        vec![self.batch, 3, hw, hw]
    }
    fn make_batch(&self, step: usize, dynamic: bool, seed: u64) -> Batch {
        seeded(seed, step);
        Batch {
            input: Tensor::randn(self.input_shape(step, dynamic), (Kind::Float, Device::Cpu)),
            target: Tensor::randint(self.classes, [self.batch], (Kind::Int64, Device::Cpu)),
        }
    }
    fn num_segments(&self) -> usize {
        self.blocks.len() + 2
    }
    fn segment(&self, i: usize, x: &Tensor, f: Fwd) -> Tensor {
        if i == 0 {
            relu(self.stem_bn.forward_t(&self.stem.forward(x), f.train), f.inplace)
        } else if let Some(b) = self.blocks.get(i - 1) {
            b.forward(x, f)
        } else {
            self.head.forward(&x.adaptive_avg_pool2d([1, 1]).flatten(1, -1))
        }
    }
    fn loss(&self, out: &Tensor, target: &Tensor) -> Tensor {
        out.cross_entropy_loss::<Tensor>(target, None, Reduction::Mean, -100, 0.0)
    }
    fn var_store(&self) -> &nn::VarStore {
        &self.vs
    }
    fn num_blocks(&self) -> usize {
        self.blocks.len() + 1
    }
    fn forward_flops_per_sample(&self) -> Option<f64> {
        let mut hw = self.image;
        let mut f = 2.0 * (3 * self.widths[0] * 9) as f64 * (hw * hw) as f64;
        for b in &self.blocks {
            let (bf, out) = b.flops(hw);
            f += bf;
            hw = out;
        }
        let last = self.widths.last().copied().unwrap_or(0);
        f += 2.0 * (last * self.classes) as f64;
        Some(f)
    }
    fn has_batch_norm(&self) -> bool {
        true
    }
    fn has_conv(&self) -> bool {
        true
    }
}
