//! Reads of a tensor's value back to the host (host syncs), and the
//! training-step loops that make one every step
//! ([`crate::facts::pipeline::Pipeline::synced_loops`]).

use crate::api::{classify, Callee, Event, Receiver};
use crate::ir::{Expr, ExprKind, Language, Stmt, StmtKind, UnaryOp};
use crate::ValueKind;

use super::Context;

/// How a call reads a tensor's value back to the host: the host waits
/// until every kernel queued before it has run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostRead<'e> {
    /// A tensor method: `.item()`, `.tolist()`, `.numpy()`, `.cpu()`,
    /// `.to("cpu")`, tch's `double_value`, `int64_value`, `to(Device::Cpu)`.
    Method(&'e str),
    /// `float(t)`, `int(t)`, `bool(t)` of a tensor (Python).
    Convert(&'e str),
    /// tch's `f64::try_from(&t)`, `Vec::<f32>::try_from(&t)`: the
    /// conversion's path, `f64::try_from`.
    TryFrom(String),
    /// A library function that waits for the device
    /// (`torch.cuda.synchronize`): its qualified name.
    Library(String),
}

/// Functions that read a clock, to time code.
const CLOCKS: &[&str] = &["time.time", "time.perf_counter", "time.monotonic", "time.time_ns", "time.perf_counter_ns", "timeit.default_timer"];

impl Context {
    /// How `call` reads a tensor's value back to the host, if it does.
    pub fn host_read<'e>(&self, call: &'e Expr) -> Option<HostRead<'e>> {
        let ExprKind::Call { func, args, .. } = &call.kind else { return None };
        if let Some((_, method)) = call.as_method_call() {
            let callee = Callee::Method { name: method, receiver: Receiver::Tensor, receiver_is_path: false };
            let sync = match classify(call, callee) {
                Some(Event::HostSync) => true,
                Some(Event::ToDevice { to_host: true, .. }) => args.len() <= 1,
                _ => false,
            };
            if sync {
                return Some(HostRead::Method(method));
            }
        }
        let d = func.dotted()?;
        match d.as_str() {
            "float" | "int" | "bool" => {
                let arg = args.first()?;
                let name = match d.as_str() {
                    "float" => "float",
                    "int" => "int",
                    _ => "bool",
                };
                (self.language() == Language::Python && self.is_tensor_value(arg)).then_some(HostRead::Convert(name))
            }
            "f64.try_from" | "f64.from" | "f32.try_from" | "f32.from" | "i64.try_from" | "i64.from" | "Vec.try_from" | "Vec.from" => {
                let arg = args.first()?;
                let inner = match &arg.kind {
                    ExprKind::Unary { op: UnaryOp::Ref | UnaryOp::RefMut, operand } => operand,
                    _ => arg,
                };
                self.is_tensor_value(inner).then(|| HostRead::TryFrom(d.as_str().replace('.', "::")))
            }
            _ => {
                let q = self.qualified_name(func)?;
                (classify(call, Callee::Library(q.as_str())) == Some(Event::HostSync)).then(|| HostRead::Library(q.as_str().to_string()))
            }
        }
    }

    /// A loss, a model output, or another value known to be a tensor.
    pub fn is_tensor_value(&self, e: &Expr) -> bool {
        self.carries_graph(e)
            || matches!(self.kind_of(e), Some(ValueKind::Tensor | ValueKind::Output))
            || e.dotted().is_some_and(|d| self.is_backward_root(&d))
    }

    /// Whether a method read of `call` reads a loader's batch that was
    /// never moved to a device in this function (`labels.numpy()` of `for
    /// imgs, labels in loader`): a CPU tensor, nothing to wait for.
    pub fn reads_host_batch(&self, call: &Expr) -> bool {
        let Some((recv, _)) = call.as_method_call() else { return false };
        let mut base = recv;
        while let ExprKind::Subscript { value, .. } = &base.kind {
            base = value;
        }
        let Some(name) = base.as_name() else { return false };
        if !self.is_batch(name) {
            return false;
        }
        let function = self.function_qualname();
        !self.pipeline().moves.iter().any(|m| m.function.as_deref() == function && m.batch == name)
    }

    /// Whether the current point reads `call` back to the host every
    /// training step: a host read ([`Context::host_read`]) of a device
    /// value, in a training-step loop, not under a logging interval, a
    /// user option or a logging condition, nor in an `except` handler.
    pub fn syncs_every_step(&self, call: &Expr) -> bool {
        self.in_training_step()
            && !(self.guarded_by_interval()
                || self.guarded_by_option()
                || self.guarded_by_logging_condition()
                || !self.handlers.is_empty())
            && self.host_read(call).is_some()
            && !self.reads_host_batch(call)
    }

    /// Whether the loop statement `lp` times its iterations and waits for
    /// the device on purpose to do it: its body (not under an `if`) calls
    /// a library function that waits for the device
    /// (`torch.cuda.synchronize()`), and the loop reads a clock
    /// (`time.time()`, `time.perf_counter()` in its body) or iterates a
    /// logger that times each item (`metric_logger.log_every(loader, ...)`).
    /// Reads of values in such a loop cost nothing more.
    pub fn times_every_iteration(&self, lp: &Stmt) -> bool {
        fn synchronizes(cx: &Context, body: &[Stmt]) -> bool {
            body.iter().any(|s| match &s.kind {
                StmtKind::Expr(e) => matches!(cx.host_read(e), Some(HostRead::Library(_))),
                StmtKind::With { body, .. } => synchronizes(cx, body),
                _ => false,
            })
        }
        let (body, iter) = match &lp.kind {
            StmtKind::For { body, iter, .. } => (body, Some(iter)),
            StmtKind::While { body, .. } => (body, None),
            _ => return false,
        };
        if !synchronizes(self, body) {
            return false;
        }
        let logger = iter.is_some_and(|it| {
            it.any(&mut |e| {
                e.as_method_call().is_some_and(|(_, m)| crate::resolve::words(m).iter().any(|w| w == "log"))
            })
        });
        let mut clock = false;
        crate::ir::for_each_stmt_in_function(body, &mut |s| {
            s.for_each_expr(|e| {
                clock |= e.any(&mut |x| {
                    x.as_call().is_some_and(|(f, _, _)| {
                        self.qualified_name(f).is_some_and(|q| CLOCKS.contains(&q.as_str()))
                    })
                });
            });
        });
        logger || clock
    }

    /// Records the training-step loop around `call` when `call` reads a
    /// value back to the host every step ([`Context::syncs_every_step`]).
    pub(super) fn note_sync(&self, call: &Expr) {
        let Some(id) = self.training_step_loop() else { return };
        if self.pipeline.borrow().synced_loops.contains(&id) || !self.syncs_every_step(call) {
            return;
        }
        self.pipeline.borrow_mut().synced_loops.push(id);
    }
}
