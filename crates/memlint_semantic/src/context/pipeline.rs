//! Recording the file's input pipeline as the walk meets it
//! ([`crate::facts::pipeline`]).

use crate::api::{classify, Callee, Event, Receiver};
use crate::facts::pipeline::{BatchMove, Pipeline};
use crate::ir::{Expr, ExprKind};

use super::Context;

impl Context {
    /// Records `e` if it builds a `DataLoader` or moves a loader's batch
    /// to an accelerator.
    pub(super) fn note_pipeline(&self, e: &Expr) {
        let ExprKind::Call { func, args, .. } = &e.kind else { return };
        match &func.kind {
            ExprKind::Attribute { value: recv, attr, .. } if matches!(attr.as_str(), "to" | "cuda" | "type") => {
                let to_accelerator = if attr.as_str() == "type" {
                    args.first().is_some_and(|t| self.names_cuda_tensor_type(t))
                } else {
                    let callee = Callee::Method { name: attr, receiver: Receiver::Tensor, receiver_is_path: false };
                    matches!(classify(e, callee), Some(Event::ToDevice { to_device: true, .. }))
                };
                if !to_accelerator || !self.is_batch_value(recv) {
                    return;
                }
                let non_blocking = match classify(e, Callee::Method { name: "to", receiver: Receiver::Tensor, receiver_is_path: false }) {
                    Some(Event::ToDevice { non_blocking, .. }) => non_blocking,
                    _ => None,
                };
                let mv = BatchMove {
                    span: e.span,
                    non_blocking,
                    loader: self.batch_loader_of(recv),
                    pinned: Self::pins_batch(recv),
                    function: self.frame().qualname.clone(),
                };
                self.pipeline.borrow_mut().moves.push(mv);
            }
            ExprKind::Name(_) | ExprKind::Attribute { .. } => {
                let last = match &func.kind {
                    ExprKind::Name(n) => n.as_str(),
                    ExprKind::Attribute { attr, .. } => attr.as_str(),
                    _ => return,
                };
                if last != "DataLoader" {
                    return;
                }
                let Some(q) = self.qualified_name(func) else { return };
                if matches!(classify(e, Callee::Library(q.as_str())), Some(Event::LoaderNew { .. })) {
                    let function = self.frame().qualname.clone();
                    self.pipeline.borrow_mut().loader_calls.push((e.span, function));
                }
            }
            _ => {}
        }
    }

    /// Whether `t`, the argument of `x.type(t)`, is a CUDA tensor type:
    /// `torch.cuda.FloatTensor`, or a name like `Tensor`/`FloatTensor` in
    /// a file that mentions CUDA (`Tensor = torch.cuda.FloatTensor if cuda
    /// else torch.FloatTensor`).
    fn names_cuda_tensor_type(&self, t: &Expr) -> bool {
        if let Some(q) = self.qualified_name(t) {
            if q.as_str().starts_with("torch.cuda.") {
                return true;
            }
        }
        t.as_name().is_some_and(|n| n.ends_with("Tensor")) && self.file_words().contains(crate::ir::Words::CUDA)
    }

    /// The file's input pipeline as walked so far: complete once the walk
    /// has finished (at [`super::Visitor::finish`]).
    pub fn pipeline(&self) -> std::cell::Ref<'_, Pipeline> {
        self.pipeline.borrow()
    }
}
