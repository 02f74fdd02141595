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
        let ExprKind::Call { func, .. } = &e.kind else { return };
        match &func.kind {
            ExprKind::Attribute { attr, .. } if matches!(attr.as_str(), "to" | "cuda" | "type") => {
                let Some((recv, non_blocking)) = self.accelerator_move(e) else { return };
                let Some(batch) = self.batch_base(recv) else { return };
                let mv = BatchMove {
                    span: e.span,
                    non_blocking,
                    loader: self.batch_loader_of(recv),
                    pinned: Self::pins_batch(recv),
                    batch: batch.to_string(),
                    function: self.frame().qualname.clone(),
                    step_loop: self.training_step_loop(),
                    in_training: self.training_loop().is_some(),
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
                if matches!(classify(e, Callee::Library(q.as_str())), Some(Event::LoaderNew)) {
                    let function = self.frame().qualname.clone();
                    self.pipeline.borrow_mut().loader_calls.push((e.span, function));
                }
            }
            _ => {}
        }
    }

    /// If `e` moves a tensor to an accelerator, its receiver and
    /// `non_blocking=` when written as a literal: `x.to(device)`,
    /// `x.cuda()`, tch's `x.to_device(device)`, and
    /// `x.type(torch.cuda.FloatTensor)` (always blocking unless told).
    pub(crate) fn accelerator_move<'e>(&self, e: &'e Expr) -> Option<(&'e Expr, Option<bool>)> {
        if let Some(arg) = self.moved_argument(e) {
            return Some((arg, None));
        }
        let (recv, method) = e.as_method_call()?;
        let non_blocking = match method {
            "type" => {
                let (_, args, _) = e.as_call()?;
                if !args.first().is_some_and(|t| self.names_cuda_tensor_type(t)) {
                    return None;
                }
                e.keyword("non_blocking").and_then(|v| match v.kind {
                    ExprKind::Literal(crate::ir::Literal::Bool(b)) => Some(b),
                    _ => None,
                })
            }
            "to" | "cuda" | "to_device" => {
                // `x.to(device)` with `device = torch.device("cpu")` only:
                // nothing leaves the host.
                let target = e.as_call().and_then(|(_, args, _)| args.first()).or_else(|| e.keyword("device"));
                if method != "cuda" && target.is_some_and(|d| self.names_the_cpu(d)) {
                    return None;
                }
                let callee = Callee::Method { name: method, receiver: Receiver::Tensor, receiver_is_path: false };
                match classify(e, callee) {
                    Some(Event::ToDevice { to_device: true, non_blocking, .. }) => non_blocking,
                    _ => return None,
                }
            }
            _ => return None,
        };
        Some((recv, non_blocking))
    }

    /// The argument a call of a project helper moves to an accelerator
    /// (`to_var(x)`, `self.get_torch_variable(z)`:
    /// [`crate::index::FunctionSummary::moves_param`]).
    pub fn moved_argument<'e>(&self, e: &'e Expr) -> Option<&'e Expr> {
        let ExprKind::Call { func, args, .. } = &e.kind else { return None };
        let name = match &func.kind {
            ExprKind::Name(n) | ExprKind::Attribute { attr: n, .. } => n,
            _ => return None,
        };
        if args.is_empty() || !self.index.may_move_an_argument(name) {
            return None;
        }
        args.get(self.project_callee(e)?.moves_param?)
    }

    /// Whether `t`, the argument of `x.type(t)`, is a CUDA tensor type:
    /// `torch.cuda.FloatTensor`, a name bound to one in some arm
    /// (`dtypeFloat = torch.cuda.FloatTensor` under `if
    /// torch.cuda.is_available():`), or a name like `Tensor`/`FloatTensor`
    /// in a file that mentions CUDA (`Tensor = torch.cuda.FloatTensor if
    /// cuda else torch.FloatTensor`).
    pub(super) fn names_cuda_tensor_type(&self, t: &Expr) -> bool {
        if self.qualified_name(t).is_some_and(|q| q.as_str().starts_with("torch.cuda.")) {
            return true;
        }
        t.as_name().is_some_and(|n| {
            n.ends_with("Tensor") && self.file_words().contains(crate::ir::Words::CUDA)
                || self.visible_frames().any(|f| f.cuda_types.contains(n))
        })
    }

    /// Whether `t` is written as a CUDA tensor type: `torch.cuda.FloatTensor`,
    /// or a choice with one in an arm (`torch.cuda.FloatTensor if cuda else
    /// torch.FloatTensor`).
    pub(super) fn is_cuda_tensor_type(&self, t: &Expr) -> bool {
        if let ExprKind::IfExp { body, orelse, .. } = &t.kind {
            return self.is_cuda_tensor_type(body) || self.is_cuda_tensor_type(orelse);
        }
        let last = match &t.kind {
            ExprKind::Attribute { attr, .. } => attr.as_str(),
            ExprKind::Name(n) => n.as_str(),
            _ => return false,
        };
        last.ends_with("Tensor")
            && self.qualified_name(t).is_some_and(|q| q.as_str().starts_with("torch.cuda.") && q.as_str().ends_with("Tensor"))
    }

    /// The file's input pipeline as walked so far: complete once the walk
    /// has finished (at [`super::Visitor::finish`]).
    pub fn pipeline(&self) -> std::cell::Ref<'_, Pipeline> {
        self.pipeline.borrow()
    }
}
