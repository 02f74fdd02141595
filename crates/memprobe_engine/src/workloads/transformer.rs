use tch::{nn, nn::Module, Device, Kind, Reduction, Tensor};

use super::{seeded, Batch, Fwd, Workload};
use crate::plan::SizePreset;

struct Layer {
    ln1: nn::LayerNorm,
    qkv: nn::Linear,
    proj: nn::Linear,
    ln2: nn::LayerNorm,
    fc1: nn::Linear,
    fc2: nn::Linear,
}

/// Decoder-only transformer: token + learned position embeddings, pre-norm
/// blocks (causal `scaled_dot_product_attention`, layer norm, GELU MLP with
/// ratio 4), a final layer norm and a vocabulary head; next-token
/// cross-entropy on synthetic tokens.
pub struct Transformer {
    vs: nn::VarStore,
    tok: nn::Embedding,
    pos: nn::Embedding,
    layers: Vec<Layer>,
    ln_f: nn::LayerNorm,
    head: nn::Linear,
    size: SizePreset,
    batch: i64,
    seq: i64,
    dim: i64,
    heads: i64,
    vocab: i64,
}

/// Extra positions so dynamic sequence lengths can exceed the default one.
const DYNAMIC_DELTA: i64 = 16;

impl Transformer {
    /// Builds the preset on `device`.
    pub fn new(size: SizePreset, batch: Option<i64>, device: Device) -> Transformer {
        let (b, seq, dim, heads, depth, vocab) = match size {
            SizePreset::Small => (8, 64, 128, 4, 2, 512),
            SizePreset::Medium => (16, 256, 256, 8, 4, 4096),
            SizePreset::Large => (16, 1024, 768, 12, 12, 32000),
        };
        let vs = nn::VarStore::new(device);
        let root = vs.root();
        let tok = nn::embedding(&root / "b0" / "tok", vocab, dim, Default::default());
        let pos = nn::embedding(&root / "b0" / "pos", seq + DYNAMIC_DELTA, dim, Default::default());
        let ln = |p: nn::Path| nn::layer_norm(p, vec![dim], Default::default());
        let lin = |p: nn::Path, i, o| nn::linear(p, i, o, Default::default());
        let layers = (0..depth)
            .map(|i| {
                let p = &root / format!("b{}", i + 1);
                Layer {
                    ln1: ln(&p / "ln1"),
                    qkv: lin(&p / "qkv", dim, 3 * dim),
                    proj: lin(&p / "proj", dim, dim),
                    ln2: ln(&p / "ln2"),
                    fc1: lin(&p / "fc1", dim, 4 * dim),
                    fc2: lin(&p / "fc2", 4 * dim, dim),
                }
            })
            .collect();
        let ln_f = ln(&root / "head" / "ln");
        let head = lin(&root / "head" / "out", dim, vocab);
        Transformer { vs, tok, pos, layers, ln_f, head, size, batch: batch.unwrap_or(b), seq, dim, heads, vocab }
    }

    fn seq_at(&self, step: usize, dynamic: bool) -> i64 {
        if dynamic {
            self.seq + DYNAMIC_DELTA * ((step % 3) as i64 - 1)
        } else {
            self.seq
        }
    }

    fn layer(&self, l: &Layer, x: &Tensor) -> Tensor {
        let (b, t, d) = (x.size()[0], x.size()[1], self.dim);
        let dh = d / self.heads;
        let qkv = l.qkv.forward(&l.ln1.forward(x)).view([b, t, 3, self.heads, dh]).permute([2, 0, 3, 1, 4]);
        let (q, k, v) = (qkv.get(0), qkv.get(1), qkv.get(2));
        let att = Tensor::scaled_dot_product_attention::<Tensor>(&q, &k, &v, None, 0.0, true, None, false);
        let att = att.transpose(1, 2).reshape([b, t, d]);
        let x = x + l.proj.forward(&att);
        let h = l.fc2.forward(&l.fc1.forward(&l.ln2.forward(&x)).gelu("none"));
        x + h
    }
}

impl Workload for Transformer {
    fn name(&self) -> &'static str {
        "transformer"
    }
    fn size_label(&self) -> String {
        self.size.name().into()
    }
    fn description(&self) -> String {
        format!(
            "decoder transformer, {} layers, d={}, {} heads, seq {}, vocab {}",
            self.layers.len(),
            self.dim,
            self.heads,
            self.seq,
            self.vocab
        )
    }
    fn loss_name(&self) -> &'static str {
        "next-token cross-entropy"
    }
    fn batch_size(&self) -> i64 {
        self.batch
    }
    fn input_shape(&self, step: usize, dynamic: bool) -> Vec<i64> {
        vec![self.batch, self.seq_at(step, dynamic)]
    }
    fn make_batch(&self, step: usize, dynamic: bool, seed: u64) -> Batch {
        seeded(seed, step);
        let t = self.seq_at(step, dynamic);
        Batch {
            input: Tensor::randint(self.vocab, [self.batch, t], (Kind::Int64, Device::Cpu)),
            target: Tensor::randint(self.vocab, [self.batch, t], (Kind::Int64, Device::Cpu)),
        }
    }
    fn num_segments(&self) -> usize {
        self.layers.len() + 2
    }
    fn segment(&self, i: usize, x: &Tensor, _f: Fwd) -> Tensor {
        if i == 0 {
            let t = x.size()[1];
            let pos = Tensor::arange(t, (Kind::Int64, x.device()));
            self.tok.forward(x) + self.pos.forward(&pos)
        } else if let Some(l) = self.layers.get(i - 1) {
            self.layer(l, x)
        } else {
            self.head.forward(&self.ln_f.forward(x))
        }
    }
    fn loss(&self, out: &Tensor, target: &Tensor) -> Tensor {
        out.view([-1, self.vocab]).cross_entropy_loss::<Tensor>(&target.view([-1]), None, Reduction::Mean, -100, 0.0)
    }
    fn var_store(&self) -> &nn::VarStore {
        &self.vs
    }
    fn num_blocks(&self) -> usize {
        self.layers.len() + 1
    }
    fn forward_flops_per_sample(&self) -> Option<f64> {
        let (t, d, v, l) = (self.seq as f64, self.dim as f64, self.vocab as f64, self.layers.len() as f64);
        let per_token = l * (2.0 * d * 3.0 * d + 2.0 * d * d + 2.0 * 2.0 * d * 4.0 * d) + 2.0 * d * v;
        // QK^T and AV counted over the full T×T score matrix, as PyTorch's FLOP counter does.
        let attention = l * 2.0 * (2.0 * t * t * d);
        Some(t * per_token + attention)
    }
    fn inplace_unsupported(&self) -> Option<String> {
        Some("the transformer uses GELU, whose backward needs its input: no in-place form autograd accepts".into())
    }
}
