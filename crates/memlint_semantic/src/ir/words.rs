//! The words a body mentions, recorded at lowering so that scans can skip
//! bodies that never name what they look for.

/// Which of a few identifiers a function (or a whole file) mentions, as
/// names, attributes or segments of import paths, recorded by the frontend
/// while it lowers. A walk
/// that looks for one of them (`backward()` calls, `.data` swaps,
/// `.train(flag)`) skips a body that never names it. The default (for IR
/// built by hand) says every word is mentioned, so nothing is skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Words(pub(super) u32);

impl Words {
    /// Nothing mentioned.
    pub const NONE: Words = Words(0);
    /// `backward` or `autograd` (`loss.backward()`, `torch.autograd.grad`).
    pub const BACKWARD: Words = Words(1);
    /// `data` (`p.data`).
    pub const DATA: Words = Words(1 << 1);
    /// `train` (`model.train(flag)`).
    pub const TRAIN: Words = Words(1 << 2);
    /// `scale` (`scaler.scale(loss)`).
    pub const SCALE: Words = Words(1 << 3);
    /// `no_grad`, `inference_mode` or `set_grad_enabled`.
    pub const GRAD_OFF: Words = Words(1 << 4);
    /// `amp` (`torch.cuda.amp.autocast`, also as a segment of an import path).
    pub const AMP: Words = Words(1 << 5);
    /// A `/` or `*` operator (`loss / n`, `loss *= scale`): not an
    /// identifier, but recorded the same way.
    pub const DIV_MUL: Words = Words(1 << 6);
    /// A method that stores its argument in a container (`append`,
    /// `extend`, `insert`, `add`, `setdefault`, `put`, `push`).
    pub const STORE: Words = Words(1 << 7);
    /// `cuda` (`torch.cuda`, `.cuda()`, a `"cuda"` string literal, tch's
    /// `cuda_if_available`): the program may run on a GPU.
    pub const CUDA: Words = Words(1 << 8);
    /// `grad` (`p.grad`): a gradient is read.
    pub const GRAD: Words = Words(1 << 9);
    /// `torch` as a name (`torch.zeros(...)`), not as an attribute.
    pub const TORCH: Words = Words(1 << 10);
    /// Every word.
    pub const ALL: Words = Words(u32::MAX);

    /// The word an identifier is, if any.
    pub fn of(ident: &str) -> Words {
        match ident {
            "backward" | "autograd" => Words::BACKWARD,
            "data" => Words::DATA,
            "train" => Words::TRAIN,
            "scale" => Words::SCALE,
            "no_grad" | "inference_mode" | "set_grad_enabled" => Words::GRAD_OFF,
            "amp" => Words::AMP,
            "append" | "extend" | "insert" | "add" | "setdefault" | "put" | "push" => Words::STORE,
            "cuda" | "cuda_if_available" | "Cuda" | "cudnn" => Words::CUDA,
            "grad" => Words::GRAD,
            "torch" => Words::TORCH,
            _ => Words::NONE,
        }
    }

    /// Whether every word of `other` is mentioned.
    pub fn contains(self, other: Words) -> bool {
        self.0 & other.0 == other.0
    }

    /// Both sets together.
    #[must_use]
    pub fn union(self, other: Words) -> Words {
        Words(self.0 | other.0)
    }

    /// This set without the words of `other`.
    #[must_use]
    pub fn without(self, other: Words) -> Words {
        Words(self.0 & !other.0)
    }
}

impl Default for Words {
    fn default() -> Self {
        Words::ALL
    }
}
